// The event contract, one home: types and payloads of spec section 6, their JSON Schemas, how a delivery fails,
// what the workflow and its activities exchange, and the search-attribute keys. Everything here is sandbox-safe
// (the workflow imports it); the ajv validators live in ./validate, imported directly by those outside the sandbox.
export * from './events';
export * from './payloads';
export * from './schemas';
export * from './failures';
export * from './delivery';
export * from './search-attributes';
export * from './ids';
export * from './priority';
export * from './deferral';
export * from './retry-schedule';
export * from './sealing/unencrypted';
export * from './sealing/binding';
