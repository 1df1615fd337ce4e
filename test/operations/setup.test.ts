// Suite set-up hygiene: a part that fails to start stops the parts that did.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { isAlive } from '../../dev/processes';
import { startBoth } from '../support/setup';

describe('test set-up: startBoth', () => {
  it('stops the part that started when the other fails, and rethrows that failure', async () => {
    // A real process standing in for a Temporal dev server that started while PostgreSQL did not.
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    await assert.rejects(
      startBoth(
        Promise.resolve(child),
        Promise.reject(new Error('embedded PostgreSQL could not start')),
        async (started) => {
          started.kill('SIGTERM');
          await exited;
        },
        () => Promise.resolve(),
      ),
      /embedded PostgreSQL could not start/,
    );
    assert.equal(isAlive(child.pid!), false, 'no process is left behind');
  });

  it('hands back both parts when both start', async () => {
    assert.deepEqual(
      await startBoth(
        Promise.resolve(1),
        Promise.resolve('two'),
        () => Promise.resolve(),
        () => Promise.resolve(),
      ),
      [1, 'two'],
    );
  });
});
