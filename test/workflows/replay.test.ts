// Deliveries running when a new worker is deployed must replay on it: histories recorded by earlier versions of the
// workflow (every attempt an activity task, the breaker's wait loop, a give-up; the first attempt as its own local
// activity; the lookup making it, then a durable attempt after a wait; a delivery held by a pause; an erasure that
// waited for a delivery in flight) replay on today's code without a nondeterminism error. Recorded with the recipe of test/fixtures/histories/README.md. A `traced-`
// history was recorded with tracing on (test/worker/tracing.test.ts): it replays on the bundle `npm run build` makes, tracing
// interceptors included, with its test payload key.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { temporal } from '@temporalio/proto';
import { DefaultLogger, Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { workflowBundle } from '../support/temporal';
import { tracedHistoryDataConverter } from '../support/traced-history';
import { workflowBundleOptions } from '../../worker/start';
import { workflowSpanSinks } from '../../worker/tracing';

let productionBundle: Promise<WorkflowBundleWithSourceMap> | undefined;

const HISTORIES = join(__dirname, '..', 'fixtures', 'histories');

describe('replay of histories recorded by earlier workflow versions', function () {
  this.timeout(60_000);
  const files = readdirSync(HISTORIES).filter((name) => name.endsWith('.binpb'));

  it('has histories to replay', () => assert.ok(files.length >= 10, files.join(', ')));
  it('has one recorded with tracing on', () => assert.ok(files.some((name) => name.startsWith('traced-'))));

  for (const file of files) {
    it(`replays ${file.replace(/\.binpb$/, '')}`, async () => {
      const history = temporal.api.history.v1.History.decode(readFileSync(join(HISTORIES, file)));
      // Under the delivery's own workflow id: signals sealed for it are accepted, as they were when it ran.
      const workflowId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowId || file;
      if (file.startsWith('traced-')) {
        productionBundle ??= bundleWorkflowCode({ ...workflowBundleOptions(), logger: new DefaultLogger('ERROR') });
        // The worker's sink, as a worker without tracing registers it (a replay calls it not at all).
        const options = {
          workflowBundle: await productionBundle,
          dataConverter: tracedHistoryDataConverter(),
          sinks: workflowSpanSinks(undefined),
        };
        await Worker.runReplayHistory(options, history, workflowId);
      } else await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, workflowId);
    });
  }
});
