import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { main } from '../../cli';
import { freePort } from '../../dev/ports';
import { fallPayload } from '../support/deliveries';
import { startTestReceiver, type TestReceiver } from '../support/receiver';
import { workflowInputShown } from '../support/temporal-ui-page';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Runs the CLI in this process as a second terminal would: only the data folder (and PATH, HOME) in common. */
async function cli(env: NodeJS.ProcessEnv, ...args: string[]): Promise<string> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { env, out: (line) => void out.push(line), err: (line) => void err.push(line) });
  assert.equal(code, 0, `webhooks ${args.join(' ')}: ${err.join('\n')}`);
  return out.at(-1) ?? '';
}

/**
 * Issue 23, as a new operator tries it: `npm start` (its command, from the sources), a receiver, a FALL_DETECTION
 * emitted from another terminal, and the delivery's page in the dev server's Temporal UI, in Chromium.
 */
describe('the Temporal UI of npm start, in Chromium', function () {
  this.timeout(240_000);
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let api: string;
  let uiUrl: string;
  let receiver: TestReceiver;
  let browser: Browser | undefined;
  let stack: { child: ChildProcess; output: string[]; exited: Promise<unknown> } | undefined;

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'webhooks-ui-'));
    chmodSync(dataDir, 0o755); // as root, PostgreSQL runs as the postgres user, which must reach its folder
    const port = await freePort();
    const uiPort = await freePort();
    env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ...(process.env.TEMPORAL_CLI_PATH && { TEMPORAL_CLI_PATH: process.env.TEMPORAL_CLI_PATH }),
      DATA_DIR: dataDir,
      PORT: String(port),
      // Moved from the defaults: the CLI below must find them without being told.
      DEV_POSTGRES_PORT: String(await freePort()),
      DEV_TEMPORAL_PORT: String(await freePort()),
      DEV_TEMPORAL_UI_PORT: String(uiPort),
      LOG_LEVEL: 'warn',
    };
    api = `http://127.0.0.1:${port}`;
    uiUrl = `http://127.0.0.1:${uiPort}`;
    receiver = await startTestReceiver();
    browser = await chromium.launch({ executablePath: CHROMIUM });

    const child = spawn(process.execPath, ['--require', 'tsx/cjs', 'cli/index.ts', 'start'], {
      cwd: resolve(__dirname, '../..'),
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    child.stdout.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    stack = { child, output, exited: new Promise((done) => child.once('exit', done)) };
    const deadline = Date.now() + 180_000;
    while (!/Webhook delivery service is running/.test(output.join(''))) {
      if (child.exitCode !== null || Date.now() > deadline)
        assert.fail(`npm start did not become ready:\n${output.join('').slice(-3000)}`);
      await new Promise((done) => setTimeout(done, 250));
    }
  });

  after(async () => {
    await browser?.close();
    if (stack && stack.child.exitCode === null) {
      stack.child.kill('SIGTERM');
      await stack.exited;
    }
    await receiver?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("shows a delivery's decoded event in Input, not ciphertext", async () => {
    const otherTerminal = { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir };
    await cli(otherTerminal, 'project', 'add', 'p1');
    await cli(otherTerminal, 'member', 'add', 'p1', 'alice');
    const token = await cli(otherTerminal, 'token', 'alice');
    const registered = await fetch(`${api}/webhooks/register`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ projectId: 'p1', url: receiver.url, types: ['FALL_DETECTION'] }),
    });
    assert.equal(registered.status, 201, await registered.text());

    const userUUID = randomUUID();
    const payload = JSON.stringify({ ...fallPayload, userUUID });
    const workflowId = await cli(
      otherTerminal,
      'event',
      'emit',
      'p1',
      'FALL_DETECTION',
      '--user',
      userUUID,
      '--data',
      payload,
    );
    const [delivered] = await receiver.waitForRequests(1, 30_000);
    assert.equal((JSON.parse(delivered!.rawBody.toString()) as { userUUID: string }).userUUID, userUUID);

    const page = await browser!.newPage();
    const codecCalls: string[] = [];
    page.on('response', (response) => {
      if (response.url().startsWith(`${api}/codec/`))
        codecCalls.push(`${response.request().method()} ${response.status()}`);
    });
    await page.goto(`${uiUrl}/namespaces/default/workflows/${encodeURIComponent(workflowId)}`);
    const shown = await workflowInputShown(page);
    const calls = `codec calls: ${codecCalls.join(', ') || 'none'}`;
    assert.doesNotMatch(shown, /^\s*"[A-Za-z0-9+/=]{40,}"\s*$/, `Input shows ciphertext; ${calls}`);
    assert.match(shown, /"webhookType":\s*"FALL_DETECTION"/, calls);
    assert.ok(shown.includes(userUUID), 'the event of this delivery');
    assert.ok(shown.includes(fallPayload.email), 'a field of the payload, decoded');
    assert.ok(codecCalls.includes('POST 200'), `the UI decoded through the API: ${calls}`);
  });
});
