// JSON Schemas of the events of spec section 6: data only, so the workflow sandbox may import them.
import { VITAL_TYPES, type WebhookType } from './events';

// Spec section 6. Every field is required and nothing else is accepted: the body is sent as is to the receiver.
// One schema per event type, under its name; the payload types are derived from them (./payloads: PayloadOf).
const personFields = {
  userUUID: { type: 'string', format: 'uuid' },
  email: { type: 'string', format: 'email' },
  firstName: { type: 'string' },
  lastName: { type: 'string' },
} as const;

export const eventSchemas = {
  FALL_DETECTION: {
    $id: 'FALL_DETECTION',
    type: 'object',
    properties: {
      ...personFields,
      reasons: { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } },
      happenedAt: { type: 'string', format: 'date-time' },
    },
    required: ['userUUID', 'reasons', 'happenedAt', 'email', 'firstName', 'lastName'],
    additionalProperties: false,
  },
  VITAL_THRESHOLD: {
    $id: 'VITAL_THRESHOLD',
    type: 'object',
    properties: {
      ...personFields,
      triggeredVitals: {
        type: 'array',
        minItems: 1,
        items: {
          type: 'object',
          properties: {
            vitalType: { type: 'string', enum: [...VITAL_TYPES] },
            badValue: { type: 'number' },
            thresholdValue: { type: 'number' },
            vital_id: { type: 'string', minLength: 1 },
            reason: { type: ['string', 'null'], enum: ['high', 'low', null] },
          },
          required: ['vitalType', 'badValue', 'thresholdValue', 'vital_id', 'reason'],
          additionalProperties: false,
        },
      },
    },
    required: ['triggeredVitals', 'userUUID', 'email', 'firstName', 'lastName'],
    additionalProperties: false,
  },
  TEST: {
    $id: 'TEST',
    type: 'object',
    properties: { test: { type: 'string' } },
    required: ['test'],
    additionalProperties: false,
  },
} as const satisfies { [T in WebhookType]: { $id: T; [keyword: string]: unknown } };
