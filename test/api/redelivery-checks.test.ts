// The checks a redelivery makes on the input it finds in Temporal (api/deliveries/redelivery.ts) as units; the redelivery itself
// runs on a real Temporal server in test/operations/production-guards.test.ts and test/delivery-log/delivery-log-redelivery.test.ts.
import assert from 'node:assert/strict';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { isEncryptedPayload, mismatchWith } from '../../api/deliveries/redelivery';
import type { DeliverWebhookEventInput } from '../../common/contract';
import { EncryptionCodec, generatePayloadKey, parsePayloadKeyRing } from '../../common/crypto/payload-codec';
import { fallPayload } from '../support/deliveries';

describe('redelivery: the input found in Temporal must be the logged event', () => {
  it('takes only a payload our codec sealed as encrypted', async () => {
    const plain = defaultPayloadConverter.toPayload({ projectId: 'p' });
    const [sealed] = await new EncryptionCodec(parsePayloadKeyRing(generatePayloadKey())).encode([plain]);
    assert.equal(isEncryptedPayload(sealed!), true);
    assert.equal(isEncryptedPayload(plain), false);
    const labelled = (encoding?: string | null): Payload => ({
      metadata: encoding === undefined ? {} : { encoding: encoding === null ? null! : Buffer.from(encoding) },
      data: Buffer.from('x'),
    });
    assert.equal(isEncryptedPayload(labelled('binary/encrypted')), true, 'the label is what the codec checks next');
    for (const encoding of ['binary/encrypted ', 'binary/plain', '', undefined, null])
      assert.equal(isEncryptedPayload(labelled(encoding)), false, String(encoding));
    assert.equal(isEncryptedPayload({ data: Buffer.from('x') }), false, 'no metadata');
  });

  describe('mismatchWith', () => {
    const row = { id: 'webhook-event-1', projectId: 'p1', type: 'FALL_DETECTION', workflowId: 'webhook-event-1' };
    const input = (changes: Partial<DeliverWebhookEventInput> = {}): DeliverWebhookEventInput => ({
      projectId: 'p1',
      webhookType: 'FALL_DETECTION',
      userUUID: '00000000-0000-4000-8000-000000000001',
      payload: fallPayload,
      ...changes,
    });

    it('finds nothing amiss in the logged event, sealed or from before sealing', () => {
      assert.equal(mismatchWith(row, input()), undefined);
      assert.equal(mismatchWith(row, input({ workflowId: 'webhook-event-1' })), undefined);
      assert.equal(mismatchWith(row, input({ webhookId: 'webhook-event-1' })), undefined);
      // A redelivery's row: its own workflow, the original X-Webhook-Id.
      const redelivered = { ...row, workflowId: 'webhook-redelivery-1' };
      assert.equal(
        mismatchWith(redelivered, input({ workflowId: 'webhook-redelivery-1', webhookId: row.id })),
        undefined,
      );
    });

    it('names the first difference: project, type, sealed workflow, X-Webhook-Id', () => {
      assert.equal(mismatchWith(row, input({ projectId: 'p2' })), 'other-project');
      assert.equal(mismatchWith(row, input({ projectId: 'p2', webhookType: 'VITAL_THRESHOLD' })), 'other-project');
      assert.equal(mismatchWith(row, input({ webhookType: 'VITAL_THRESHOLD' })), 'other-type');
      assert.equal(mismatchWith(row, input({ workflowId: 'webhook-event-2' })), 'other-workflow');
      assert.equal(mismatchWith(row, input({ webhookId: 'webhook-event-2' })), 'other-webhook-id');
      const redelivered = { ...row, workflowId: 'webhook-redelivery-1' };
      assert.equal(mismatchWith(redelivered, input()), 'other-webhook-id', 'the workflow id is not the delivery’s id');
    });
  });
});
