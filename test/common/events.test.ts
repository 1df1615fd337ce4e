import assert from 'node:assert/strict';
import { validateDeliveryInput, validateEvent } from '../../common/contract/validate';
import { VITAL_TYPES, WEBHOOK_TYPES, eventSchemas, type PayloadOf, type WebhookType } from '../../common/contract';
import { USER, fallPayload, vitalPayload } from '../support/deliveries';

/** A payload of each type, typed by the type derived from its schema: a change to a schema fails the typecheck here. */
const samples: { [T in WebhookType]: PayloadOf<T> } = {
  FALL_DETECTION: fallPayload,
  VITAL_THRESHOLD: vitalPayload,
  TEST: { test: 'hello' },
};

describe('event schemas (spec section 6)', () => {
  it('has one schema per event type, under its name, and accepts a value of each type derived from it', () => {
    assert.deepEqual(Object.keys(eventSchemas), [...WEBHOOK_TYPES]);
    for (const type of WEBHOOK_TYPES) {
      assert.equal(eventSchemas[type].$id, type);
      assert.equal(validateEvent(type, samples[type]), undefined, type);
    }
  });

  it('accepts the spec shapes, every vital type and reason high, low or null', () => {
    for (const vitalType of VITAL_TYPES)
      for (const reason of ['high', 'low', null])
        assert.equal(
          validateEvent('VITAL_THRESHOLD', {
            ...vitalPayload,
            triggeredVitals: [{ vitalType, badValue: 1.5, thresholdValue: 2, vital_id: 'v', reason }],
          }),
          undefined,
        );
  });

  const cases: [string, unknown, unknown, string][] = [
    [
      'unknown type',
      'SMOKE',
      fallPayload,
      'Unknown event type "SMOKE": expected one of FALL_DETECTION, VITAL_THRESHOLD, TEST',
    ],
    [
      'missing field',
      'FALL_DETECTION',
      { ...fallPayload, reasons: undefined },
      'Invalid FALL_DETECTION event: payload is missing the required field reasons',
    ],
    [
      'extra field',
      'FALL_DETECTION',
      { ...fallPayload, ssn: '1' },
      'Invalid FALL_DETECTION event: payload has the field ssn, which this event type does not allow',
    ],
    [
      'happenedAt not ISO 8601',
      'FALL_DETECTION',
      { ...fallPayload, happenedAt: '01/03/2025' },
      'Invalid FALL_DETECTION event: payload.happenedAt must be an ISO 8601 date-time with a time zone',
    ],
    [
      'userUUID not a UUID',
      'FALL_DETECTION',
      { ...fallPayload, userUUID: 'ada' },
      'Invalid FALL_DETECTION event: payload.userUUID must be a valid uuid',
    ],
    [
      'email',
      'FALL_DETECTION',
      { ...fallPayload, email: 'nope' },
      'Invalid FALL_DETECTION event: payload.email must be a valid email',
    ],
    [
      'vital type',
      'VITAL_THRESHOLD',
      { ...vitalPayload, triggeredVitals: [{ ...vitalPayload.triggeredVitals[0], vitalType: 'mood' }] },
      `Invalid VITAL_THRESHOLD event: payload.triggeredVitals[0].vitalType must be one of ${VITAL_TYPES.map((t) => `"${t}"`).join(', ')}`,
    ],
    [
      'reason',
      'VITAL_THRESHOLD',
      { ...vitalPayload, triggeredVitals: [{ ...vitalPayload.triggeredVitals[0], reason: 'medium' }] },
      'Invalid VITAL_THRESHOLD event: payload.triggeredVitals[0].reason must be one of "high", "low", null',
    ],
    [
      'badValue not a number',
      'VITAL_THRESHOLD',
      { ...vitalPayload, triggeredVitals: [{ ...vitalPayload.triggeredVitals[0], badValue: '182' }] },
      'Invalid VITAL_THRESHOLD event: payload.triggeredVitals[0].badValue must be number',
    ],
    [
      'TEST extra field',
      'TEST',
      { test: 'x', more: 1 },
      'Invalid TEST event: payload has the field more, which this event type does not allow',
    ],
    ['not an object', 'TEST', 'hello', 'Invalid TEST event: payload must be object'],
  ];
  for (const [name, type, payload, message] of cases)
    it(`names the problem: ${name}`, () => assert.equal(validateEvent(type, payload), message));

  it('checks the wrapper: project id, a UUID userUUID equal to the payload’s', () => {
    const input = { projectId: 'p1', webhookType: 'FALL_DETECTION', userUUID: USER, payload: fallPayload };
    assert.equal(validateDeliveryInput(input), undefined);
    for (const projectId of ['', 'p'.repeat(201)])
      assert.match(
        validateDeliveryInput({ ...input, projectId }) ?? '',
        /projectId must be a string of 1 to 200 characters/,
      );
    assert.match(validateDeliveryInput({ ...input, userUUID: 'x' }) ?? '', /userUUID must be a UUID/);
    assert.match(
      validateDeliveryInput({ ...input, userUUID: '00000000-0000-4000-8000-000000000000' }) ?? '',
      /userUUID differs from payload\.userUUID/,
    );
    assert.equal(
      validateDeliveryInput({ projectId: 'p1', webhookType: 'TEST', userUUID: '', payload: { test: 't' } }),
      undefined,
    );
  });
});
