// The trail stage's load generator (bench/trail.ts), a process of its own so that A's client loops share no event loop
// with B's timed calls: `loops` loops PATCH project A's webhook on one API process, each call a new URL path (a real
// change, so a row). Reads its task from BENCH_TRAIL_LOAD (JSON), prints {"ready":true} on stdout, starts when a line
// arrives on stdin, and prints its counts as one JSON line on stdout before it exits.
import { createInterface } from 'node:readline';

export interface TrailLoadTask {
  /** The API process A's loops call, e.g. http://127.0.0.1:1234. */
  url: string;
  /** A's member's bearer token. */
  token: string;
  projectId: string;
  loops: number;
  seconds: number;
}

export interface TrailLoadCounts {
  accepted: number;
  refused: number;
  other: number;
  /** From the start line to the last loop's end, in ms. */
  spanMs: number;
}

export type TrailLoadLine = { ready: true } | { counts: TrailLoadCounts };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function run(task: TrailLoadTask): Promise<TrailLoadCounts> {
  const counts = { accepted: 0, refused: 0, other: 0 };
  const started = performance.now();
  const deadline = started + task.seconds * 1000;
  let change = 0;
  const loop = async () => {
    while (performance.now() < deadline) {
      let status = 0;
      try {
        const reply = await fetch(`${task.url}/webhooks`, {
          method: 'PATCH',
          headers: { authorization: `Bearer ${task.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ projectId: task.projectId, url: `https://receiver.example.com/hooks/${change++}` }),
        });
        await reply.arrayBuffer();
        status = reply.status;
      } catch {
        status = 0;
      }
      if (status === 200) counts.accepted += 1;
      else if (status === 429) counts.refused += 1;
      else counts.other += 1;
      // A refused loop would spin: it comes back at the pace a client honouring Retry-After would, roughly.
      if (status === 429) await sleep(50);
    }
  };
  await Promise.all(Array.from({ length: task.loops }, loop));
  return { ...counts, spanMs: performance.now() - started };
}

const say = (line: TrailLoadLine) => process.stdout.write(`${JSON.stringify(line)}\n`);

async function main(): Promise<void> {
  const task = JSON.parse(process.env.BENCH_TRAIL_LOAD ?? '') as TrailLoadTask;
  const lines = createInterface({ input: process.stdin });
  const go = new Promise<boolean>((resolve) => {
    lines.once('line', () => resolve(true));
    lines.once('close', () => resolve(false));
  });
  say({ ready: true });
  // The bench went away before starting the load: nothing to do.
  if (!(await go)) return;
  lines.close();
  process.stdin.destroy();
  say({ counts: await run(task) });
}

main().catch((error: unknown) => {
  process.stderr.write(`trail load: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
