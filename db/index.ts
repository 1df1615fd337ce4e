export * from './connection';
export * from './projects';
export * from './registrations';
export * from './breakers';
