import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { createRedeliveryStarter } from '../../api/deliveries/redelivery';
import { createTestEventSender } from '../../api/webhooks/test-event';
import { portalLinkId } from '../../api/http/audited-actions';
import { createPortalTokens, portalSigningKeys } from '../../api/auth/portal-tokens';
import type { ActivityConfig } from '../../activities';
import { SUBSCRIBABLE_TYPES, WEBHOOK_TYPES, type DeliverWebhookEventInput } from '../../common/contract';
import { verifyStandardWebhook } from '../../common/crypto/signature';
import * as store from '../../db';
import type { deliverWebhookEvent } from '../../workflows';
import { fallEvent, fastConfig, newProjectId } from '../support/deliveries';
import { useDeliveryFixture, useLocalApi } from '../support/delivery-fixture';
import { independentSignatureValid } from '../support/receiver';
import { createLocalEnvironment } from '../support/temporal';
import { makeCertificates } from '../support/certificates';
import { bearer, hsToken } from '../support/tokens';

/** Debian's Chromium: playwright's own browser downloads do not work here, and CI installs this one. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
/** PORTAL_SCREENSHOTS=1 rewrites docs/portal-*.png from these views. */
const SCREENSHOTS = process.env.PORTAL_SCREENSHOTS === '1';
/** Retries end after 1.5 s: a receiver answering 500 makes a delivery fail quickly. */
const givingUp: ActivityConfig = { ...fastConfig, DELIVERY_GIVE_UP_AFTER_MS: 1_500 };
const ACTION = /^(Send|Redeliver|Recover|Rotate|Save|Copy|Pause|Resume|Upload)/;

