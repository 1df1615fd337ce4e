// What one bench run measures and for how long: the full and quick plans, and the command line that picks stages.
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { NeighbourFault } from './neighbour';

/** Every stage, in the order a run takes them. `engine-search` runs only when asked for. */
export const STAGES = [
  'engine',
  'raw',
  'steady',
  'saturation',
  'api',
  'audit',
  'trail',
  'neighbour',
  'flood',
  'engine-search',
] as const;
export type Stage = (typeof STAGES)[number];
/** The engine search and the trail's contention run only when asked for (--stages). */
export const DEFAULT_STAGES: readonly Stage[] = STAGES.filter(
  (stage) => stage !== 'engine-search' && stage !== 'trail',
);
export const NEIGHBOUR_FAULTS: readonly NeighbourFault[] = ['hang', 'refuse', '503'];
/**
 * What the measured project's registration may carry (`--options`), to price each on the delivery path: `v1a` Ed25519
 * signatures beside the HMAC ones, `oauth` a bearer token from a token endpoint in the bench process (cached, as in
 * production), `rate` a rate limit too high to hold anything back (1000/s), so only its slot's cost shows.
 */
export const DELIVERY_OPTIONS = ['v1a', 'oauth', 'rate'] as const;
export type BenchDeliveryOption = (typeof DELIVERY_OPTIONS)[number];

/** `--engine`: Temporal's dev server (the default), or the production cluster of test/production (bench/cluster.ts). */
export const ENGINES = ['dev-server', 'cluster'] as const;
export type Engine = (typeof ENGINES)[number];

export interface Plan {
  mode: 'full' | 'quick';
  engine: Engine;
  stages: Stage[];
  faults: NeighbourFault[];
  /** The measured project's registration options (none by default). */
  options: BenchDeliveryOption[];
  n: number;
  sizes: number[];
  warmup: number;
  steadyRate: number;
  steadySeconds: number;
  apiSeconds: number;
  /** The test button's round trips (one at a time, after testWarmup unmeasured ones). */
  testRoundTrips: number;
  testWarmup: number;
  /** Audit stage: seconds per operation and variant, and rounds (each alternating which variant goes first). */
  auditSeconds: number;
  auditRounds: number;
  /** Trail stage: seconds of A's PATCH loops (trailLoops of them) beside B's PATCHes and breaker cycles. */
  trailSeconds: number;
  trailLoops: number;
  /** The stage API's AUDITED_WRITES_PER_MINUTE: high, so A's loops contend rather than get 429 (counted either way). */
  trailWritesPerMinute: number;
  /** Neighbour stage: seconds of load per fault, latency window, the failing and the healthy project's rates. */
  neighbourSeconds: number;
  windowSeconds: number;
  neighbourRate: number;
  healthyRate: number;
  recoveryDeadlineSeconds: number;
  /** Flood stage: seconds of vitals at this multiple of the engine's limit (at most floodMaxRate), falls alongside. */
  floodSeconds: number;
  floodFactor: number;
  floodMaxRate: number;
  /** The engine limit the flood is sized from when the engine stage is not in the run (the last measured one). */
  floodAssumedEngineRate: number;
  /** Engine search: empty workflows per configuration, after a warm-up of searchWarmup. */
  searchN: number;
  searchWarmup: number;
  /** Worker settings of the run (quick mode shortens the breaker so its stages finish in seconds). */
  workerEnv: Record<string, string>;
}

const FULL: Omit<Plan, 'stages' | 'faults' | 'options' | 'engine'> = {
  mode: 'full',
  n: 2_000,
  sizes: [500, 2_000, 5_000],
  warmup: 50,
  steadyRate: 20,
  steadySeconds: 30,
  apiSeconds: 10,
  testRoundTrips: 100,
  testWarmup: 5,
  auditSeconds: 10,
  auditRounds: 2,
  trailSeconds: 30,
  trailLoops: 20,
  trailWritesPerMinute: 1_000_000,
  neighbourSeconds: 120,
  windowSeconds: 15,
  neighbourRate: 20,
  healthyRate: 2,
  recoveryDeadlineSeconds: 360,
  floodSeconds: 60,
  floodFactor: 1.5,
  floodMaxRate: 500,
  floodAssumedEngineRate: 55,
  searchN: 1_000,
  searchWarmup: 50,
  workerEnv: {},
};
const QUICK: Omit<Plan, 'stages' | 'faults' | 'options' | 'engine'> = {
  mode: 'quick',
  n: 20,
  sizes: [10, 20],
  warmup: 5,
  steadyRate: 10,
  steadySeconds: 2,
  apiSeconds: 1,
  testRoundTrips: 5,
  testWarmup: 1,
  auditSeconds: 1,
  auditRounds: 1,
  trailSeconds: 3,
  trailLoops: 20,
  trailWritesPerMinute: 1_000_000,
  neighbourSeconds: 3,
  windowSeconds: 1,
  neighbourRate: 10,
  healthyRate: 2,
  recoveryDeadlineSeconds: 60,
  floodSeconds: 2,
  floodFactor: 1.5,
  floodMaxRate: 30,
  floodAssumedEngineRate: 20,
  searchN: 20,
  searchWarmup: 2,
  workerEnv: {
    WEBHOOK_TIMEOUT_MS: '1000',
    BREAKER_OPEN_MS: '1000',
    BREAKER_MAX_OPEN_MS: '2000',
    BREAKER_RESUME_SPREAD_MS: '500',
  },
};

