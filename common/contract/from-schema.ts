// The type of the values a JSON Schema accepts, read from its `as const` literal: the payload types come from
// ./schemas, so the two cannot differ. Types only, sandbox-safe. Reads type, enum, properties, required and items
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
