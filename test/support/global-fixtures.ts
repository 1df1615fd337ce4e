// Mocha global fixtures: run once for the whole test run.
export { mochaGlobalTeardown } from './postgres';