export interface BenchArgs {
  plan: Plan;
  out: string;
  profile: boolean;
  keep: boolean;
  /** Where to write the dashboard's picture over this run (`--dashboard <png>`); none when not asked for. */
  dashboard?: string;
}

/** The stages that run the delivery worker, whose metrics the dashboard reads. */
export const WORKER_STAGES: readonly Stage[] = ['steady', 'saturation', 'neighbour', 'flood'];

/** A comma-separated list of names out of `allowed`, in `allowed`'s order, each once. */
function pick<T extends string>(text: string, allowed: readonly T[], option: string): T[] {
  const names = text
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const unknown = names.filter((name) => !allowed.includes(name as T));
  if (unknown.length) throw new Error(`--${option}: unknown ${unknown.join(', ')} (one of ${allowed.join(', ')})`);
  if (names.length === 0) throw new Error(`--${option} names none of ${allowed.join(', ')}`);
  return allowed.filter((name) => names.includes(name));
}

export function parseArgsToPlan(argv: string[]): BenchArgs {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      stages: { type: 'string' },
      'engine-search': { type: 'boolean', default: false },
      faults: { type: 'string' },
      options: { type: 'string' },
      engine: { type: 'string', default: 'dev-server' },
      n: { type: 'string' },
      sizes: { type: 'string' },
      'steady-seconds': { type: 'string' },
      'api-seconds': { type: 'string' },
      'test-round-trips': { type: 'string' },
      'audit-seconds': { type: 'string' },
      'trail-seconds': { type: 'string' },
      'trail-write-limit': { type: 'string' },
      'neighbour-seconds': { type: 'string' },
      'search-n': { type: 'string' },
      'search-warmup': { type: 'string' },
      out: { type: 'string', default: join(__dirname, 'results', 'latest.json') },
      profile: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      dashboard: { type: 'string' },
    },
  });
  const stages = values.stages ? pick(values.stages, STAGES, 'stages') : [...DEFAULT_STAGES];
  if (values['engine-search'] && !stages.includes('engine-search')) stages.push('engine-search');
  const faults = values.faults ? pick(values.faults, NEIGHBOUR_FAULTS, 'faults') : [...NEIGHBOUR_FAULTS];
  const options = values.options ? pick(values.options, DELIVERY_OPTIONS, 'options') : [];
  const [engine] = pick(values.engine, ENGINES, 'engine');
  if (engine === 'cluster' && stages.includes('engine-search'))
    throw new Error('--engine cluster: the engine search starts dev servers of its own; run it without --engine');
  const plan: Plan = { ...(values.quick ? QUICK : FULL), stages, faults, options, engine: engine! };
  const count = (text: string, name: string, min = 1) => {
    const value = Number(text);
    if (!Number.isInteger(value) || value < min) throw new Error(`--${name} must be an integer of at least ${min}`);
    return value;
  };
  if (values.n) plan.n = count(values.n, 'n');
  if (values.sizes) plan.sizes = values.sizes.split(',').map((size) => count(size, 'sizes'));
  if (values['steady-seconds']) plan.steadySeconds = count(values['steady-seconds'], 'steady-seconds');
  if (values['api-seconds']) plan.apiSeconds = count(values['api-seconds'], 'api-seconds');
  if (values['test-round-trips']) plan.testRoundTrips = count(values['test-round-trips'], 'test-round-trips');
  if (values['audit-seconds']) plan.auditSeconds = count(values['audit-seconds'], 'audit-seconds');
  if (values['trail-seconds']) plan.trailSeconds = count(values['trail-seconds'], 'trail-seconds');
  if (values['trail-write-limit']) plan.trailWritesPerMinute = count(values['trail-write-limit'], 'trail-write-limit');
  if (values['neighbour-seconds']) plan.neighbourSeconds = count(values['neighbour-seconds'], 'neighbour-seconds');
  if (values['search-n']) plan.searchN = count(values['search-n'], 'search-n');
  if (values['search-warmup']) plan.searchWarmup = count(values['search-warmup'], 'search-warmup', 0);
  if (!plan.sizes.includes(plan.n)) plan.sizes = [...plan.sizes, plan.n].sort((a, b) => a - b);
  if (values.dashboard !== undefined) {
    if (!values.dashboard.endsWith('.png')) throw new Error('--dashboard names the PNG to write (…/name.png)');
    if (!stages.some((stage) => WORKER_STAGES.includes(stage)))
      throw new Error(`--dashboard needs a stage that runs the delivery worker (${WORKER_STAGES.join(', ')})`);
  }
  return {
    plan,
    out: resolve(values.out),
    profile: values.profile,
    keep: values.keep,
    ...(values.dashboard !== undefined && { dashboard: resolve(values.dashboard) }),
  };
}

/** The command line that reproduces a run's selection. */
export function commandOf(plan: Plan): string {
  const args = [
    ...(plan.mode === 'quick' ? ['--quick'] : []),
    ...(plan.stages.join() === DEFAULT_STAGES.join() ? [] : [`--stages ${plan.stages.join(',')}`]),
    ...(plan.faults.join() === NEIGHBOUR_FAULTS.join() || !plan.stages.includes('neighbour')
      ? []
      : [`--faults ${plan.faults.join(',')}`]),
    ...(plan.options.length ? [`--options ${plan.options.join(',')}`] : []),
    ...(plan.engine === 'cluster' ? ['--engine cluster'] : []),
  ];
  return `npm run bench${args.length ? ` -- ${args.join(' ')}` : ''}`;
}
