import assert from 'node:assert/strict';
import {
  attemptBinding,
  bindingRefusal,
  eventBinding,
  resumeSignalBinding,
  type ResumeDeliverySignal,
} from '../../common/contract';

describe('sealed inputs: an input is bound to the workflow run it was made for', () => {
  describe('eventBinding', () => {
    it('is bound when the sealed workflow id is the run’s', () => {
      assert.equal(eventBinding({ workflowId: 'delivery-1' }, 'delivery-1'), 'bound');
    });

    it('is other when the input was sealed for another workflow id', () => {
      assert.equal(eventBinding({ workflowId: 'delivery-1' }, 'delivery-2'), 'other');
      assert.equal(eventBinding({ workflowId: '' }, 'delivery-2'), 'other');
      assert.equal(eventBinding({ workflowId: null }, 'delivery-2'), 'other');
    });

    it('is unbound when the input names no workflow id (inputs from before sealing)', () => {
      assert.equal(eventBinding({}, 'delivery-1'), 'unbound');
      assert.equal(eventBinding({ workflowId: undefined }, 'delivery-1'), 'unbound');
    });
  });

  describe('attemptBinding', () => {
    const run = { workflowId: 'delivery-1', runId: 'run-a' };

    it('is bound to the same workflow id and run id', () => {
      assert.equal(attemptBinding({ workflowId: 'delivery-1', runId: 'run-a' }, run), 'bound');
    });

    it('is other when the workflow id or the run id differs', () => {
      assert.equal(attemptBinding({ workflowId: 'delivery-2', runId: 'run-a' }, run), 'other');
      assert.equal(attemptBinding({ workflowId: 'delivery-1', runId: 'run-b' }, run), 'other');
      assert.equal(attemptBinding({ workflowId: 'delivery-2', runId: 'run-b' }, run), 'other');
    });

    it('is unbound when the attempt names no run', () => {
      assert.equal(attemptBinding(undefined, run), 'unbound');
    });
  });

  describe('resumeSignalBinding', () => {
    it('gives the wait token of a signal sealed for this workflow', () => {
      const signal: ResumeDeliverySignal = { workflowId: 'delivery-1', waitToken: 3 };
      assert.deepEqual(resumeSignalBinding(signal, 'delivery-1'), { binding: 'bound', waitToken: 3 });
    });

    it('gives no wait token for a signal sealed for another workflow', () => {
      const signal: ResumeDeliverySignal = { workflowId: 'delivery-2', waitToken: 3 };
      assert.deepEqual(resumeSignalBinding(signal, 'delivery-1'), { binding: 'other' });
    });

    it('refuses a missing signal as other rather than throwing', () => {
      assert.deepEqual(resumeSignalBinding(undefined as unknown as ResumeDeliverySignal, 'delivery-1'), {
        binding: 'other',
      });
    });

    it('takes a bare number (signals from before sealing) as unbound, with its wait token', () => {
      assert.deepEqual(resumeSignalBinding(7, 'delivery-1'), { binding: 'unbound', waitToken: 7 });
      assert.deepEqual(resumeSignalBinding(0, 'delivery-1'), { binding: 'unbound', waitToken: 0 });
    });
  });

  describe('bindingRefusal', () => {
    it('says a copy of another delivery’s input was refused', () => {
      assert.equal(
        bindingRefusal('Delivery', 'other'),
        "Delivery refused: its input was sealed for another workflow (a copy of another delivery's input); nothing sent",
      );
    });

    it('says an unsealed input was refused and how to seal one', () => {
      assert.equal(
        bindingRefusal('Attempt', 'unbound'),
        "Attempt refused: its input is not sealed for its workflow (emit it with this service's client, which seals " +
          'the workflow id in the encrypted input); nothing sent',
      );
    });
  });
});
