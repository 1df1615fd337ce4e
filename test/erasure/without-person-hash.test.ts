// A namespace registered before PersonHash existed (ProjectId and WebhookType only): deliveries started with a person
// hash still start and deliver, with the operators' two attributes, and an erasure finds them through the delivery log.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { PersonHashKey, ProjectIdKey } from '../../common/contract';
import { erasureEnvironment, fall, useErasureSuite, vital } from './fixture';

describe('erasure in a namespace without the PersonHash search attribute (Temporal dev server)', function () {
  this.timeout(120_000);
  const s = useErasureSuite(() => erasureEnvironment('without PersonHash'));
  // Each test its own people: a person's runs are found namespace-wide, whichever test's queue ran them.
  let ADA: string;
  let BOB: string;
  beforeEach(() => {
    [ADA, BOB] = [randomUUID(), randomUUID()];
  });

  it('the namespace has ProjectId and WebhookType, not PersonHash', async () => {
    const { customAttributes } = await s.fx.env.connection.operatorService.listSearchAttributes({
      namespace: 'default',
    });
    assert.ok(customAttributes.ProjectId && customAttributes.WebhookType);
    assert.equal(customAttributes.PersonHash, undefined);
  });

  it('deliveries start with a person hash all the same (without PersonHash), and the erasure finds them in the log', async () => {
    const { projectId } = await s.project();
    await s.withWorker(async () => {
      const adaRuns = [await s.delivered(fall(projectId, ADA)), await s.delivered(vital(projectId, ADA))];
      const bobRun = await s.delivered(fall(projectId, BOB));
      const described = await s.fx.env.client.workflow.getHandle(adaRuns[0]!).describe();
      assert.equal(described.typedSearchAttributes.get(ProjectIdKey), projectId, 'the operators’ filters are set');
      assert.equal(described.typedSearchAttributes.get(PersonHashKey), undefined);
      // Given at start, as in a namespace with all three: the workflow had nothing to upsert.
      const history = await s.fx.env.client.workflow.getHandle(adaRuns[0]!).fetchHistory();
      const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
      assert.deepEqual(Object.keys(started?.searchAttributes?.indexedFields ?? {}).sort(), [
        'ProjectId',
        'WebhookType',
      ]);
      assert.ok(!history.events?.some((event) => event.upsertWorkflowSearchAttributesEventAttributes));

      const id = await s.requestErasure(ADA);
      const done = await s.erasureReaches(id, 'completed');
      assert.deepEqual(done.counts, { deliveriesFound: 2, historiesDeleted: 2, logRowsDeleted: 2, stillOpen: 0 });
      for (const run of adaRuns) assert.equal(await s.described(run), false, run);
      assert.equal(await s.described(bobRun), true);
      assert.deepEqual(await s.logRows([bobRun]), { deliveries: 1, attempts: 1 });
    });
  });
});