describe('portal page in Chromium, end to end on the real pipeline', function () {
  this.timeout(120_000);
  const fx = useDeliveryFixture(createLocalEnvironment);
  let taskQueue = '';
  const ring = [{ id: 'k1', key: randomBytes(32) }];
  const portalTokens = createPortalTokens(portalSigningKeys(ring));
  const api = useLocalApi(fx, () => ({
    // The test's worker polls its own queue: test events and redeliveries go there.
    sendTestEvent: (projectId) =>
      createTestEventSender(fx.env.client, { TEMPORAL_TASK_QUEUE: taskQueue, TEST_DELIVERY_WAIT_MS: 10_000 })(
        projectId,
      ),
    redelivery: (row, delayMs) =>
      createRedeliveryStarter(fx.env.client, {
        TEMPORAL_TASK_QUEUE: taskQueue,
        NODE_ENV: 'development',
        ALLOW_UNENCRYPTED_EVENTS: false,
      })(row, delayMs),
    portal: { tokens: portalTokens },
  }));
  let browser: Browser;
  const pageProblems = new WeakMap<Page, string[]>();

  before(async () => {
    if (!existsSync(CHROMIUM))
      throw new Error(`Chromium is not at ${CHROMIUM}: install it (apt-get install chromium) or set CHROMIUM_PATH`);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  });
  // A failed test leaves its page open: close it before the next.
  afterEach(async () => {
    for (const context of browser?.contexts() ?? []) await context.close();
  });
  after(() => browser?.close());

  /** Delivers one event through the real workflow and worker and waits for it to end; returns its X-Webhook-Id. */
  async function deliver(input: DeliverWebhookEventInput): Promise<string> {
    const workflowId = `webhook-event-${randomUUID()}`;
    const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
      args: [input],
      taskQueue,
      workflowId,
    });
    await handle.result().catch(() => undefined);
    return workflowId;
  }

  /** A project with alice as member, a webhook to this test's receiver, and its signing secret. */
  async function project(): Promise<{ id: string; secret: string }> {
    const id = newProjectId();
    const secret = await fx.registrations.register(id, fx.receiver.url, ['FALL_DETECTION', 'VITAL_THRESHOLD']);
    await store.addMember(fx.database.db, id, 'alice');
    return { id, secret };
  }

  async function link(projectId: string, body: object = {}): Promise<{ url: string; token: string }> {
    const response = await fetch(`${api.url}/webhooks/project/${projectId}/portal-sessions`, {
      method: 'POST',
      headers: { ...bearer(hsToken('alice')), 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    assert.equal(response.status, 201);
    return (await response.json()) as { url: string; token: string };
  }

  /** A page that fails the test on any Content-Security-Policy violation or script error. */
  async function open(url: string): Promise<Page> {
    const context = await browser.newContext({
      viewport: { width: 1100, height: 900 },
      permissions: ['clipboard-read', 'clipboard-write'],
    });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(error.message));
    // The browser reports every refused request too: a 400, 401 or 403 the page answers to is no script error.
    page.on('console', (message) => {
      if (message.type() === 'error' && !/status of 40[013]/.test(message.text())) problems.push(message.text());
    });
    pageProblems.set(page, problems);
    await page.goto(url);
    return page;
  }

  /** Closes the page once it showed no script error or CSP violation. */
  async function close(page: Page): Promise<void> {
    const problems = pageProblems.get(page);
    await page.context().close();
    assert.deepEqual(problems, [], 'no script error or CSP violation');
  }

  /** axe-core, evaluated through the DevTools protocol (the page's CSP allows no injected script tag). */
  async function assertAccessible(page: Page, view: string): Promise<void> {
    await page.evaluate(AXE_SOURCE);
    const violations = await page.evaluate(async () => {
      const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: unknown[] }> } }).axe;
      return (await axe.run()).violations as { id: string; impact: string; help: string }[];
    });
    const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    assert.deepEqual(
      serious.map((v) => `${v.id}: ${v.help}`),
      [],
      `${view}: axe-core found serious or critical violations`,
    );
  }

  /** Moves the keyboard focus with Tab to the control whose accessible name starts with `name`, and presses Enter. */
  async function pressByKeyboard(page: Page, name: RegExp | string): Promise<void> {
    const wanted = typeof name === 'string' ? new RegExp(`^${name}`) : name;
    for (let i = 0; i < 200; i += 1) {
      await page.keyboard.press('Tab');
      const focused = await page.evaluate<string>(
        "document.activeElement?.getAttribute('aria-label') ?? document.activeElement?.textContent ?? ''",
      );
      if (wanted.test(focused.trim())) {
        await page.keyboard.press('Enter');
        return;
      }
    }
    assert.fail(`no control named ${String(wanted)} in the tab order`);
  }

  async function screenshot(page: Page, name: string): Promise<void> {
    if (SCREENSHOTS)
      await page.screenshot({ path: join(__dirname, '..', '..', 'docs', `portal-${name}.png`), fullPage: true });
  }

  const row = (page: Page, id: string) => page.locator(`tr[data-delivery="${id}"]`);
  const rowIds = async (page: Page) =>
    Promise.all(
      (await page.locator('tr[data-delivery]').all()).map(async (r) => String(await r.getAttribute('data-delivery'))),
    );

  it('a manage link: the log, attempts, Redeliver, Send test event, Rotate secret and a new delivery, all by keyboard', async () => {
    const { id: p, secret } = await project();
    await fx.runWorker(
      async (queue) => {
        taskQueue = queue;
        const delivered = await deliver(fallEvent(p));
        fx.receiver.fallback = { status: 500 };
        const failed = await deliver(fallEvent(p));
        fx.receiver.fallback = { status: 200 };
        const { url } = await link(p);
        assert.match(url, /\/portal#token=/);
        const page = await open(url);
        assert.equal(new URL(page.url()).hash, '', 'the token leaves the address bar');

        await row(page, failed).waitFor();
        assert.match(await row(page, delivered).innerText(), /FALL_DETECTION\s+delivered\s+1\s+200/);
        assert.match(await row(page, failed).innerText(), /FALL_DETECTION\s+failed\s+\d+\s+500/);
        assert.match(
          await page.locator('section[aria-labelledby="endpoint-title"]').innerText(),
          new RegExp(fx.receiver.url.replace(/[.]/g, '\\.')),
        );
        await assertAccessible(page, 'manage view');

        // The failed delivery's attempts: time, status code, duration, error.
        await pressByKeyboard(page, `Show attempts of ${failed}`);
        const attempts = page.locator('#attempts');
        await attempts.waitFor();
        const attemptRows = attempts.locator('tbody tr');
        assert.ok((await attemptRows.count()) >= 2, 'retried before giving up');
        assert.match(await attemptRows.first().innerText(), /^1\s+\S.*\s+500\s+\d+ ms\s+/);
        const text = await page.locator('main').innerText();
        assert.doesNotMatch(text, /Ada|Lovelace|ada@example\.com|fall/, 'no payload on the page');
        await assertAccessible(page, 'attempts view');
        await screenshot(page, 'manage');

        // Redeliver: the receiver gets the same X-Webhook-Id, signed with the current secret.
        const before = fx.receiver.requests.length;
        await pressByKeyboard(page, `Redeliver ${failed}`);
        await page.getByText(`Delivery ${failed} is being redelivered`).waitFor();
        const [redelivered] = (await fx.receiver.waitForRequests(before + 1)).slice(before);
        assert.equal(redelivered!.headers['x-webhook-id'], failed);
        assert.ok(independentSignatureValid(secret, redelivered!));
        await row(page, failed).getByText('delivered').waitFor({ timeout: 15_000 });

        // Send test event shows the receiver's 200 and the round trip's duration.
        await pressByKeyboard(page, 'Send test event');
        await page.getByText(/Test event delivered: status 200 in \d+ ms/).waitFor({ timeout: 15_000 });

        // Rotate secret with an overlap: the new secret is shown once, with a copy button.
        await page.getByLabel('Overlap of the old secret (hours)').fill('1');
        await pressByKeyboard(page, 'Rotate secret');
        const shown = page.getByLabel('New secret');
        await shown.waitFor();
        const fresh = await shown.inputValue();
        assert.match(fresh, /^whsec_/);
        assert.notEqual(fresh, secret);
        await assertAccessible(page, 'rotated secret');
        await pressByKeyboard(page, 'Copy secret');
        assert.equal(await page.evaluate<string>('navigator.clipboard.readText()'), fresh);
        await screenshot(page, 'rotated');
        // During the overlap the receiver verifies the next delivery with either secret.
        const sent = fx.receiver.requests.length;
        await pressByKeyboard(page, 'Send test event');
        const [test] = (await fx.receiver.waitForRequests(sent + 1)).slice(sent);
        const check = (key: string) =>
          verifyStandardWebhook({ secret: [key], headers: test!.headers, rawBody: test!.rawBody });
        assert.ok(check(secret), 'the replaced secret still verifies');
        assert.ok(check(fresh), 'the new secret verifies');
        assert.ok(independentSignatureValid(fresh, test!), 'X-Signature is the new secret’s');
        await pressByKeyboard(page, 'Hide secret');
        assert.equal(await page.getByLabel('New secret').count(), 0, 'shown once');

        // A delivery made while the page is open appears without a reload (a refresh every 3 s; 15 s for a busy machine).
        const arrived = await deliver(fallEvent(p));
        await row(page, arrived).waitFor({ timeout: 15_000 });

        // Filters: status failed lists none now (the failed one was redelivered); delivered lists all three events.
        await page.getByLabel('Status').selectOption('delivered');
        await pressByKeyboard(page, 'Apply filters');
        await page.locator('tbody tr[data-delivery]').first().waitFor();
        assert.equal(await row(page, arrived).count(), 1);
        await page.getByLabel('Status').selectOption('failed');
        // A choice not yet applied survives the live refresh's redraw: a delivery arriving redraws the page.
        await page.evaluate('document.activeElement?.blur()');
        const meanwhile = await deliver(fallEvent(p));
        await row(page, meanwhile).waitFor({ timeout: 15_000 });
        assert.equal(await page.getByLabel('Status').inputValue(), 'failed', 'the unapplied choice was kept');
        await pressByKeyboard(page, 'Apply filters');
        await page.getByText('No deliveries match.').waitFor();

        // Editing the endpoint: types. An unsaved change survives a redraw here too.
        await page.getByRole('checkbox', { name: 'VITAL_THRESHOLD' }).uncheck();
        await page.evaluate('document.activeElement?.blur()');
        const later = await deliver(fallEvent(p));
        await page.getByLabel('Status').selectOption('');
        await pressByKeyboard(page, 'Apply filters');
        await row(page, later).waitFor({ timeout: 15_000 });
        assert.equal(await page.getByRole('checkbox', { name: 'VITAL_THRESHOLD' }).isChecked(), false, 'kept unsaved');
        // A refused save leaves what was typed in the form, next to the error, to be corrected rather than typed again.
        const receiverUrl = page.getByLabel('Receiver URL');
        await receiverUrl.fill('http://someone:secret@127.0.0.1:9/');
        await pressByKeyboard(page, 'Save endpoint');
        await page
          .locator('.notice.error')
          .getByText(/\/url must be an absolute http or https URL without credentials/)
          .waitFor();
        assert.equal(await receiverUrl.inputValue(), 'http://someone:secret@127.0.0.1:9/', 'kept after a refusal');
        assert.equal(await page.getByRole('checkbox', { name: 'VITAL_THRESHOLD' }).isChecked(), false);
        await receiverUrl.fill(fx.receiver.url);
        await pressByKeyboard(page, 'Save endpoint');
        await page.getByText('The endpoint was saved.').waitFor();
        assert.deepEqual((await store.findRegistration(fx.database.db, p))!.types, ['FALL_DETECTION']);
        await close(page);
      },
      { config: givingUp },
    );
  });

  it('takes the event types from the API’s OpenAPI document: the contract’s, in the type filter and the endpoint form', async () => {
    const { id: p } = await project();
    const page = await open((await link(p)).url);
    const values = async (controls: Locator) =>
      Promise.all((await controls.all()).map((control) => control.getAttribute('value')));
    const filter = page.locator('select[name="type"]');
    await filter.waitFor();
    assert.deepEqual(await values(filter.locator('option')), ['', ...WEBHOOK_TYPES]);
    const boxes = page.getByRole('group', { name: 'Event types' }).getByRole('checkbox');
    assert.deepEqual(await values(boxes), [...SUBSCRIBABLE_TYPES]);
    await close(page);
  });

  it('says so when the OpenAPI document cannot be read, instead of showing no event types', async () => {
    const { id: p } = await project();
    const { url } = await link(p);
    const page = await (await browser.newContext()).newPage();
    await page.route('**/openapi.json', (route) => route.fulfill({ status: 503, body: '' }));
    await page.goto(url);
    await page
      .getByRole('alert')
      .getByText(/^The event types could not be read from the API’s description/)
      .waitFor();
    assert.equal(await page.getByRole('checkbox').count(), 0);
  });

  it('a manage link pauses by keyboard: a new event is shown held and nothing is sent until Resume delivers it', async () => {
    const { id: p } = await project();
    await fx.runWorker(
      async (queue) => {
        taskQueue = queue;
        const page = await open((await link(p)).url);
        await page.locator('[data-pause="running"]').waitFor();
        await pressByKeyboard(page, 'Pause deliveries');
        await page.getByText(/^Deliveries paused/).waitFor();
        await page.locator('[data-pause="paused"]').waitFor();
        const workflowId = `webhook-event-${randomUUID()}`;
        const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
          args: [fallEvent(p)],
          taskQueue,
          workflowId,
        });
        await row(page, workflowId).getByText('held').waitFor({ timeout: 10_000 });
        assert.equal(fx.receiver.requests.length, 0, 'nothing sent while paused');
        await assertAccessible(page, 'paused view');
        await pressByKeyboard(page, 'Resume deliveries');
        await page.getByText(/^Deliveries resumed/).waitFor();
        assert.equal((await handle.result()).status, 'delivered');
        await row(page, workflowId).getByText('delivered').waitFor({ timeout: 10_000 });
        assert.equal(fx.receiver.requests.length, 1);
        await close(page);
      },
      { config: givingUp },
    );
  });

  it('a receiver’s 410 shows as a hold with its time, the event held; Resume by keyboard delivers it', async () => {
    const { id: p } = await project();
    await fx.runWorker(
      async (queue) => {
        taskQueue = queue;
        fx.receiver.script({ status: 410 });
        const workflowId = `webhook-event-${randomUUID()}`;
        const handle = await fx.env.client.workflow.start<typeof deliverWebhookEvent>('deliverWebhookEvent', {
          args: [fallEvent(p)],
          taskQueue,
          workflowId,
        });
        await fx.receiver.waitForRequests(1);
        const page = await open((await link(p)).url);
        const hold = page.locator('[data-pause="gone"]');
        await hold.waitFor();
        assert.match(await hold.innerText(), /^held: the receiver answered 410 Gone at .+ until a member resumes$/);
        await row(page, workflowId).getByText('held').waitFor({ timeout: 10_000 });
        await assertAccessible(page, 'held by a 410');
        await pressByKeyboard(page, 'Resume deliveries');
        await page.getByText(/^Deliveries resumed/).waitFor();
        await page.locator('[data-pause="running"]').waitFor();
        assert.equal((await handle.result()).status, 'delivered');
        assert.equal(fx.receiver.requests.length, 2, 'the 410, then the held event once');
        await close(page);
      },
      { config: givingUp },
    );
  });

  it('Recover failed deliveries redelivers the failed ones since the chosen time', async () => {
    const { id: p } = await project();
    await fx.runWorker(
      async (queue) => {
        taskQueue = queue;
        fx.receiver.fallback = { status: 500 };
        const failed = await deliver(fallEvent(p));
        fx.receiver.fallback = { status: 200 };
        const page = await open((await link(p)).url);
        await row(page, failed).getByText('failed').waitFor();
        await page.getByLabel('Failed since').fill('2000-01-01T00:00');
        const before = fx.receiver.requests.length;
        await pressByKeyboard(page, 'Recover failed deliveries');
        await page.getByText('1 failed deliveries are being redelivered.').waitFor();
        const [again] = (await fx.receiver.waitForRequests(before + 1)).slice(before);
        assert.equal(again!.headers['x-webhook-id'], failed);
        await close(page);
      },
      { config: givingUp },
    );
  });

  it('a read-only link shows the log and no action, and its token cannot act; another project’s link shows none of these ids', async () => {
    const { id: p } = await project();
    const { id: other } = await project();
    await fx.runWorker(async (queue) => {
      taskQueue = queue;
      const ids = [await deliver(fallEvent(p)), await deliver(fallEvent(p))];
      const otherId = await deliver(fallEvent(other));
      const { url, token } = await link(p, { capabilities: ['read'] });
      const page = await open(url);
      await row(page, ids[1]!).waitFor();
      await page.getByText(/read-only link/).waitFor();
      assert.ok((await page.getByRole('button', { name: /^Show attempts of/ }).count()) >= 2, 'its buttons are there');
      assert.equal(await page.getByRole('button', { name: ACTION }).count(), 0, 'no action button');
      assert.equal(await page.getByRole('button', { name: 'Show activity' }).count(), 0, 'no activity view');
      assert.equal(
        await page
          .locator(
            'form[aria-label="Rotate secret"], form[aria-label="Edit endpoint"], form[aria-label="Notification contacts"]',
          )
          .count(),
        0,
      );
      await pressByKeyboard(page, `Show attempts of ${ids[0]!}`);
      await page.locator('#attempts').waitFor();
      await assertAccessible(page, 'read-only view');
      await screenshot(page, 'read-only');
      for (const [method, path] of [
        ['POST', `/webhooks/test/project/${p}`],
        ['POST', `/webhooks/project/${p}/deliveries/${ids[0]!}/redeliver`],
        ['POST', `/webhooks/project/${p}/secret/rotate`],
        ['POST', `/webhooks/project/${p}/pause`],
      ] as const) {
        const refused = await fetch(api.url + path, { method, headers: bearer(token) });
        assert.equal(refused.status, 403, path);
      }
      await close(page);

      const elsewhere = await open((await link(other)).url);
      await row(elsewhere, otherId).waitFor();
      const shown = await elsewhere.locator('main').innerText();
      for (const id of ids) assert.ok(!shown.includes(id), `${id} is not shown to the other project`);
      await close(elsewhere);
    });
  });

  it('a manage link sets the notification contacts by keyboard; a bad address is refused, naming it', async () => {
    const { id: p } = await project();
    const page = await open((await link(p)).url);
    const form = page.getByRole('form', { name: 'Notification contacts' });
    await form.waitFor();
    await page.getByLabel('Notification URL').fill('https://oncall.hospital.example/notices');
    await page.getByLabel('Notification e-mail addresses (one a line)').fill('not-an-address');
    await pressByKeyboard(page, 'Save notification contacts');
    await page.getByText(/\/emails\/0 must match pattern/).waitFor();
    assert.deepEqual(await store.findNotificationContacts(fx.database.db, p), { url: null, emails: [] });
    // What was typed is still there, to be corrected.
    assert.equal(await page.getByLabel('Notification URL').inputValue(), 'https://oncall.hospital.example/notices');
    await page
      .getByLabel('Notification e-mail addresses (one a line)')
      .fill('integration-oncall@hospital.example\nsecond@hospital.example');
    await pressByKeyboard(page, 'Save notification contacts');
    await page.getByText('The notification contacts were saved.').waitFor();
    assert.deepEqual(await store.findNotificationContacts(fx.database.db, p), {
      url: 'https://oncall.hospital.example/notices',
      emails: ['integration-oncall@hospital.example', 'second@hospital.example'],
    });
    await assertAccessible(page, 'notification contacts');
    await close(page);
  });

  it('moving the endpoint to another origin: the page names the custom headers, and its box removes them', async () => {
    const { id: p } = await project();
    const box = fx.registrations.secretBox;
    await store.updateRegistration(
      fx.database.db,
      p,
      {},
      {
        headers: { secretBox: box, values: { 'X-Api-Key': 'k-secret-123' } },
      },
    );
    const page = await open((await link(p)).url);
    const receiverUrl = page.getByLabel('Receiver URL');
    await receiverUrl.waitFor();
    await receiverUrl.fill('https://elsewhere.example/hook');
    await pressByKeyboard(page, 'Save endpoint');
    await page
      .locator('.notice.error')
      .getByText(/\/headers must be given again \(or \{\} to remove them\) when the url moves to another origin/)
      .waitFor();
    assert.equal((await store.findRegistration(fx.database.db, p))!.url, fx.receiver.url, 'nothing stored');
    await page.getByRole('checkbox', { name: /Remove the custom headers and client certificate/ }).check();
    await pressByKeyboard(page, 'Save endpoint');
    await page.getByText('The endpoint was saved.').waitFor();
    const moved = (await store.findRegistration(fx.database.db, p))!;
    assert.deepEqual([moved.url, moved.customHeaderNames], ['https://elsewhere.example/hook', []]);
    await assertAccessible(page, 'endpoint moved');
    await close(page);
  });

  it('a manage link uploads a client certificate by keyboard: shown by subject, its key never again', async () => {
    const { id: p } = await project();
    const { client } = makeCertificates();
    const page = await open((await link(p)).url);
    await page.getByRole('form', { name: 'Client certificate' }).waitFor();
    await page.getByLabel('Client certificate (PEM)').fill(client.certificate);
    await page.getByLabel('Its private key (PEM, not encrypted)').fill(client.privateKey);
    await pressByKeyboard(page, 'Upload client certificate');
    await page.getByText('The client certificate was uploaded; its key is sealed and not shown again.').waitFor();
    const shown = page.locator('section[aria-labelledby="endpoint-title"] dt:text-is("Client certificate") + dd');
    assert.match(await shown.innerText(), /^CN=hospital-client, O=Webhook Service, valid until \S/);
    assert.equal(await page.getByLabel('Its private key (PEM, not encrypted)').inputValue(), '', 'not kept');
    assert.doesNotMatch(await page.content(), /PRIVATE KEY/);
    assert.equal(
      (await store.findRegistration(fx.database.db, p))!.clientCertificate?.subject,
      'CN=hospital-client, O=Webhook Service',
    );
    await assertAccessible(page, 'client certificate');
    await close(page);
  });

  it('a manage link chooses v1a by keyboard: the endpoint shows the scheme and the copyable public key, and rotates it', async () => {
    const { id: p } = await project();
    const page = await open((await link(p)).url);
    const scheme = page.locator('section[aria-labelledby="endpoint-title"] dt:text-is("Signature scheme") + dd');
    await scheme.waitFor();
    assert.match(await scheme.innerText(), /^v1: HMAC-SHA256 with the secret/);
    await page.getByRole('combobox', { name: 'Signature scheme' }).selectOption('v1a');
    await pressByKeyboard(page, 'Save signature scheme');
    await page.getByText('Deliveries are signed with Ed25519 too: give your receiver the public key.').waitFor();
    const row = (await store.findRegistration(fx.database.db, p))!;
    assert.equal(row.signatureScheme, 'v1a');
    assert.match(await scheme.innerText(), /^v1a: Ed25519/);
    const shown = page.getByLabel('Public key', { exact: true });
    assert.equal(await shown.inputValue(), row.signingPublicKey);
    assert.match(row.signingPublicKey!, /^whpk_[A-Za-z0-9+/]{43}=$/);
    await pressByKeyboard(page, 'Copy public key');
    await page.getByRole('button', { name: 'Copy public key (copied)' }).waitFor();
    assert.equal(await page.evaluate('navigator.clipboard.readText()'), row.signingPublicKey);
    assert.doesNotMatch(await page.content(), /PRIVATE KEY/);
    await assertAccessible(page, 'public key');

    await pressByKeyboard(page, 'Rotate signing key');
    await page.getByText('A new key pair signs from now on; the endpoint shows its public key.').waitFor();
    const rotated = (await store.findRegistration(fx.database.db, p))!;
    assert.equal(await page.getByLabel('Public key', { exact: true }).inputValue(), rotated.signingPublicKey);
    assert.equal(await page.getByLabel('Previous public key').inputValue(), row.signingPublicKey);
    await assertAccessible(page, 'rotated public key');
    await close(page);

    // A read-only link sees the public key too (it is no secret), and no form to change it.
    const readOnly = await open((await link(p, { capabilities: ['read'] })).url);
    await readOnly.getByLabel('Public key', { exact: true }).waitFor();
    assert.equal(await readOnly.getByLabel('Public key', { exact: true }).inputValue(), rotated.signingPublicKey);
    assert.equal(await readOnly.getByRole('form', { name: 'Signature scheme' }).count(), 0);
    await assertAccessible(readOnly, 'read-only public key');
    await close(readOnly);
  });

  it('the endpoint shows the client certificate, and warns from 14 days before it expires', async () => {
    const { id: p } = await project();
    const notAfter = new Date(Date.now() + 10 * 86_400_000 + 3_600_000);
    // As an upload stores it (the PEM and sealed key are not read by the page): subject and expiry.
    await fx.database.db('webhook_registrations').where({ project_id: p }).update({
      client_certificate: 'pem',
      client_key_sealed: 'sealed',
      client_certificate_subject: 'CN=hospital-client, O=Example',
      client_certificate_not_after: notAfter,
      client_certificate_fingerprint: 'AA:BB',
    });
    const page = await open((await link(p, { capabilities: ['read'] })).url);
    const certificate = page.locator('section[aria-labelledby="endpoint-title"] dt:text-is("Client certificate") + dd');
    await certificate.waitFor();
    assert.match(await certificate.innerText(), /^CN=hospital-client, O=Example, valid until \S/);
    assert.equal(await certificate.locator('time').getAttribute('datetime'), notAfter.toISOString());
    assert.equal(await certificate.getAttribute('data-certificate'), null);
    assert.equal(await certificate.locator('[data-certificate="expiring"]').count(), 1);
    assert.match(
      await certificate.getByRole('alert').innerText(),
      /The client certificate expires at .* \(in 10 days\): upload its successor before then/,
    );
    await assertAccessible(page, 'certificate warning');
    await close(page);
  });

  it('the endpoint shows the OAuth client (token URL, client, method, scope), never its secret', async () => {
    const { id: p } = await project();
    const secret = 'cs-never-shown-9f3a';
    await store.updateRegistration(
      fx.database.db,
      p,
      {},
      {
        oauth: {
          secretBox: fx.registrations.secretBox,
          value: {
            info: {
              tokenUrl: 'https://auth.hospital.example/oauth2/token',
              clientId: 'webhooks-ward-7',
              clientAuthentication: 'client_secret_basic',
              scope: 'system/Observation.write',
              keyId: null,
            },
            credential: secret,
          },
        },
      },
    );
    const page = await open((await link(p, { capabilities: ['read'] })).url);
    const oauth = page.locator('section[aria-labelledby="endpoint-title"] dt:text-is("OAuth client") + dd');
    await oauth.waitFor();
    assert.equal(
      await oauth.innerText(),
      'bearer token from https://auth.hospital.example/oauth2/token for client webhooks-ward-7 ' +
        '(client_secret_basic), scope system/Observation.write',
    );
    assert.doesNotMatch(await page.content(), new RegExp(secret));
    await assertAccessible(page, 'OAuth client');
    await close(page);
  });

  it('the endpoint shows an open breaker with when it tries again, the health, and each delivery’s last attempt time', async () => {
    const { id: p } = await project();
    const registrationId = (await store.findRegistration(fx.database.db, p))!.id;
    // The receiver failed twice at a breaker threshold of two, as the worker records it: open for ten minutes.
    const failure = { message: 'Receiver answered HTTP 503', statusCode: 503 };
    const thresholds = { failureThreshold: 2, openMs: 600_000, maxOpenMs: 600_000 };
    const key = { id: `evt-${randomUUID()}`, projectId: p, type: 'FALL_DETECTION', workflowId: 'webhook-event-x' };
    for (const runAttempt of [1, 2]) {
      await store.recordDeliveryAttempt(fx.database.db, key, {
        runAttempt,
        statusCode: 503,
        durationMs: 12,
        error: failure.message,
        delivered: false,
      });
      await store.recordEndpointFailure(fx.database.db, p, failure.message);
      await store.recordFailure(fx.database.db, registrationId, thresholds, failure);
    }
    // The last attempt was long before the delivery gave up: the column shows the attempt, not the last change.
    const lastAttemptAt = '2026-01-02T03:04:05.000Z';
    await fx.database
      .db('deliveries')
      .where({ id: key.id })
      .update({ created_at: '2026-01-02T03:00:00Z', last_attempt_at: lastAttemptAt });
    // The attempts carry their delivery's created_at (their partition key) with it.
    await fx.database
      .db('delivery_attempts')
      .where({ delivery_id: key.id })
      .update({ at: lastAttemptAt, delivery_created_at: '2026-01-02T03:00:00Z' });
    await store.markDeliveryFailed(fx.database.db, key, 'gave up');
    const { openUntil } = (await store.findBreaker(fx.database.db, registrationId))!;

    const page = await open((await link(p, { capabilities: ['read'] })).url);
    const endpoint = page.locator('section[aria-labelledby="endpoint-title"]');
    const detail = (term: string) => endpoint.locator(`dt:text-is("${term}") + dd`);
    await detail('Circuit breaker').waitFor();
    assert.match(
      await detail('Circuit breaker').innerText(),
      /^open: no delivery is attempted until \S.*, when one tries again$/,
    );
    assert.equal(await detail('Circuit breaker').locator('time').getAttribute('datetime'), openUntil!.toISOString());
    assert.equal(await detail('Health').innerText(), 'failing');
    assert.equal(await detail('Consecutive failures').innerText(), '2');
    assert.equal(await detail('Last error').innerText(), 'Receiver answered HTTP 503');
    assert.notEqual(await detail('Last failure').innerText(), '—');

    const lastAttempt = row(page, key.id).locator('time');
    assert.equal(await lastAttempt.getAttribute('datetime'), lastAttemptAt);
    assert.equal(
      await lastAttempt.innerText(),
      await page.evaluate((iso) => new Date(iso).toLocaleString(), lastAttemptAt),
    );
    assert.match(await row(page, key.id).innerText(), /FALL_DETECTION\s+failed\s+2\s+503\s/);
    assert.doesNotMatch(await page.locator('main').innerText(), /\b(null|undefined|NaN)\b/);
    await assertAccessible(page, 'open breaker');
    await screenshot(page, 'breaker-open');
    await close(page);
  });

  it('pages through the log 20 deliveries at a time, by keyboard', async () => {
    const { id: p } = await project();
    const ids = Array.from({ length: 23 }, (_, i) => `evt-${String(i).padStart(2, '0')}-${randomUUID().slice(0, 8)}`);
    for (const id of ids)
      await store.upsertDelivery(
        fx.database.db,
        { id, projectId: p, type: 'FALL_DETECTION', workflowId: id },
        'delivered',
      );
    const page = await open((await link(p, { capabilities: ['read'] })).url);
    await page.getByText('Page 1').waitFor();
    assert.equal((await rowIds(page)).length, 20);
    await pressByKeyboard(page, 'Show older deliveries');
    await page.getByText('Page 2').waitFor();
    const second = await rowIds(page);
    assert.equal(second.length, 3);
    await pressByKeyboard(page, 'Show newer deliveries');
    await page.getByText('Page 1').waitFor();
    const first = await rowIds(page);
    assert.equal(first.length, 20);
    assert.deepEqual([...first, ...second].sort(), [...ids].sort(), 'every delivery once');
    await close(page);
  });

  /** Calls the API with a token (a member's by default). */
  const callApi = async (method: string, path: string, body?: unknown, token = hsToken('alice')) =>
    (
      await fetch(api.url + path, {
        method,
        headers: { ...bearer(token), ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      })
    ).status;
  const auditIds = async (page: Page) =>
    Promise.all(
      (await page.locator('tr[data-audit]').all()).map(async (r) => String(await r.getAttribute('data-audit'))),
    );
  const auditActions = async (page: Page) =>
    Promise.all((await page.locator('tr[data-audit] td:nth-child(3) code').all()).map((c) => c.innerText()));

  it("a manage link's Activity view: the project's trail, newest first, live, by keyboard; no other project's rows", async () => {
    const { id: p } = await project();
    const { id: other } = await project();
    const registrationId = (await store.findRegistration(fx.database.db, p))!.id;
    const first = await link(p);
    const moved = `${new URL((await store.findRegistration(fx.database.db, p))!.url).origin}/moved-capability-7f3a`;
    assert.equal(
      await callApi('PATCH', '/webhooks', { projectId: p, url: moved, types: ['FALL_DETECTION'] }, first.token),
      200,
    );
    assert.equal(
      await callApi('POST', `/webhooks/project/${p}/secret/rotate`, { overlapSeconds: 3600 }, first.token),
      200,
    );
    // A link of the project refused a members' route is the project's to see; a stranger's refusal is the operators'.
    assert.equal(await callApi('DELETE', `/webhooks/project/${p}`, undefined, first.token), 403);
    assert.equal(await callApi('DELETE', `/webhooks/project/${p}`, undefined, hsToken('mallory')), 403);
    // The receiver fails twice at a threshold of two: the breaker opens, probes once its period is over, and closes.
    const thresholds = { failureThreshold: 2, openMs: 600_000, maxOpenMs: 600_000 };
    for (let i = 0; i < 2; i += 1)
      await store.recordFailure(fx.database.db, registrationId, thresholds, { message: 'HTTP 503', statusCode: 503 });
    await fx.database
      .db('webhook_circuit_breakers')
      .where({ registration_id: registrationId })
      .update({ open_until: fx.database.db.fn.now() });
    assert.equal((await store.admitAttempt(fx.database.db, registrationId, 10_000)).state, 'probe');
    await store.recordSuccess(fx.database.db, registrationId);
    // Not this project's: another project's link, and an operator's codec read (which names no project).
    await link(other);
    await store.appendAuditEvent(fx.database.db, {
      actor: { kind: 'member', subject: 'operator-1' },
      action: 'codec.decode',
      outcome: 'ok',
      changes: { payloads: 1, keyIds: ['k1'], namespace: 'default' },
    });

    const { url, token } = await link(p);
    const page = await open(url);
    await page.getByRole('heading', { name: 'Endpoint' }).waitFor();
    await pressByKeyboard(page, 'Show activity');
    await page.getByRole('heading', { name: 'Activity' }).waitFor();
    assert.equal(
      await page.evaluate<string>("document.activeElement?.id ?? ''"),
      'activity-title',
      'focus on the view',
    );
    assert.deepEqual(await auditActions(page), [
      'portal-link.create',
      'breaker.close',
      'breaker.half-open',
      'breaker.open',
      'access.refused',
      'webhook.secret.rotate',
      'webhook.update',
      'portal-link.create',
    ]);
    const rowText = (n: number) => page.locator('tr[data-audit]').nth(n).innerText();
    assert.match(
      await rowText(0),
      new RegExp(`^\\S.*\\talice\\tMade a portal link[\\s\\S]*portalLinkId: ${portalLinkId(token)}`),
    );
    const firstLink = portalLinkId(first.token).slice(0, 8);
    assert.match(
      await rowText(5),
      new RegExp(`alice, through portal link ${firstLink} \\(read, manage\\)\\s+Rotated the signing secret`),
    );
    assert.match(await rowText(1), /the service\s+Circuit breaker closed/);
    assert.match(await rowText(3), /from: closed[\s\S]*statusCode: 503/);
    assert.match(
      await rowText(4),
      new RegExp(
        `alice, through portal link ${firstLink} \\(read, manage\\)\\s+Was refused access[\\s\\S]*method: DELETE`,
      ),
    );
    assert.match(await rowText(6), /types: FALL_DETECTION, VITAL_THRESHOLD → FALL_DETECTION/);
    // The URL by its origin and the start of its fingerprint: the path changed, and is not shown.
    assert.match(
      await rowText(6),
      /url: http:\/\/127\.0\.0\.1:\d+ \(sha256:[0-9a-f]{8}…\) → http:\/\/127\.0\.0\.1:\d+ \(sha256:[0-9a-f]{8}…\)/,
    );
    const shown = await page.locator('main').innerText();
    assert.doesNotMatch(shown, /codec\.decode|operator-1|whsec_|moved-capability/, 'no codec read, no secret, no path');
    assert.doesNotMatch(shown, /mallory/, 'no stranger’s refusal');
    assert.doesNotMatch(shown, /\b(null|undefined|NaN)\b/);
    assert.ok(!shown.includes(other), 'nothing of the other project');
    await assertAccessible(page, 'activity view');
    await screenshot(page, 'activity');

    // An action while the view is open appears on its first page without a reload.
    assert.equal(await callApi('POST', `/webhooks/project/${p}/secret/rotate`, {}), 200);
    await page.locator('tr[data-audit]').first().getByText('webhook.secret.rotate').waitFor({ timeout: 15_000 });
    await pressByKeyboard(page, 'Back to endpoint and deliveries');
    await page.getByRole('heading', { name: 'Endpoint' }).waitFor();
    assert.equal(await page.locator('tr[data-audit]').count(), 0);
    await close(page);
  });

  it('pages through the activity 20 rows at a time, by keyboard', async () => {
    const { id: p } = await project();
    for (let i = 0; i < 23; i += 1)
      await store.appendAuditEvent(fx.database.db, {
        actor: { kind: 'member', subject: 'alice' },
        action: 'webhook.test',
        outcome: 'ok',
        projectId: p,
      });
    const page = await open((await link(p)).url);
    await pressByKeyboard(page, 'Show activity');
    await page.getByText('Page 1').waitFor();
    const firstPage = await auditIds(page);
    assert.equal(firstPage.length, 20);
    await pressByKeyboard(page, 'Show older activity');
    await page.getByText('Page 2').waitFor();
    const second = await auditIds(page);
    assert.equal(second.length, 4, '23 tests and the link');
    await pressByKeyboard(page, 'Show newer activity');
    await page.getByText('Page 1').waitFor();
    assert.deepEqual(await auditIds(page), firstPage);
    const all = (await store.listAuditEvents(fx.database.db, { projectId: p, limit: 100 })).map((row) => row.id);
    assert.deepEqual([...firstPage, ...second], all, 'every row once, newest first');
    await close(page);
  });

  it('an expired, revoked, forged or missing link shows the error page, and the API answers 401', async () => {
    const { id: p } = await project();
    const grant = {
      projectId: p,
      capabilities: ['read', 'manage'] as ['read', 'manage'],
      createdBy: 'alice',
      membership: '',
      generation: 0,
    };
    const expired = portalTokens.sign(grant, -10).token;
    const revoked = await link(p);
    const revoke = await fetch(`${api.url}/webhooks/project/${p}/portal-sessions`, {
      method: 'DELETE',
      headers: bearer(hsToken('alice')),
    });
    assert.equal(revoke.status, 204);
    const forged = createPortalTokens(portalSigningKeys([{ id: 'k1', key: randomBytes(32) }])).sign(grant, 600).token;
    const cases: [string, string][] = [
      ['expired', `${api.url}/portal#token=${expired}`],
      ['revoked', revoked.url],
      ['forged', `${api.url}/portal#token=${forged}`],
      ['missing', `${api.url}/portal`],
    ];
    for (const [name, url] of cases) {
      const page = await open(url);
      await page.getByRole('heading', { name: 'This link has expired or is not valid' }).waitFor();
      assert.match(
        await page.getByRole('alert').innerText(),
        /This link has expired or is not valid; ask for a new one/,
      );
      if (name === 'revoked') {
        await assertAccessible(page, 'invalid link');
        await screenshot(page, 'invalid');
      }
      await close(page);
    }
    for (const token of [expired, revoked.token, forged]) {
      const refused = await fetch(`${api.url}/webhooks/project/${p}`, { headers: bearer(token) });
      assert.equal(refused.status, 401);
    }
  });
});
