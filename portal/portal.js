// The webhook portal: one project's endpoint and delivery log, and for manage links its audit trail (Activity), read
// through the API with the link's token.
// Plain DOM, no framework, no build step; every text goes in through textContent (nothing is parsed as HTML).
'use strict';

(function () {
  const STATUSES = ['pending', 'held', 'delivered', 'failed', 'skipped'];
  const PAGE_SIZE = 20;
  const REFRESH_MS = 3000;
  const INVALID_LINK = 'This link has expired or is not valid; ask for a new one.';

  const app = document.getElementById('app');
  const state = {
    token: '',
    claims: null,
    registration: null,
    health: null,
    filters: { status: '', type: '', since: '', until: '' },
    /** Cursors of the pages before the current one; the current page's cursor is the last. */
    cursors: [],
    page: { items: [], nextCursor: null },
    selected: null,
    notice: null,
    newSecret: null,
    /** The project's notification contacts, read once for a manage link (null: not read). */
    contacts: null,
    testOutcome: null,
    /** 'deliveries' (the endpoint and its log) or 'activity' (the project's audit trail, manage links only). */
    view: 'deliveries',
    activity: { cursors: [], page: { items: [], nextCursor: null } },
    /** The event types, read from the API's description: all (the log's filter) and those a webhook subscribes to. */
    eventTypes: { all: [], subscribable: [] },
  };

  /** Builds an element: attributes (on* are listeners), then children (strings become text). */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
      else if (name === 'value') el.value = value;
      else if (name === 'checked') el.checked = value;
      else el.setAttribute(name, value === true ? '' : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      el.append(typeof child === 'string' || typeof child === 'number' ? String(child) : child);
    }
    return el;
  }

  const when = (iso) => (iso ? new Date(iso).toLocaleString() : '—');
  /** A time as the reader's locale writes it, machine-readable in its datetime attribute. */
  const time = (iso) => (iso ? h('time', { datetime: iso }, when(iso)) : '—');
  const canManage = () => state.claims.cap.includes('manage');
  const projectPath = () => `/webhooks/project/${encodeURIComponent(state.claims.prj)}`;

  class ApiProblem extends Error {
    constructor(status, detail) {
      super(detail);
      this.status = status;
    }
  }

  async function api(method, path, body) {
    const response = await fetch(path, {
      method,
      headers: {
        Authorization: `Bearer ${state.token}`,
        ...(body !== undefined && { 'Content-Type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
    });
    const text = await response.text();
    const parsed = text ? JSON.parse(text) : {};
    if (response.status === 401) {
      showInvalidLink();
      throw new ApiProblem(401, INVALID_LINK);
    }
    if (!response.ok) throw new ApiProblem(response.status, parsed.detail || `The API answered ${response.status}`);
    return parsed;
  }

  function readToken() {
    const fromFragment = new URLSearchParams(location.hash.slice(1)).get('token');
    if (fromFragment) {
      sessionStorage.setItem('portal-token', fromFragment);
      // Out of the address bar and the history: the link is not copied along with the page's address.
      history.replaceState(null, '', location.pathname);
    }
    return fromFragment || sessionStorage.getItem('portal-token') || '';
  }

  /** The token's claims, read (not verified: the API does that) to know the project, capabilities and expiry. */
  function readClaims(token) {
    try {
      const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
      const claims = JSON.parse(atob(part));
      if (typeof claims.prj !== 'string' || !Array.isArray(claims.cap) || typeof claims.exp !== 'number') return null;
      return claims;
    } catch {
      return null;
    }
  }

  let stopped = false;
  function showInvalidLink() {
    stopped = true;
    sessionStorage.removeItem('portal-token');
    document.title = 'Link not valid · Webhook portal';
    app.replaceChildren(
      h('h1', {}, 'This link has expired or is not valid'),
      h('p', { class: 'notice error', role: 'alert' }, INVALID_LINK),
      h('p', {}, 'Portal links work for a limited time and can be revoked. Ask the person who sent you this one.'),
    );
  }

  function listQuery(cursor) {
    const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
    const { status, type, since, until } = state.filters;
    if (status) query.set('status', status);
    if (type) query.set('type', type);
    if (since) query.set('since', new Date(since).toISOString());
    if (until) query.set('until', new Date(until).toISOString());
    if (cursor) query.set('cursor', cursor);
    return `${projectPath()}/deliveries?${query}`;
  }

  /** The event types as the API's public OpenAPI document lists them: the log's type filter and the webhook's types. */
  async function loadEventTypes() {
    const response = await fetch('/openapi.json').catch(() => null);
    const doc = response && response.ok ? await response.json().catch(() => null) : null;
    const filter = doc?.paths?.['/webhooks/project/{projectId}/deliveries']?.get?.parameters?.find(
      (parameter) => parameter.in === 'query' && parameter.name === 'type',
    );
    const all = filter?.schema?.enum;
    const subscribable = doc?.components?.schemas?.UpdateWebhookBody?.properties?.types?.items?.enum;
    if (!Array.isArray(all) || !Array.isArray(subscribable))
      throw new Error(
        'The event types could not be read from the API’s description (/openapi.json); reload to try again.',
      );
    state.eventTypes = { all, subscribable };
  }

  async function loadEndpoint() {
    const [registration, health] = await Promise.all([
      api('GET', projectPath()).catch((error) => {
        if (error.status === 404) return null;
        throw error;
      }),
      api('GET', `${projectPath()}/health`),
    ]);
    state.registration = registration;
    state.health = health;
  }

  let pageLoads = 0;
  /** Loads the current page; an answer to an older request (a refresh racing a filter change) is dropped. */
  async function loadPage() {
    const load = ++pageLoads;
    const page = await api('GET', listQuery(state.cursors.at(-1)));
    if (load === pageLoads) state.page = page;
  }

  let activityLoads = 0;
  /** The current page of the project's audit trail, newest first; an answer to an older request is dropped. */
  async function loadActivity() {
    const load = ++activityLoads;
    const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
    const cursor = state.activity.cursors.at(-1);
    if (cursor) query.set('cursor', cursor);
    const page = await api('GET', `${projectPath()}/audit?${query}`);
    if (load === activityLoads) state.activity.page = page;
  }

  async function loadSelected() {
    // Once later attempts are shown, the refresh leaves them rather than fold the view back to the first page.
    if (state.selected && !state.selected.extended)
      state.selected = await api('GET', `${projectPath()}/deliveries/${encodeURIComponent(state.selected.id)}`);
  }

  /** The detail holds the first attempts; the rest come a page at a time, appended. */
  async function loadMoreAttempts() {
    const d = state.selected;
    const query = `?limit=100&cursor=${encodeURIComponent(d.nextAttemptsCursor)}`;
    const page = await api('GET', `${projectPath()}/deliveries/${encodeURIComponent(d.id)}/attempts${query}`);
    if (state.selected !== d) return;
    state.selected = {
      ...d,
      attemptLog: [...d.attemptLog, ...page.items],
      nextAttemptsCursor: page.nextCursor,
      extended: true,
    };
  }

  /** Runs an action, shows its outcome (or its problem) and redraws. */
  async function act(work, success) {
    // A form's action: its changed fields keep their marks (and what the reader typed) until it succeeds.
    const submitted = submittedFields;
    submittedFields = [];
    state.notice = null;
    try {
      const result = await work();
      if (success) state.notice = { text: success(result), error: false };
      for (const key of submitted)
        app.querySelector(`[data-focus="${CSS.escape(key)}"]`)?.removeAttribute('data-edited');
    } catch (error) {
      if (error.status === 401) return;
      state.notice = { text: error.message, error: true };
    }
    render();
  }

  // ---- views ----------------------------------------------------------------------------------------------------

  function endpointView() {
    const r = state.registration;
    const hl = state.health;
    const rows = [
      ['URL', r ? h('code', {}, r.url) : 'No webhook is registered for this project'],
      ['Event types', r ? r.types.join(', ') : '—'],
      ['Deliveries', pauseText(r)],
      ['Client certificate', certificateText(r, hl)],
      ['Signature scheme', schemeText(r)],
      ['Public key', publicKeyView(r)],
      ['OAuth client', oauthText(r)],
      ['Health', hl.state],
      ['Circuit breaker', breakerText(hl.breaker)],
      ['Rate limit', rateLimitText(hl.rateLimit)],
      ['Consecutive failures', String(hl.consecutiveFailures)],
      ['Last success', time(hl.lastSuccessAt)],
      ['Last failure', time(hl.lastFailureAt)],
      ['Last error', hl.lastError || '—'],
    ];
    return h(
      'section',
      { 'aria-labelledby': 'endpoint-title' },
      h('h2', { id: 'endpoint-title' }, 'Endpoint'),
      h(
        'dl',
        {},
        rows.map(([term, detail]) => [h('dt', {}, term), h('dd', {}, detail)]),
      ),
      canManage() && r ? manageEndpointView(r) : null,
    );
  }

  /** The client certificate presented to the receiver (mutual TLS), and the health route's warning near its expiry. */
  function certificateText(r, hl) {
    const c = r && r.clientCertificate;
    if (!c) return 'none';
    const expiry = hl.clientCertificate;
    return h(
      'span',
      { 'data-certificate': expiry ? expiry.state : 'valid' },
      `${c.subject}, valid until `,
      time(c.notAfter),
      expiry && expiry.warning ? h('strong', { class: 'warning', role: 'alert' }, ` ${expiry.warning}`) : null,
    );
  }

  /** How webhook-signature is signed, in words. */
  function schemeText(r) {
    if (!r) return '—';
    return r.signatureScheme === 'v1a'
      ? h('span', { 'data-scheme': 'v1a' }, 'v1a: Ed25519 (verify with the public key), and v1 HMAC with the secret')
      : h('span', { 'data-scheme': 'v1' }, 'v1: HMAC-SHA256 with the secret');
  }

  /** The public key receivers verify v1a with (not a secret: any link sees it), copyable; the replaced one while it signs. */
  function publicKeyView(r) {
    if (!r || !r.publicKey) return 'none (v1 signs with the secret only)';
    const key = (value, id, label) => {
      const field = h('input', { type: 'text', readonly: true, value, id, 'aria-label': label, class: 'key' });
      return h(
        'div',
        { class: 'row' },
        field,
        h(
          'button',
          {
            type: 'button',
            class: 'secondary',
            'data-focus': `copy-${id}`,
            onclick: async (event) => {
              field.select();
              try {
                await navigator.clipboard.writeText(value);
                event.target.textContent = `Copy ${label.toLowerCase()} (copied)`;
              } catch {
                event.target.textContent = `Copy ${label.toLowerCase()} (press Ctrl+C)`;
              }
            },
          },
          `Copy ${label.toLowerCase()}`,
        ),
      );
    };
    return [
      key(r.publicKey, 'public-key', 'Public key'),
      r.previousPublicKey
        ? [
            h('p', {}, 'The replaced key still signs until ', time(r.previousPublicKeyExpiresAt), ':'),
            key(r.previousPublicKey, 'previous-public-key', 'Previous public key'),
          ]
        : null,
    ];
  }

  /** The OAuth client whose bearer token every delivery carries: token endpoint, client, method, scope; never its secret. */
  function oauthText(r) {
    const o = r && r.oauth;
    if (!o) return 'none';
    return h(
      'span',
      { 'data-oauth': o.clientAuthentication },
      'bearer token from ',
      h('code', {}, o.tokenUrl),
      ` for client ${o.clientId} (${o.clientAuthentication}${o.keyId ? `, key ${o.keyId}` : ''})`,
      o.scope ? `, scope ${o.scope}` : ', no scope',
    );
  }

  /** Whether a pause holds the deliveries, or the receiver asked to be left alone, in words. */
  function pauseText(r) {
    if (!r) return '—';
    if (r.pauseReason === 'gone')
      return h(
        'span',
        { 'data-pause': 'gone' },
        'held: the receiver answered 410 Gone at ',
        time(r.pausedAt),
        '; nothing is sent, and nothing fails, until a member resumes',
      );
    if (!r.pausedUntil && r.slowedUntil)
      return h(
        'span',
        { 'data-pause': 'slowed' },
        'slowed down: the receiver asked to wait; deliveries go out again at ',
        time(r.slowedUntil),
        ', falls first',
      );
    if (!r.pausedUntil) return h('span', { 'data-pause': 'running' }, 'sent as events occur');
    return h(
      'span',
      { 'data-pause': 'paused' },
      'paused: held, nothing is sent until resumed or until ',
      time(r.pausedUntil),
      ', when the pause ends by itself',
    );
  }

  /** What the breaker does to deliveries now, in words. */
  function breakerText(breaker) {
    if (breaker.state === 'open')
      return h(
        'span',
        { 'data-breaker': 'open' },
        'open: no delivery is attempted until ',
        time(breaker.openUntil),
        ', when one tries again',
      );
    if (breaker.state === 'half-open')
      return h('span', { 'data-breaker': 'half-open' }, 'half-open: the next delivery tries the receiver again');
    return h('span', { 'data-breaker': 'closed' }, 'closed: deliveries are attempted');
  }

  /** The receiver's rate limit and the deliveries waiting for it, in words. */
  function rateLimitText(rateLimit) {
    if (!rateLimit) return h('span', { 'data-rate-limit': 'none' }, 'none: deliveries are sent as events occur');
    const { perSecond, waiting } = rateLimit;
    return h(
      'span',
      { 'data-rate-limit': 'set' },
      `at most ${perSecond} ${perSecond === 1 ? 'delivery' : 'deliveries'} a second; `,
      h('strong', { 'data-testid': 'rate-waiting' }, String(waiting)),
      ` waiting for it (sent as the rate allows, falls first)`,
    );
  }

  function manageEndpointView(r) {
    const url = h('input', { type: 'url', name: 'url', value: r.url, required: true, 'data-focus': 'url' });
    const rate = h('input', {
      type: 'number',
      name: 'rate-limit',
      min: '1',
      max: '1000',
      step: '1',
      value: r.rateLimit ? String(r.rateLimit.perSecond) : '',
      'data-focus': 'rate-limit',
    });
    const boxes = state.eventTypes.subscribable.map((type) =>
      h(
        'label',
        {},
        h('input', { type: 'checkbox', value: type, checked: r.types.includes(type), 'data-focus': `type-${type}` }),
        ` ${type}`,
      ),
    );
    // Custom headers, a client certificate and an OAuth client belong to the URL's origin: moving elsewhere, the API
    // asks that they go.
    const credentials = r.headerNames.length > 0 || r.clientCertificate !== null || r.oauth !== null;
    const dropCredentials = h('input', {
      type: 'checkbox',
      name: 'drop-credentials',
      'data-focus': 'drop-credentials',
    });
    const edit = h(
      'form',
      {
        'aria-label': 'Edit endpoint',
        onsubmit: (event) => {
          event.preventDefault();
          const types = boxes
            .map((label) => label.firstChild)
            .filter((box) => box.checked)
            .map((box) => box.value);
          void act(
            async () => {
              state.registration = await api('PATCH', '/webhooks', {
                projectId: state.claims.prj,
                url: url.value,
                types,
                rateLimit: rate.value === '' ? null : { perSecond: Number(rate.value) },
                ...(dropCredentials.checked && { headers: {}, clientCertificate: null, oauth: null }),
              });
            },
            () => 'The endpoint was saved.',
          );
        },
      },
      h('label', {}, 'Receiver URL', url),
      h('fieldset', {}, h('legend', {}, 'Event types'), boxes),
      h('label', {}, 'Rate limit (deliveries a second; empty: none)', rate),
      credentials
        ? h(
            'label',
            {},
            dropCredentials,
            ' Remove the custom headers and client certificate, and the OAuth client (needed to move the URL to ' +
              'another host, port or scheme: they were given for this one)',
          )
        : null,
      h('button', { type: 'submit', 'data-focus': 'save' }, 'Save endpoint'),
    );
    const overlap = h('input', { type: 'number', min: '0', max: '168', value: '24', 'data-focus': 'overlap' });
    const test = state.testOutcome;
    return [
      edit,
      h(
        'div',
        { class: 'row' },
        h(
          'button',
          {
            type: 'button',
            'data-focus': 'test',
            onclick: () =>
              act(async () => {
                state.testOutcome = null;
                try {
                  const outcome = await api('POST', `/webhooks/test/project/${encodeURIComponent(state.claims.prj)}`);
                  state.testOutcome = `Test event delivered: status ${outcome.statusCode} in ${Math.round(outcome.durationMs)} ms`;
                } catch (error) {
                  if (error.status !== 502) throw error;
                  state.testOutcome = `Test event not acknowledged: ${error.message}`;
                }
              }),
          },
          'Send test event',
        ),
        h('output', { 'aria-live': 'polite', 'data-testid': 'test-outcome' }, test || ''),
      ),
      h(
        'div',
        { class: 'row' },
        // A pause, or the hold a 410 began (no end of its own): either way the member resumes.
        r.pausedAt
          ? h(
              'button',
              {
                type: 'button',
                'data-focus': 'resume',
                onclick: () =>
                  act(
                    async () => {
                      state.registration = await api('POST', `${projectPath()}/resume`);
                      await loadPage();
                    },
                    () => 'Deliveries resumed: the held ones go out now, falls first.',
                  ),
              },
              'Resume deliveries',
            )
          : h(
              'button',
              {
                type: 'button',
                class: 'secondary',
                'data-focus': 'pause',
                onclick: () =>
                  act(
                    async () => {
                      state.registration = await api('POST', `${projectPath()}/pause`);
                    },
                    () => 'Deliveries paused: events are held, not sent and not failed, until you resume.',
                  ),
              },
              'Pause deliveries',
            ),
      ),
      h(
        'form',
        {
          'aria-label': 'Rotate secret',
          onsubmit: (event) => {
            event.preventDefault();
            void act(async () => {
              const rotated = await api('POST', `${projectPath()}/secret/rotate`, {
                overlapSeconds: Math.round(Number(overlap.value) * 3600),
              });
              state.newSecret = rotated;
            });
          },
        },
        h('label', {}, 'Overlap of the old secret (hours)', overlap),
        h('button', { type: 'submit', 'data-focus': 'rotate' }, 'Rotate secret'),
      ),
      state.newSecret ? newSecretView(state.newSecret) : null,
      signatureSchemeView(r),
      certificateUploadView(),
      state.contacts ? contactsView(state.contacts) : null,
    ];
  }

  /** Chooses the signature scheme (v1a makes an Ed25519 key pair) and, under v1a, rotates the key pair with an overlap. */
  function signatureSchemeView(r) {
    const scheme = h(
      'select',
      { name: 'signatureScheme', 'data-focus': 'signature-scheme' },
      h('option', { value: 'v1', selected: r.signatureScheme === 'v1' }, 'v1: HMAC with the secret'),
      h('option', { value: 'v1a', selected: r.signatureScheme === 'v1a' }, 'v1a: Ed25519 public key, and v1'),
    );
    const overlap = h('input', { type: 'number', min: '0', max: '168', value: '24', 'data-focus': 'key-overlap' });
    return [
      h(
        'form',
        {
          'aria-label': 'Signature scheme',
          onsubmit: (event) => {
            event.preventDefault();
            void act(
              async () => {
                state.registration = await api('PATCH', '/webhooks', {
                  projectId: state.claims.prj,
                  signatureScheme: scheme.value,
                });
              },
              () =>
                state.registration.signatureScheme === 'v1a'
                  ? 'Deliveries are signed with Ed25519 too: give your receiver the public key.'
                  : 'Deliveries are signed with the secret only; the key pair was erased.',
            );
          },
        },
        h('label', {}, 'Signature scheme', scheme),
        h('button', { type: 'submit', 'data-focus': 'save-scheme' }, 'Save signature scheme'),
      ),
      r.signatureScheme === 'v1a'
        ? h(
            'form',
            {
              'aria-label': 'Rotate signing key',
              onsubmit: (event) => {
                event.preventDefault();
                void act(
                  async () => {
                    await api('POST', `${projectPath()}/signing-key/rotate`, {
                      overlapSeconds: Math.round(Number(overlap.value) * 3600),
                    });
                    state.registration = await api('GET', projectPath());
                  },
                  () => 'A new key pair signs from now on; the endpoint shows its public key.',
                );
              },
            },
            h('label', {}, 'Overlap of the old key pair (hours)', overlap),
            h('button', { type: 'submit', 'data-focus': 'rotate-key' }, 'Rotate signing key'),
          )
        : null,
    ];
  }

  /** Uploads a client certificate and its key (PEM) for receivers that require mutual TLS; the key is never shown. */
  function certificateUploadView() {
    const certificate = h('textarea', { name: 'certificate', rows: '4', 'data-focus': 'certificate' });
    const privateKey = h('textarea', { name: 'private-key', rows: '4', 'data-focus': 'private-key' });
    return h(
      'form',
      {
        'aria-label': 'Client certificate',
        onsubmit: (event) => {
          event.preventDefault();
          void act(
            async () => {
              state.registration = await api('PATCH', '/webhooks', {
                projectId: state.claims.prj,
                clientCertificate: { certificate: certificate.value, privateKey: privateKey.value },
              });
            },
            () => 'The client certificate was uploaded; its key is sealed and not shown again.',
          );
        },
      },
      h('label', {}, 'Client certificate (PEM)', certificate),
      h('label', {}, 'Its private key (PEM, not encrypted)', privateKey),
      h('button', { type: 'submit', 'data-focus': 'upload-certificate' }, 'Upload client certificate'),
    );
  }

  /** Who the service tells when the endpoint fails or recovers: a URL and e-mail addresses, one a line. */
  function contactsView(contacts) {
    // What was typed stays in the form when the API refuses it (marked as edited), to be corrected, not typed again.
    const url = h('input', {
      type: 'url',
      name: 'contacts-url',
      value: contacts.url || '',
      'data-focus': 'contacts-url',
    });
    const emails = h('textarea', { name: 'contacts-emails', rows: '3', 'data-focus': 'contacts-emails' });
    emails.value = contacts.emails.join('\n');
    return h(
      'form',
      {
        'aria-label': 'Notification contacts',
        onsubmit: (event) => {
          event.preventDefault();
          void act(
            async () => {
              state.contacts = await api('PUT', `${projectPath()}/notifications`, {
                url: url.value.trim() || null,
                emails: emails.value
                  .split(/[\s,]+/)
                  .map((address) => address.trim())
                  .filter(Boolean),
              });
            },
            () => 'The notification contacts were saved.',
          );
        },
      },
      h(
        'p',
        { class: 'muted' },
        'Told when deliveries keep failing, recover, are given up, and more; never with event data.',
      ),
      h('label', {}, 'Notification URL', url),
      h('label', {}, 'Notification e-mail addresses (one a line)', emails),
      h('button', { type: 'submit', 'data-focus': 'save-contacts' }, 'Save notification contacts'),
    );
  }

  function newSecretView(rotated) {
    const secret = h('input', {
      type: 'text',
      readonly: true,
      value: rotated.secret,
      id: 'new-secret',
      'data-focus': 'secret',
    });
    return h(
      'div',
      { class: 'notice', role: 'region', 'aria-label': 'New signing secret' },
      h(
        'p',
        {},
        'The new signing secret, shown only this once. The old one keeps signing until ',
        when(rotated.previousSecretExpiresAt),
        '.',
      ),
      h(
        'div',
        { class: 'row' },
        h('label', {}, 'New secret', secret),
        h(
          'button',
          {
            type: 'button',
            class: 'secondary',
            'data-focus': 'copy',
            onclick: async (event) => {
              secret.select();
              try {
                await navigator.clipboard.writeText(rotated.secret);
                event.target.textContent = 'Copy secret (copied)';
              } catch {
                event.target.textContent = 'Copy secret (press Ctrl+C)';
              }
            },
          },
          'Copy secret',
        ),
        h(
          'button',
          {
            type: 'button',
            class: 'secondary',
            'data-focus': 'hide',
            onclick: () => {
              state.newSecret = null;
              render();
            },
          },
          'Hide secret',
        ),
      ),
    );
  }

  function filtersView() {
    const select = (name, label, options) =>
      h(
        'label',
        {},
        label,
        h(
          'select',
          { name, 'data-focus': `filter-${name}` },
          h('option', { value: '' }, 'Any'),
          options.map((o) => h('option', { value: o, selected: state.filters[name] === o }, o)),
        ),
      );
    const timeInput = (name, label) =>
      h(
        'label',
        {},
        label,
        h('input', { type: 'datetime-local', name, value: state.filters[name], 'data-focus': `filter-${name}` }),
      );
    return h(
      'form',
      {
        'aria-label': 'Filter deliveries',
        onsubmit: (event) => {
          event.preventDefault();
          const data = new FormData(event.target);
          for (const key of Object.keys(state.filters)) state.filters[key] = String(data.get(key) || '');
          state.cursors = [];
          void act(loadPage);
        },
      },
      select('status', 'Status', STATUSES),
      select('type', 'Type', state.eventTypes.all),
      timeInput('since', 'Created from'),
      timeInput('until', 'Created before'),
      h('button', { type: 'submit', 'data-focus': 'apply' }, 'Apply filters'),
    );
  }

  /** A page of a live list, newest first (the delivery log, the activity), or `empty` when it has no rows. */
  function liveTable(columns, rows, empty) {
    if (!rows.length) return h('p', {}, empty);
    return h(
      'table',
      {},
      h('caption', { class: 'muted' }, 'Newest first; refreshed every few seconds on the first page.'),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          columns.map((c) => h('th', { scope: 'col' }, c)),
        ),
      ),
      h('tbody', {}, rows),
    );
  }

  function deliveriesView() {
    const manage = canManage();
    const rows = state.page.items.map((d) =>
      h(
        'tr',
        { 'data-delivery': d.id },
        h('td', {}, h('code', {}, d.id)),
        h('td', {}, d.type),
        h('td', { class: `status-${d.status}` }, d.status),
        h('td', {}, String(d.attempts)),
        h('td', {}, d.lastStatusCode === null ? '—' : String(d.lastStatusCode)),
        h('td', {}, time(d.lastAttemptAt)),
        h(
          'td',
          {},
          h(
            'button',
            {
              type: 'button',
              class: 'secondary',
              'aria-label': `Show attempts of ${d.id}`,
              'data-focus': `show-${d.id}`,
              onclick: () =>
                act(async () => {
                  state.selected = d;
                  await loadSelected();
                }),
            },
            'Show attempts',
          ),
          manage && (d.status === 'delivered' || d.status === 'failed')
            ? [
                ' ',
                h(
                  'button',
                  {
                    type: 'button',
                    'aria-label': `Redeliver ${d.id}`,
                    'data-focus': `redeliver-${d.id}`,
                    onclick: () =>
                      act(
                        async () => {
                          await api('POST', `${projectPath()}/deliveries/${encodeURIComponent(d.id)}/redeliver`);
                          await loadPage();
                        },
                        () => `Delivery ${d.id} is being redelivered with the same X-Webhook-Id.`,
                      ),
                  },
                  'Redeliver',
                ),
              ]
            : null,
        ),
      ),
    );
    const table = liveTable(
      ['X-Webhook-Id', 'Type', 'Status', 'Attempts', 'Last status code', 'Last attempt', 'Actions'],
      rows,
      'No deliveries match.',
    );
    const pager = h(
      'div',
      { class: 'row' },
      state.cursors.length > 0
        ? h(
            'button',
            {
              type: 'button',
              class: 'secondary',
              'data-focus': 'newer',
              onclick: () =>
                act(async () => {
                  state.cursors.pop();
                  await loadPage();
                }),
            },
            'Show newer deliveries',
          )
        : null,
      state.page.nextCursor
        ? h(
            'button',
            {
              type: 'button',
              class: 'secondary',
              'data-focus': 'older',
              onclick: () =>
                act(async () => {
                  state.cursors.push(state.page.nextCursor);
                  await loadPage();
                }),
            },
            'Show older deliveries',
          )
        : null,
      h('span', { class: 'muted' }, `Page ${state.cursors.length + 1}`),
    );
    return h(
      'section',
      { 'aria-labelledby': 'deliveries-title' },
      h('h2', { id: 'deliveries-title' }, 'Deliveries'),
      filtersView(),
      table,
      pager,
      manage ? recoverView() : null,
    );
  }

  function recoverView() {
    const since = h('input', {
      type: 'datetime-local',
      name: 'recover-since',
      required: true,
      'data-focus': 'recover-since',
    });
    return h(
      'form',
      {
        'aria-label': 'Recover failed deliveries',
        onsubmit: (event) => {
          event.preventDefault();
          void act(
            async () => {
              const result = await api('POST', `${projectPath()}/deliveries/recover`, {
                since: new Date(since.value).toISOString(),
              });
              await loadPage();
              return result;
            },
            (result) => `${result.count} failed deliveries are being redelivered.`,
          );
        },
      },
      h('label', {}, 'Failed since', since),
      h('button', { type: 'submit', 'data-focus': 'recover' }, 'Recover failed deliveries'),
    );
  }

  function attemptsView() {
    const d = state.selected;
    if (!d || !d.attemptLog) return null;
    return h(
      'section',
      { 'aria-labelledby': 'attempts-title', id: 'attempts' },
      h('h2', { id: 'attempts-title' }, 'Attempts of ', h('code', {}, d.id)),
      h(
        'p',
        {},
        `${d.type}, ${d.status}, ${d.attempts} attempts.`,
        d.nextAttemptsCursor ? ` Showing the first ${d.attemptLog.length}.` : '',
      ),
      d.attemptLog.length
        ? h(
            'table',
            {},
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                ['Attempt', 'Time', 'Status code', 'Duration', 'Error'].map((c) => h('th', { scope: 'col' }, c)),
              ),
            ),
            h(
              'tbody',
              {},
              d.attemptLog.map((a) =>
                h(
                  'tr',
                  {},
                  h('td', {}, String(a.attempt)),
                  h('td', {}, time(a.at)),
                  h('td', {}, a.statusCode === undefined ? '—' : String(a.statusCode)),
                  h('td', {}, `${Math.round(a.durationMs)} ms`),
                  h('td', {}, a.errorCode || '—'),
                ),
              ),
            ),
          )
        : h('p', {}, 'No attempt yet.'),
      d.nextAttemptsCursor
        ? [
            h(
              'button',
              {
                type: 'button',
                class: 'secondary',
                'data-focus': 'more-attempts',
                onclick: () => act(loadMoreAttempts),
              },
              'Show more attempts',
            ),
            ' ',
          ]
        : '',
      h(
        'button',
        {
          type: 'button',
          class: 'secondary',
          'data-focus': 'close-attempts',
          onclick: () => {
            state.selected = null;
            render();
          },
        },
        'Close attempts',
      ),
    );
  }

  // ---- activity ---------------------------------------------------------------------------------------------------

  /** Each action of the trail in words; an action this page does not know shows as its code alone. */
  const ACTIONS = {
    'webhook.register': 'Registered the endpoint',
    'webhook.update': 'Changed the endpoint',
    'webhook.delete': 'Deleted the endpoint',
    'webhook.secret.rotate': 'Rotated the signing secret',
    'webhook.secret.overlap-ended': 'The old signing secret stopped signing',
    'webhook.signing-key.rotate': 'Rotated the signing key pair',
    'webhook.signing-key.overlap-ended': 'The old signing key pair stopped signing',
    'webhook.test': 'Sent a test event',
    'webhook.pause': 'Paused deliveries',
    'webhook.resume': 'Resumed deliveries',
    'webhook.pause.expire': 'The pause ended by itself',
    'webhook.gone': 'Held deliveries: the receiver answered 410 Gone',
    'notifications.update': 'Changed the notification contacts',
    'delivery.redeliver': 'Redelivered a delivery',
    'deliveries.recover': 'Recovered failed deliveries',
    'portal-link.create': 'Made a portal link',
    'portal-link.revoke': 'Revoked the portal links',
    'access.refused': 'Was refused access',
    'codec.decode': 'An operator read this project’s sealed events (decoded)',
    'breaker.open': 'Circuit breaker opened',
    'breaker.half-open': 'Circuit breaker half-open: one delivery probes',
    'breaker.close': 'Circuit breaker closed',
    'project.add': 'Created the project',
    'member.add': 'Added a member',
    'member.remove': 'Removed a member',
  };

  /** Who acted: a member, a portal link (for the member who made it), an operator, or the service. */
  function actorText(actor, action) {
    const who = actor.subject || 'unknown';
    if (action === 'codec.decode') return `${who}, operator`;
    if (actor.kind === 'portal-link') {
      const id = actor.portalLinkId ? ` ${actor.portalLinkId.slice(0, 8)}` : '';
      return `${who}, through portal link${id} (${(actor.portalCapabilities || []).join(', ')})`;
    }
    if (actor.kind === 'cli') return `${who}, operator (command line)`;
    if (actor.kind === 'system') return 'the service';
    return who;
  }

  /** A value of `changes` in words: lists joined, none for an empty one. */
  function changeValue(value) {
    if (Array.isArray(value)) return value.length ? value.join(', ') : 'none';
    if (value === null || value === undefined) return 'none';
    // A URL as the trail keeps it: its origin, and the start of its fingerprint (a change of path shows as another).
    if (typeof value === 'object' && typeof value.origin === 'string' && typeof value.fingerprint === 'string')
      return `${value.origin} (${value.fingerprint.slice(0, 15)}…)`;
    return typeof value === 'object' ? JSON.stringify(value) : String(value);
  }

  /** What changed, one line per field: before → after where the trail has both. */
  function changesView(event) {
    const lines = Object.entries(event.changes || {}).map(([field, value]) => {
      const pair =
        value && typeof value === 'object' && !Array.isArray(value) && ('before' in value || 'after' in value);
      const text = pair
        ? ['before' in value ? changeValue(value.before) : null, 'after' in value ? changeValue(value.after) : null]
            .filter((part) => part !== null)
            .join(' → ')
        : changeValue(value);
      return h('li', {}, `${field}: `, pair && !('before' in value) ? 'set to ' : '', text);
    });
    if (event.deliveryId) lines.unshift(h('li', {}, 'delivery: ', h('code', {}, event.deliveryId)));
    return lines.length ? h('ul', { class: 'changes' }, lines) : '—';
  }

  function activityView() {
    const { page, cursors } = state.activity;
    const rows = page.items.map((event) =>
      h(
        'tr',
        { 'data-audit': event.id },
        h('td', {}, time(event.at)),
        h('td', {}, actorText(event.actor, event.action)),
        h('td', {}, ACTIONS[event.action] || '', ACTIONS[event.action] ? h('br') : null, h('code', {}, event.action)),
        h('td', { class: `outcome-${event.outcome}` }, event.outcome),
        h('td', {}, changesView(event)),
      ),
    );
    const table = liveTable(['Time', 'Who', 'Action', 'Outcome', 'What changed'], rows, 'No activity yet.');
    const turn = (older) =>
      act(async () => {
        if (older) state.activity.cursors.push(page.nextCursor);
        else state.activity.cursors.pop();
        await loadActivity();
      });
    return h(
      'section',
      { 'aria-labelledby': 'activity-title' },
      h('h2', { id: 'activity-title', tabindex: '-1' }, 'Activity'),
      h(
        'p',
        {},
        'Who did what to this project’s webhook: its members, their portal links, the operators’ command line, and ',
        'the service itself (the circuit breaker, the end of a secret’s overlap). Kept for years; never a secret or ',
        'an event’s content.',
      ),
      table,
      h(
        'div',
        { class: 'row' },
        cursors.length > 0
          ? h(
              'button',
              { type: 'button', class: 'secondary', 'data-focus': 'newer-activity', onclick: () => turn(false) },
              'Show newer activity',
            )
          : null,
        page.nextCursor
          ? h(
              'button',
              { type: 'button', class: 'secondary', 'data-focus': 'older-activity', onclick: () => turn(true) },
              'Show older activity',
            )
          : null,
        h('span', { class: 'muted' }, `Page ${cursors.length + 1}`),
      ),
    );
  }

  /** Manage links switch between the deliveries and the activity; the heading of the view shown takes the focus. */
  function viewSwitch() {
    if (!canManage()) return null;
    const toActivity = state.view === 'deliveries';
    return h(
      'nav',
      { 'aria-label': 'Views' },
      h(
        'button',
        {
          type: 'button',
          class: 'secondary',
          onclick: () =>
            act(async () => {
              if (toActivity) {
                state.activity.cursors = [];
                await loadActivity();
              }
              state.view = toActivity ? 'activity' : 'deliveries';
              switched = true;
            }),
        },
        toActivity ? 'Show activity' : 'Back to endpoint and deliveries',
      ),
    );
  }

  let switched = false;
  // A field the reader has changed and not yet saved is marked, and keeps what it holds when the page is redrawn (the
  // live refresh redraws it every few seconds, an answer once more). The mark ends when its form's action succeeds: a
  // refused save leaves what the reader typed in place, next to the error, to correct.
  let submittedFields = [];
  app.addEventListener('input', (event) => {
    if (event.target.hasAttribute('data-focus')) event.target.setAttribute('data-edited', '');
  });
  app.addEventListener(
    'submit',
    (event) => {
      submittedFields = [...event.target.querySelectorAll('[data-edited]')].map((f) => f.getAttribute('data-focus'));
    },
    true,
  );

  function render() {
    if (stopped) return;
    const focused = document.activeElement && document.activeElement.getAttribute('data-focus');
    const edited = [...app.querySelectorAll('[data-edited]')].map((field) => ({
      key: field.getAttribute('data-focus'),
      value: field.type === 'checkbox' ? field.checked : field.value,
    }));
    const claims = state.claims;
    app.replaceChildren(
      h('h1', {}, 'Webhook portal'),
      h(
        'p',
        { class: 'muted' },
        `Project ${claims.prj} · ${canManage() ? 'manage' : 'read-only'} link · expires ${when(new Date(claims.exp * 1000).toISOString())}`,
      ),
      h(
        'div',
        { role: 'status' },
        state.notice ? h('p', { class: state.notice.error ? 'notice error' : 'notice' }, state.notice.text) : null,
      ),
      viewSwitch() || '',
      ...(state.view === 'activity'
        ? [activityView()]
        : // replaceChildren writes null as the text "null": no attempts view is no child.
          [endpointView(), attemptsView() || '', deliveriesView()]),
    );
    for (const { key, value } of edited) {
      const field = app.querySelector(`[data-focus="${CSS.escape(key)}"]`);
      if (!field) continue;
      if (field.type === 'checkbox') field.checked = value;
      else field.value = value;
      field.setAttribute('data-edited', '');
    }
    if (switched) {
      switched = false;
      const heading = app.querySelector(state.view === 'activity' ? '#activity-title' : '#endpoint-title');
      heading.setAttribute('tabindex', '-1');
      heading.focus();
    } else if (focused) {
      const again = app.querySelector(`[data-focus="${CSS.escape(focused)}"]`);
      if (again) again.focus();
    }
  }

  /** New deliveries appear without a reload: the first page and the health refresh while nobody is typing (a pasted certificate or key included). */
  async function refresh() {
    if (stopped) return;
    const busy = document.activeElement && ['INPUT', 'SELECT', 'TEXTAREA'].includes(document.activeElement.tagName);
    if (state.cursors.length === 0 && !busy) {
      try {
        const activity = state.view === 'activity' && state.activity.cursors.length === 0;
        const shown = () => JSON.stringify([state.page, state.health, state.selected, state.activity.page]);
        const before = shown();
        await Promise.all([loadPage(), loadEndpoint(), loadSelected(), activity ? loadActivity() : null]);
        if (shown() !== before) render();
      } catch {
        // The next round tries again; a 401 has shown the invalid-link page already.
      }
    }
    setTimeout(() => void refresh(), REFRESH_MS);
  }

  async function start() {
    state.token = readToken();
    state.claims = state.token ? readClaims(state.token) : null;
    if (!state.claims || state.claims.exp * 1000 <= Date.now()) return showInvalidLink();
    try {
      await Promise.all([loadEndpoint(), loadPage(), loadEventTypes()]);
      if (canManage() && state.registration) state.contacts = await api('GET', `${projectPath()}/notifications`);
    } catch (error) {
      if (error.status === 401) return;
      app.replaceChildren(
        h('h1', {}, 'Webhook portal'),
        h('p', { class: 'notice error', role: 'alert' }, error.message),
      );
      return;
    }
    render();
    setTimeout(() => void refresh(), REFRESH_MS);
  }

  void start();
})();
