// Deliveries running when a new worker is deployed must replay on it: histories recorded by earlier versions of the
// workflow (every attempt an activity task, the breaker's wait loop, a give-up; the first attempt as its own local
// activity; the lookup making it, then a durable attempt after a wait; a delivery held by a pause) replay on today's
// code without a nondeterminism error. Recorded with the recipe of test/fixtures/histories/README.md.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { workflowBundle } from './support/temporal';

const HISTORIES = join(__dirname, 'fixtures', 'histories');

describe('replay of histories recorded by earlier workflow versions', function () {
  this.timeout(60_000);
  const files = readdirSync(HISTORIES).filter((name) => name.endsWith('.binpb'));

  it('has histories to replay', () => assert.ok(files.length >= 10, files.join(', ')));

  for (const file of files) {
    it(`replays ${file.replace(/\.binpb$/, '')}`, async () => {
      const history = temporal.api.history.v1.History.decode(readFileSync(join(HISTORIES, file)));
      // Under the delivery's own workflow id: signals sealed for it are accepted, as they were when it ran.
      const workflowId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowId || file;
      await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, workflowId);
    });
  }
});
