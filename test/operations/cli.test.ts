import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import jwt from 'jsonwebtoken';
import { main } from '../../cli';
import { SUBSCRIBABLE_TYPES, WEBHOOK_TYPES } from '../../common/contract';
import { freePort } from '../../dev/ports';
import { recordRunningStack, type RunningStackAddresses } from '../../dev/running-stack';
import { migrationSource } from '../../db/migrations';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { TEST_JWT_SECRET } from '../support/tokens';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the CLI in this process, as `main(argv, io)` with only the variables given (plus PATH and HOME): the same
 * dispatcher, parsing and exit codes as the bin, without a tsx start-up per case.
 */
async function cli(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    out: (line) => void out.push(line),
    err: (line) => void err.push(line),
  });
  const text = (lines: string[]) => (lines.length ? lines.join('\n') + '\n' : '');
  return { code, stdout: text(out), stderr: text(err) };
}

const run = promisify(execFile);
const lastLine = (text: string) => text.trimEnd().split('\n').at(-1) ?? '';

describe('cli: operator commands', function () {
  this.timeout(60_000);
  let t: TestDatabase;
  let withDb: Record<string, string>;

  before(async () => {
    t = await createTestDatabase();
    withDb = { DATABASE_URL: t.url };
  });
  after(() => t?.destroy());

  const projectRow = (id: string) => t.db('projects').where({ id }).first<{ id: string; name: string | null }>();
  const members = async (projectId: string) =>
    (await t.db('project_members').where({ project_id: projectId }).select<{ user_id: string }[]>('user_id')).map(
      (r) => r.user_id,
    );

  it('migrate applies pending migrations, then reports the database up to date', async () => {
    await t.db.migrate.rollback({ migrationSource }, true);
    assert.equal(await t.db.schema.hasTable('projects'), false);
    const first = await cli(['migrate'], withDb);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /Applied migrations: 001_initial/);
    assert.equal(await t.db.schema.hasTable('webhook_registrations'), true);
    const again = await cli(['migrate'], withDb);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /already up to date/);
  });

  it('in production refuses a database command without DATABASE_URL, naming it', async () => {
    const result = await cli(['migrate'], { NODE_ENV: 'production', WEBHOOK_SECRET_KEY: 'ab'.repeat(32) });
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /DATABASE_URL is required/);
  });

  it('in development without DATABASE_URL uses the database `npm start` serves, and says so', async () => {
    const port = await freePort();
    const result = await cli(['migrate'], { DEV_POSTGRES_PORT: String(port) });
    assert.notEqual(result.code, 0); // nothing serves that port here
    assert.match(result.stderr, new RegExp(`using the database of \`npm start\` \\(127\\.0\\.0\\.1:${port}\\)`));
    assert.match(result.stderr, /ECONNREFUSED/);
  });

  it('project add creates a project with its name, and is idempotent', async () => {
    const first = await cli(['project', 'add', 'cli-p1', '--name', 'Care home north'], withDb);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /Project cli-p1 added/);
    assert.equal((await projectRow('cli-p1'))?.name, 'Care home north');
    const again = await cli(['project', 'add', 'cli-p1'], withDb);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /already exists/);
    assert.equal((await t.db('projects').where({ id: 'cli-p1' })).length, 1);
    assert.equal((await projectRow('cli-p1'))?.name, 'Care home north');
  });

  it('member add and member remove change the membership', async () => {
    await cli(['project', 'add', 'cli-p2'], withDb);
    const added = await cli(['member', 'add', 'cli-p2', 'user-7'], withDb);
    assert.equal(added.code, 0, added.stderr);
    assert.deepEqual(await members('cli-p2'), ['user-7']);
    const twice = await cli(['member', 'add', 'cli-p2', 'user-7'], withDb);
    assert.equal(twice.code, 0, twice.stderr);
    assert.match(twice.stdout, /already is a member/);
    const removed = await cli(['member', 'remove', 'cli-p2', 'user-7'], withDb);
    assert.equal(removed.code, 0, removed.stderr);
    assert.match(removed.stdout, /removed/);
    assert.deepEqual(await members('cli-p2'), []);
  });

  it('member add refuses an unknown project with the spec text and a non-zero exit', async () => {
    const result = await cli(['member', 'add', 'ghost', 'user-1'], withDb);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /No project with id ghost was found/);
    assert.deepEqual(await members('ghost'), []);
  });

  it('refuses missing, extra, empty and unknown arguments with exit 2 and the usage', async () => {
    for (const args of [
      ['member', 'add', 'cli-p2'],
      ['member', 'remove', 'cli-p2', 'u', 'extra'],
      ['project', 'add'],
      ['project', 'add', ' '],
      ['project', 'add', 'p', '--colour', 'red'],
    ]) {
      const result = await cli(args, withDb);
      assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, /Usage: webhooks /);
    }
    assert.equal(await projectRow('p'), undefined);
  });

  it('event emit takes the contract’s subscribable types, and names them in its refusal and usage', async () => {
    const user = '3f2b8c1e-9a4d-4c6b-8e2f-1a2b3c4d5e6f';
    const listed = `<${SUBSCRIBABLE_TYPES.join('|')}>`;
    for (const type of [...WEBHOOK_TYPES, 'SMOKE']) {
      // Without --data the command stops after checking the type: nothing reaches Temporal.
      const result = await cli(['event', 'emit', 'p1', type, '--user', user]);
      assert.equal(result.code, 2, `${type}: ${result.stderr}`);
      const taken = (SUBSCRIBABLE_TYPES as readonly string[]).includes(type);
      const said = taken
        ? '--data <json|@file> is required'
        : `<type> must be one of ${SUBSCRIBABLE_TYPES.join(', ')}\n`;
      assert.ok(result.stderr.includes(said), `${type}: ${result.stderr}`);
      assert.ok(result.stderr.includes(`Usage: webhooks event emit <projectId> ${listed} `), result.stderr);
    }
    assert.ok((await cli(['help'])).stdout.includes(listed));
  });

  it('refuses an unknown or missing command with exit 2 and lists the commands', async () => {
    for (const args of [['frobnicate'], ['member'], []]) {
      const result = await cli(args);
      assert.equal(result.code, 2, args.join(' '));
      assert.match(result.stderr, /member add <projectId> <userId>/);
    }
  });

  it('token prints an HS256 token for the user as its last line, valid for --ttl', async () => {
    const result = await cli(['token', 'user-42', '--ttl', '15m'], { JWT_SECRET: TEST_JWT_SECRET });
    assert.equal(result.code, 0, result.stderr);
    const token = lastLine(result.stdout);
    const claims = jwt.verify(token, TEST_JWT_SECRET, { algorithms: ['HS256'] }) as jwt.JwtPayload;
    assert.equal(claims.sub, 'user-42');
    assert.equal(claims.exp! - claims.iat!, 900);
    assert.ok(!result.stderr.includes(token));

    const byDefault = await cli(['token', 'user-42'], {
      JWT_SECRET: TEST_JWT_SECRET,
      JWT_ISSUER: 'iss',
      JWT_AUDIENCE: 'aud',
    });
    const defaults = jwt.verify(lastLine(byDefault.stdout), TEST_JWT_SECRET, {
      issuer: 'iss',
      audience: 'aud',
    }) as jwt.JwtPayload;
    assert.equal(defaults.exp! - defaults.iat!, 3600);
  });

  it('token without JWT_SECRET uses the development secret of `npm start` in DATA_DIR, and refuses in production', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'webhooks-cli-'));
    const dev = await cli(['token', 'user-42'], { DATA_DIR: dataDir });
    assert.equal(dev.code, 0, dev.stderr);
    const devSecret = readFileSync(join(dataDir, 'jwt-secret'), 'utf8').trim();
    assert.equal(
      (jwt.verify(lastLine(dev.stdout), devSecret, { algorithms: ['HS256'] }) as jwt.JwtPayload).sub,
      'user-42',
    );

    const production = {
      NODE_ENV: 'production',
      WEBHOOK_SECRET_KEY: 'ab'.repeat(32),
      PAYLOAD_ENCRYPTION_KEYS: `k1:${Buffer.alloc(32).toString('base64')}`,
      DATA_DIR: dataDir,
    };
    const noSecret = await cli(['token', 'user-42'], production);
    assert.equal(noSecret.code, 1);
    assert.match(noSecret.stderr, /JWT_SECRET is not set/);
    assert.equal(noSecret.stdout, '');
  });

  it('token refuses a bad --ttl', async () => {
    for (const ttl of ['soon', '0h', '31d', '-1h']) {
      const bad = await cli(['token', 'user-42', '--ttl', ttl], { JWT_SECRET: TEST_JWT_SECRET });
      assert.equal(bad.code, 2, ttl);
      assert.match(bad.stderr, /--ttl/);
      assert.equal(bad.stdout, '');
    }
  });

  describe('finding the stack `npm start` runs on DATA_DIR, from another terminal', () => {
    const USER = '3f2b8c1e-9a4d-4c6b-8e2f-1a2b3c4d5e6f';
    const emit = ['event', 'emit', 'p1', 'FALL_DETECTION', '--user', USER, '--data', '{}'];
    let dataDir: string;
    let forget: (() => void) | undefined;
    beforeEach(() => (dataDir = mkdtempSync(join(tmpdir(), 'webhooks-cli-stack-'))));
    afterEach(() => forget?.());

    /** A record left by a stack whose process died without removing it (a hard kill). */
    async function recordOfDeadStack(addresses: RunningStackAddresses): Promise<void> {
      const script = `require('./dev/running-stack').recordRunningStack(${JSON.stringify(dataDir)}, ${JSON.stringify(addresses)})`;
      await run(process.execPath, ['--require', 'tsx/cjs', '-e', script], { cwd: join(__dirname, '..', '..') });
    }

    it('uses the addresses the running stack recorded, whatever DEV_*_PORT say here', async () => {
      const temporalPort = await freePort();
      forget = recordRunningStack(dataDir, { DATABASE_URL: t.url, TEMPORAL_ADDRESS: `127.0.0.1:${temporalPort}` });
      const migrated = await cli(['migrate'], { DATA_DIR: dataDir });
      assert.equal(migrated.code, 0, migrated.stderr);
      assert.match(migrated.stdout, /already up to date/, 'reached the recorded database');
      const emitted = await cli(emit, { DATA_DIR: dataDir, TEMPORAL_CONNECT_TIMEOUT_MS: '500' });
      assert.match(
        emitted.stderr,
        new RegExp(`using the Temporal of \`npm start\` \\(127\\.0\\.0\\.1:${temporalPort}\\)`),
      );
    });

    it('ignores the record of a stack that is gone, and of a reused process id', async () => {
      const [postgresPort, temporalPort] = [await freePort(), await freePort()];
      const moved = {
        DATA_DIR: dataDir,
        DEV_POSTGRES_PORT: String(postgresPort),
        DEV_TEMPORAL_PORT: String(temporalPort),
      };
      await recordOfDeadStack({ DATABASE_URL: t.url, TEMPORAL_ADDRESS: '127.0.0.1:1' });
      const dead = await cli(['migrate'], moved);
      assert.notEqual(dead.code, 0, 'the recorded database of the dead stack was not used');
      assert.match(
        dead.stderr,
        new RegExp(`using the database of \`npm start\` \\(127\\.0\\.0\\.1:${postgresPort}\\)`),
      );
      const emitted = await cli(emit, { ...moved, TEMPORAL_CONNECT_TIMEOUT_MS: '500' });
      assert.match(
        emitted.stderr,
        new RegExp(`using the Temporal of \`npm start\` \\(127\\.0\\.0\\.1:${temporalPort}\\)`),
      );

      // A live process with the recorded pid that started at another time is not the stack.
      const record = join(dataDir, 'dev-stack.json');
      const reused = { ...(JSON.parse(readFileSync(record, 'utf8')) as object), pid: process.pid, pidStartedAt: '1' };
      writeFileSync(record, JSON.stringify(reused));
      const again = await cli(['migrate'], moved);
      assert.notEqual(again.code, 0);
      assert.match(again.stderr, new RegExp(`127\\.0\\.0\\.1:${postgresPort}`));
    });

    it('in production reads no record: TEMPORAL_ADDRESS is required', async () => {
      forget = recordRunningStack(dataDir, { TEMPORAL_ADDRESS: '127.0.0.1:1' });
      const production = {
        NODE_ENV: 'production',
        WEBHOOK_SECRET_KEY: 'ab'.repeat(32),
        PAYLOAD_ENCRYPTION_KEYS: `k1:${Buffer.alloc(32).toString('base64')}`,
        DATA_DIR: dataDir,
      };
      const result = await cli(emit, production);
      assert.equal(result.code, 1);
      assert.match(result.stderr, /TEMPORAL_ADDRESS is required/);
    });
  });
});
