import type { WebhookType } from './events';
import type { eventSchemas } from './schemas';

// The payloads of spec section 6 and the workflow input, their types read from the JSON Schemas' `as const` literals
// (./schemas), so the two cannot differ. Types only, sandbox-safe. Reads type, enum, properties, required and items
// (format, minLength, … only narrow a value). An unread keyword below, an object allowing other properties, or one
// requiring a property it does not describe gives never, which fails the typecheck where the type is used.

/** Keywords that shape the accepted values in ways FromSchema does not read. */
type UnreadKeyword =
  'anyOf' | 'oneOf' | 'allOf' | 'not' | 'if' | '$ref' | 'const' | 'nullable' | 'prefixItems' | 'patternProperties';

type Simplify<T> = { [K in keyof T]: T[K] } & {};

type Primitive<Name> = Name extends 'string'
  ? string
  : Name extends 'number' | 'integer'
    ? number
    : Name extends 'boolean'
      ? boolean
      : Name extends 'null'
        ? null
        : never;

type RequiredOf<S> = S extends { required: readonly (infer R)[] } ? R : never;

type ObjectOf<S> = S extends { properties: infer P; additionalProperties: false }
  ? [Exclude<RequiredOf<S>, keyof P>] extends [never]
    ? Simplify<
        { -readonly [K in keyof P & RequiredOf<S>]: FromSchema<P[K]> } & {
          -readonly [K in Exclude<keyof P, RequiredOf<S>>]?: FromSchema<P[K]>;
        }
      >
    : never
  : never;

type TypeOf<S> = S extends { type: 'object' }
  ? ObjectOf<S>
  : S extends { type: 'array'; items: infer I }
    ? FromSchema<I>[]
    : S extends { type: infer Name }
      ? Primitive<Name extends readonly (infer Each)[] ? Each : Name>
      : unknown;

type ValueOf<S> = S extends { enum: readonly (infer V)[] } ? V & TypeOf<S> : TypeOf<S>;

/** The type of the values schema S accepts (a union of schemas gives the union of their types). */
export type FromSchema<S> = S extends unknown
  ? [Extract<keyof S, UnreadKeyword>] extends [never]
    ? ValueOf<S>
    : never
  : never;

/** The payload of each event type, derived from its JSON Schema (./schemas), so the two cannot differ. */
export type PayloadOf<T extends WebhookType> = FromSchema<(typeof eventSchemas)[T]>;
export type FallDetectionPayload = PayloadOf<'FALL_DETECTION'>;
export type VitalThresholdPayload = PayloadOf<'VITAL_THRESHOLD'>;
export type ThresholdResult = VitalThresholdPayload['triggeredVitals'][number];
export type TestPayload = PayloadOf<'TEST'>;
export type EventPayload = PayloadOf<WebhookType>;

/** Input of the `deliverWebhookEvent` workflow: the public contract for the monitoring system. */
export interface DeliverWebhookEventInput {
  projectId: string;
  webhookType: WebhookType;
  userUUID: string;
  /** The event data, sent as the request body (the wrapper with userUUID and webhookType is not sent). */
  payload: EventPayload;
  /** A redelivery's X-Webhook-Id: the original event's, so receivers deduplicate. Absent: the workflow id. */
  webhookId?: string;
  /**
   * The workflow id this input was sealed for (every start of ours sets it, inside the encrypted input): a copy of
   * the input started under another id is refused, so a copied history cannot deliver an event twice. Absent in
   * inputs from before it; a production worker refuses those when they arrive (histories in flight replay as they ran).
   */
  workflowId?: string;
}
