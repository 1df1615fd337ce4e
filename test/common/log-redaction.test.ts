import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { eventSchemas } from '../../common/contract';
import { createLogger } from '../../common/telemetry/logger';
import { createTestDatabase, type TestDatabase } from '../support/postgres';

/** A logger as shipped (createLogger), writing to memory. */
function memoryLogger() {
  const raw: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      raw.push(chunk.toString());
      done();
    },
  });
  return { logger: createLogger('trace', 'webhooks', sink), raw };
}

const PERSONAL_KEYS = [
  'email',
  'firstName',
  'lastName',
  'payload',
  'secret',
  'token',
  'triggeredVitals',
  'badValue',
  'password',
  'authorization',
  'apiKey',
  'accessToken',
  'secretSealed',
  'first_name',
];
const HARMLESS_KEYS = ['projectId', 'webhookType', 'attempt', 'context', 'details', 'items', 'cause', 'meta', 'req'];

/** A marker that cannot occur in a log line by accident. */
const marker = fc.stringMatching(/^[a-z]{6,12}$/).map((s) => `PHI-${s}-MARK`);

/** Wraps `leaf` under a path of harmless keys and arrays, `depth` levels deep. */
const nested = (leaf: Record<string, unknown>) =>
  fc
    .array(fc.oneof(fc.constantFrom(...HARMLESS_KEYS), fc.constant('[]')), { maxLength: 14 })
    .map((path) => path.reduceRight<unknown>((inner, step) => (step === '[]' ? [inner] : { [step]: inner }), leaf));

/** The property names a schema declares at any depth, read here on their own so a new payload field is tested too. */
function schemaPropertyNames(schema: unknown): string[] {
  const { properties = {}, items } = schema as { properties?: Record<string, unknown>; items?: unknown };
  return [
    ...Object.entries(properties).flatMap(([key, value]) => [key, ...schemaPropertyNames(value)]),
    ...(items ? schemaPropertyNames(items) : []),
  ];
}

