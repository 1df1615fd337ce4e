import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkflowNotFoundError } from '@temporalio/client';
import { InvalidWebhookEventError, WebhookEventAlreadyEmittedError, emitWebhookEvent } from '../../client';
import { main } from '../../cli/index';
import type { CliIo } from '../../cli/command';
import { USER, fallEvent, fallPayload, newProjectId } from '../support/deliveries';
import { independentSignatureValid } from '../support/receiver';
import { useDeliveryFixture } from '../support/delivery-fixture';
import { createLocalEnvironment, uniqueTaskQueue } from '../support/temporal';

describe('emitting events (client API and CLI, dev server)', function () {
  this.timeout(60_000);
  const fx = useDeliveryFixture(createLocalEnvironment);

  const exists = (workflowId: string) =>
    fx.env.client.workflow
      .getHandle(workflowId)
      .describe()
      .then(
        () => true,
        (error: unknown) => {
          if (error instanceof WorkflowNotFoundError) return false;
          throw error;
        },
      );

  it('delivers one event id once, however often it is emitted', async () => {
    const projectId = newProjectId();
    const secret = await fx.registrations.register(projectId, fx.receiver.url, ['FALL_DETECTION']);
    const taskQueue = uniqueTaskQueue('emit');
    const eventId = randomUUID();
    const workflowId = await emitWebhookEvent(fx.env.client, fallEvent(projectId), { eventId, taskQueue });
    assert.equal(workflowId, `webhook-event-${eventId}`);
    // While it is still pending (no worker yet) …
    await assert.rejects(
      emitWebhookEvent(fx.env.client, fallEvent(projectId), { eventId, taskQueue }),
      (error: unknown) => {
        assert.ok(error instanceof WebhookEventAlreadyEmittedError);
        assert.equal(error.message, `Event ${eventId} was already emitted (workflow ${workflowId})`);
        return true;
      },
    );
    await fx.runWorker(() => fx.env.client.workflow.getHandle(workflowId).result(), { taskQueue });
    // … and after it completed.
    await assert.rejects(
      emitWebhookEvent(fx.env.client, fallEvent(projectId), { eventId, taskQueue }),
      WebhookEventAlreadyEmittedError,
    );
    assert.equal(fx.receiver.requests.length, 1);
    assert.ok(independentSignatureValid(secret, fx.receiver.requests[0]!));
    assert.equal(fx.receiver.requests[0]!.headers['x-webhook-id'], workflowId);
  });

  it('refuses an invalid event or a TEST event before starting anything', async () => {
    const eventId = randomUUID();
    const bad = { ...fallEvent('p1'), payload: { ...fallPayload, reasons: [] } };
    await assert.rejects(emitWebhookEvent(fx.env.client, bad, { eventId }), {
      name: 'InvalidWebhookEventError',
      message: 'Invalid FALL_DETECTION event: payload.reasons must NOT have fewer than 1 items',
    });
    const test = { projectId: 'p1', webhookType: 'TEST', userUUID: USER, payload: { test: 'x' } };
    await assert.rejects(emitWebhookEvent(fx.env.client, test as never, { eventId }), InvalidWebhookEventError);
    await assert.rejects(emitWebhookEvent(fx.env.client, fallEvent('p1'), { eventId: 'has space' }), /eventId must be/);
    assert.equal(await exists(`webhook-event-${eventId}`), false);
  });

  describe('CLI: event emit', () => {
    function run(args: string[]) {
      const out: string[] = [];
      const err: string[] = [];
      const io: CliIo = {
        env: { TEMPORAL_ADDRESS: fx.env.address, TEMPORAL_TASK_QUEUE: uniqueTaskQueue('cli') },
        out: (line) => out.push(line),
        err: (line) => err.push(line),
      };
      return main(['event', 'emit', ...args], io).then((code) => ({ code, out, err }));
    }
    const data = JSON.stringify(fallPayload);

    it('prints the workflow id, and says a repeated id was already emitted', async () => {
      const id = randomUUID();
      const first = await run(['p1', 'FALL_DETECTION', '--user', USER, '--data', data, '--id', id]);
      assert.deepEqual(first, { code: 0, out: [`webhook-event-${id}`], err: [] });
      const again = await run(['p1', 'FALL_DETECTION', '--user', USER, '--data', data, '--id', id]);
      assert.equal(again.code, 1);
      assert.match(again.err.join('\n'), new RegExp(`Event ${id} was already emitted as workflow webhook-event-${id}`));
    });

    it('reads --data @file', async () => {
      const file = join(mkdtempSync(join(tmpdir(), 'event-')), 'fall.json');
      writeFileSync(file, data);
      const result = await run(['p1', 'FALL_DETECTION', '--user', USER, '--data', `@${file}`]);
      assert.equal(result.code, 0);
      assert.match(result.out[0]!, /^webhook-event-[0-9a-f-]{36}$/);
      assert.equal(await exists(result.out[0]!), true);
    });

    it('refuses an invalid payload with a clear message, a non-zero exit and no workflow', async () => {
      const id = randomUUID();
      const result = await run(['p1', 'FALL_DETECTION', '--user', USER, '--data', '{"reasons":["fall"]}', '--id', id]);
      assert.equal(result.code, 1);
      assert.match(
        result.err.join('\n'),
        /Invalid FALL_DETECTION event: payload is missing the required field userUUID/,
      );
      assert.match(result.err.join('\n'), /nothing was emitted/);
      assert.equal(await exists(`webhook-event-${id}`), false);
      const wrongType = await run(['p1', 'TEST', '--user', USER, '--data', data]);
      assert.equal(wrongType.code, 2);
      const notJson = await run(['p1', 'FALL_DETECTION', '--user', USER, '--data', '{oops']);
      assert.equal(notJson.code, 1);
      assert.match(notJson.err.join('\n'), /--data is not valid JSON/);
    });
  });
});
