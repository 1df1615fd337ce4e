export * from './connection';
export * from './projects';
export * from './registrations';
export * from './secret-rotation';
export * from './deliveries';
export * from './secret-reseal';
export * from './breakers';
export * from './portal-sessions';