describe('log redaction at any depth (property)', () => {
  it('no logger call leaks a personal field, however deep and however passed (object, child, error)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PERSONAL_KEYS),
        marker,
        fc.constantFrom('object', 'child', 'error-field', 'nested-error', 'array-root'),
        fc.boolean(),
        (key, secretValue, style, asObject) => {
          const leafValue = asObject ? { value: secretValue } : secretValue;
          const { logger, raw } = memoryLogger();
          const sample = fc.sample(nested({ [key]: leafValue, projectId: 'p-visible' }), { numRuns: 1 })[0];
          const wrapped = Array.isArray(sample) || style === 'array-root' ? { context: sample } : (sample as object);
          if (style === 'object') logger.info(wrapped, 'event');
          else if (style === 'child') logger.child(wrapped).warn('event');
          else if (style === 'error-field') logger.error({ err: Object.assign(new Error('boom'), wrapped) }, 'failed');
          else if (style === 'nested-error')
            logger.error({ failure: { cause: Object.assign(new Error('boom'), wrapped) } }, 'failed');
          else logger.info(wrapped, 'event');
          const line = raw.join('');
          assert.ok(!line.includes(secretValue), `${key} leaked (${style}): ${line}`);
          return true;
        },
      ),
      { numRuns: 400 },
    );
  });

  const payloadFields = [...new Set(Object.values(eventSchemas).flatMap(schemaPropertyNames))];

  it('covers every payload field of the event schemas, body and userUUID, however deep and however passed', () => {
    for (const field of ['userUUID', 'reasons', 'happenedAt', 'triggeredVitals', 'vital_id', 'reason', 'test'])
      assert.ok(payloadFields.includes(field), `the schemas declare ${field}`);
    fc.assert(
      fc.property(
        fc.constantFrom(...payloadFields, 'body', 'userUUID', 'user_uuid', 'Body'),
        marker,
        fc.constantFrom('object', 'child', 'error-field', 'nested-error'),
        fc.oneof(fc.constant('string'), fc.constant('array'), fc.constant('object')),
        (key, secretValue, style, shape) => {
          const leafValue = shape === 'string' ? secretValue : shape === 'array' ? [secretValue] : { v: secretValue };
          const { logger, raw } = memoryLogger();
          const sample = fc.sample(nested({ [key]: leafValue }), { numRuns: 1 })[0];
          const wrapped = Array.isArray(sample) ? { context: sample } : (sample as object);
          if (style === 'object') logger.info(wrapped, 'event');
          else if (style === 'child') logger.child(wrapped).warn('event');
          else if (style === 'error-field') logger.error({ err: Object.assign(new Error('boom'), wrapped) }, 'failed');
          else logger.error({ failure: { cause: Object.assign(new Error('boom'), wrapped) } }, 'failed');
          assert.ok(!raw.join('').includes(secretValue), `${key} leaked (${style}): ${raw.join('')}`);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('a whole FALL_DETECTION and VITAL_THRESHOLD event, and a body holding one, show none of their values', () => {
    const { logger, raw } = memoryLogger();
    const fall = {
      userUUID: 'b5a0e3a2-0000-4000-8000-00000000fa11',
      reasons: ['MARK-reason-slipped'],
      happenedAt: '1999-09-09T09:09:09.999Z',
      email: 'mark-grace@example.com',
      firstName: 'MARK-Grace',
      lastName: 'MARK-Hopper',
    };
    const vital = {
      userUUID: fall.userUUID,
      email: fall.email,
      firstName: fall.firstName,
      lastName: fall.lastName,
      triggeredVitals: [
        { vitalType: 'glucose', badValue: 987.654, thresholdValue: 123.456, vital_id: 'MARK-vital', reason: 'high' },
      ],
    };
    // Spread into a context, not under `payload`: every field on its own must be redacted.
    logger.info({ projectId: 'p1', context: { event: { ...fall } } }, 'fall');
    logger.warn({ projectId: 'p1', attempt: { input: { data: [{ ...vital }] } } }, 'vital');
    logger.child({ delivery: { ...vital.triggeredVitals[0] } }).info('child');
    logger.error({ response: { body: JSON.stringify(fall) }, request: { body: Buffer.from('MARK-raw') } }, 'body');
    const lines = raw.join('');
    for (const value of [fall.userUUID, 'MARK', '1999-09-09', 'glucose', '987.654', '123.456', '"high"'])
      assert.ok(!lines.includes(value), `${value} leaked: ${lines}`);
    assert.equal(lines.match(/"projectId":"p1"/g)?.length, 2, 'harmless fields stay');
  });

  it('keeps harmless fields at any depth (the redaction is not a blanket)', () => {
    fc.assert(
      fc.property(marker, (value) => {
        const { logger, raw } = memoryLogger();
        const sample = fc.sample(nested({ projectId: value }), { numRuns: 1 })[0];
        logger.info({ context: sample }, 'event');
        return raw.join('').includes(value);
      }),
      { numRuns: 100 },
    );
  });

  it('a real event logged by mistake shows none of its personal fields, and the original object is untouched', () => {
    const { logger, raw } = memoryLogger();
    const event = {
      projectId: 'p1',
      webhookType: 'VITAL_THRESHOLD',
      data: {
        // A value with a decimal point: "182" alone can turn up in the line's own timestamp (it did, once in CI).
        triggeredVitals: [{ vitalType: 'heartrate', badValue: 182.5 }],
        email: 'ada@example.com',
        firstName: 'Ada',
        lastName: 'Lovelace',
      },
    };
    const circular: Record<string, unknown> = { event };
    circular.self = circular;
    logger.info({ circular }, 'event received');
    const line = raw.join('');
    for (const value of ['ada@example.com', 'Lovelace', 'heartrate', '182.5']) assert.ok(!line.includes(value), value);
    assert.match(line, /"projectId":"p1"/);
    assert.match(line, /\[circular\]/);
    assert.equal(event.data.email, 'ada@example.com', 'the logged object is not modified');
  });

  it('redacts every personal-data key, however it is spelled, and keeps the line readable', () => {
    const personal = [
      'body',
      'rawBody',
      'payload',
      'payloads',
      'emails',
      'contact_email',
      'fullName',
      'given_name',
      'familyName',
      'display-name',
      'middleName',
      'phone',
      'phoneNumber',
      'date_of_birth',
      'birthDate',
      'vitals',
      'bindings',
      'parameters',
    ];
    const { logger, raw } = memoryLogger();
    logger.info({ context: Object.fromEntries(personal.map((key) => [key, `MARK-${key}`])), projectId: 'p1' }, 'x');
    const logged = JSON.parse(raw.join('')) as { context: Record<string, unknown>; projectId: string };
    for (const key of personal) assert.equal(logged.context[key], '[redacted]', key);
    assert.equal(logged.projectId, 'p1');
  });

  it('shows dates as times, binary data as its size, and a Map as its entries, redacted', () => {
    const { logger, raw } = memoryLogger();
    const at = new Date('2026-11-24T01:02:03.004Z');
    logger.info(
      {
        context: {
          at,
          bytes: new Uint8Array([77, 65, 82, 75]),
          buffer: Buffer.from('MARK-buffer'),
          samples: new Float64Array(3),
          headers: new Map<string, string>([
            ['x-request-id', 'r1'],
            ['authorization', 'Bearer MARK-token'],
          ]),
        },
      },
      'x',
    );
    const { context } = JSON.parse(raw.join('')) as { context: Record<string, unknown> };
    assert.deepEqual(context, {
      at: at.toISOString(),
      bytes: '[4 bytes]',
      buffer: '[11 bytes]',
      samples: '[24 bytes]',
      headers: { 'x-request-id': 'r1', authorization: '[redacted]' },
    });
  });

  it('shows an object referenced twice (not a cycle) in full both times', () => {
    const { logger, raw } = memoryLogger();
    const endpoint = { projectId: 'p1', url: 'https://receiver.example/hooks' };
    logger.info({ before: endpoint, after: [endpoint] }, 'x');
    const logged = JSON.parse(raw.join('')) as { before: unknown; after: unknown[] };
    assert.deepEqual(logged.before, endpoint);
    assert.deepEqual(logged.after, [endpoint]);
  });

  it('cuts nesting deeper than 32 levels, through objects, arrays, Maps and errors, and still redacts above it', () => {
    const { logger, raw } = memoryLogger();
    const deep = (wrap: (inner: unknown) => unknown) => {
      let value: unknown = { token: 'MARK-deep-token', leaf: 'MARK-leaf' };
      for (let level = 0; level < 40; level++) value = wrap(value);
      return value;
    };
    const shallow = (wrap: (inner: unknown) => unknown) => {
      let value: unknown = { token: 'MARK-shallow-token', leaf: 'shallow-leaf' };
      for (let level = 0; level < 8; level++) value = wrap(value);
      return value;
    };
    const wraps = {
      objects: (inner: unknown) => ({ inner }),
      arrays: (inner: unknown) => [inner],
      maps: (inner: unknown) => new Map([['inner', inner]]),
      errors: (inner: unknown) => Object.assign(new Error('wrapped'), { list: [inner] }),
    };
    for (const [kind, wrap] of Object.entries(wraps)) {
      raw.length = 0;
      logger.info({ deep: deep(wrap), shallow: shallow(wrap) }, kind);
      const line = raw.join('');
      assert.match(line, /"\[too deep\]"/, kind);
      assert.ok(!line.includes('MARK-leaf'), `${kind}: the part past the limit is not shown`);
      assert.ok(line.includes('shallow-leaf'), `${kind}: a shallow value is shown`);
      assert.ok(!line.includes('MARK-shallow-token') && !line.includes('MARK-deep-token'), kind);
    }
  });

  it("keeps the message and code of an error that is not PostgreSQL's, even with a five-letter code", () => {
    const { logger, raw } = memoryLogger();
    const errors = [
      Object.assign(new Error('write EPIPE'), { code: 'EPIPE', syscall: 'write' }),
      Object.assign(new Error('socket hang up'), { code: 'ECONNRESET', severity: 'warning' }),
      Object.assign(new Error('bad input'), { code: 'XBADIN', severity: 'error' }),
    ];
    for (const err of errors) logger.error({ err }, 'failed');
    const logged = raw.map((line) => (JSON.parse(line) as { err: { message: string; code: string } }).err);
    assert.deepEqual(
      logged.map(({ message, code }) => [message, code]),
      errors.map(({ message, code }) => [message, code]),
    );
  });

  describe('Knex errors (real PostgreSQL)', () => {
    let t: TestDatabase;
    before(async () => (t = await createTestDatabase()));
    after(() => t?.destroy());

    it('a failed query logs its SQLSTATE and table, never the bound values', async () => {
      await t.db.schema.createTable('log_probe', (table) => {
        table.text('email').primary();
      });
      await t.db('log_probe').insert({ email: 'grace@example.com' });
      const error = await t
        .db('log_probe')
        .insert({ email: 'grace@example.com' })
        .then(
          () => assert.fail('the insert should violate the primary key'),
          (e: unknown) => e as Error,
        );
      assert.match(String(error.message) + JSON.stringify(error), /grace@example\.com/, 'the raw error does hold it');
      const { logger, raw } = memoryLogger();
      logger.error({ err: error }, 'request failed');
      const line = raw.join('');
      assert.ok(!line.includes('grace@example.com'), line);
      const logged = JSON.parse(line) as { err: Record<string, unknown> };
      assert.deepEqual(logged.err, {
        type: 'error',
        message: 'database error 23505 (query and values withheld)',
        code: '23505',
        severity: 'ERROR',
        table: 'log_probe',
        constraint: 'log_probe_pkey',
        routine: '_bt_check_unique',
      });
    });

    it('a NOT NULL violation names its column, never the row', async () => {
      await t.db.schema.createTable('log_probe_null', (table) => {
        table.text('email').notNullable();
        table.text('phone').notNullable();
      });
      const error = await t
        .db('log_probe_null')
        .insert({ email: 'ada@example.com', phone: null })
        .then(
          () => assert.fail('the insert should violate NOT NULL'),
          (e: unknown) => e as Error,
        );
      const { logger, raw } = memoryLogger();
      logger.error({ err: error }, 'request failed');
      const line = raw.join('');
      assert.ok(!line.includes('ada@example.com'), line);
      const logged = JSON.parse(line) as { err: Record<string, unknown> };
      assert.equal(logged.err.code, '23502');
      assert.equal(logged.err.column, 'phone');
      assert.equal(logged.err.table, 'log_probe_null');
    });
  });
});
