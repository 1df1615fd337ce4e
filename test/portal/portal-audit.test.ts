// The audit rows of portal links, made and revoked through the domain functions on the real PostgreSQL: each names
// its action and what changed (the link's id, never its token), in the same transaction as the link.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { portalLinkId } from '../../api/http/audited-actions';
import { createPortalSession, PortalLinkLimitError, revokePortalSessions } from '../../api/portal/links';
import { createPortalTokens, portalSigningKeys } from '../../api/auth/portal-tokens';
import { createSecretBox } from '../../common/crypto/secrets';
import * as store from '../../db';
import { createTestDatabase, type TestDatabase } from '../support/postgres';

describe('portal links in the audit trail', () => {
  let t: TestDatabase;
  const portalTokens = createPortalTokens(portalSigningKeys([{ id: 'k1', key: randomBytes(32) }]));
  const actor: store.AuditActor = { kind: 'member', subject: 'alice', requestId: 'req-1' };

  before(async () => (t = await createTestDatabase()));
  after(() => t?.destroy());

  it('a link made and the links revoked each leave one row: the action, the link id, capabilities, generation', async () => {
    const projectId = `p-${randomUUID()}`;
    await store.addProject(t.db, projectId);
    await store.addMember(t.db, projectId, 'alice');
    const deps = { db: t.db, portalTokens };
    const made = await createPortalSession(
      deps,
      'alice',
      projectId,
      { capabilities: ['read'], expiresInSeconds: 600 },
      'http://127.0.0.1:3000',
      actor,
    );
    await revokePortalSessions(deps, 'alice', projectId, actor);
    const rows = (await store.listAuditEvents(t.db, { projectId, limit: 10 })).reverse();
    assert.deepEqual(
      rows.map((row) => [row.action, row.actor.subject, row.changes]),
      [
        [
          'portal-link.create',
          'alice',
          { portalLinkId: portalLinkId(made.token), capabilities: ['read'], generation: 0, expiresAt: made.expiresAt },
        ],
        ['portal-link.revoke', 'alice', { generation: 1 }],
      ],
    );
    assert.ok(!JSON.stringify(rows).includes(made.token), 'the token is never written');
  });

  it('a link past PORTAL_LINKS_PER_PROJECT is refused with 409 naming the limit, and writes nothing', async () => {
    const projectId = `p-${randomUUID()}`;
    await store.addProject(t.db, projectId);
    await store.addMember(t.db, projectId, 'alice');
    const deps = { db: t.db, portalTokens, linksPerProject: 1 };
    await createPortalSession(deps, 'alice', projectId, {}, 'http://127.0.0.1:3000', actor);
    await assert.rejects(
      createPortalSession(deps, 'alice', projectId, {}, 'http://127.0.0.1:3000', actor),
      (error: unknown) =>
        error instanceof PortalLinkLimitError &&
        error.status === 409 &&
        error.message.startsWith('This project already has 1 live portal links, the most PORTAL_LINKS_PER_PROJECT') &&
        error.message.endsWith('or revoke them all (DELETE …/portal-sessions), before making another'),
    );
    assert.equal((await store.listAuditEvents(t.db, { projectId, limit: 10 })).length, 1, 'only the first link’s row');
  });

  it('revoking the links ends a pause a link started, and its row says which pause and by whom', async () => {
    const projectId = `p-${randomUUID()}`;
    await store.addProject(t.db, projectId);
    await store.addMember(t.db, projectId, 'alice');
    await store.createRegistration(t.db, createSecretBox(randomBytes(32)), {
      projectId,
      url: 'https://receiver.example/hook',
      types: ['FALL_DETECTION'],
    });
    const pausedAt = new Date(Date.now() - 60_000);
    const pausedUntil = new Date(Date.now() + 3_600_000);
    await t
      .db('webhook_registrations')
      .where({ project_id: projectId })
      .update({
        paused_at: pausedAt,
        paused_until: pausedUntil,
        paused_by: JSON.stringify({ kind: 'portal-link', subject: 'alice' }),
      });
    await revokePortalSessions({ db: t.db, portalTokens }, 'alice', projectId, actor);
    const [row] = await store.listAuditEvents(t.db, { projectId, limit: 1 });
    assert.deepEqual(row!.changes, {
      generation: 1,
      endedPause: { pausedAt: pausedAt.toISOString(), pausedUntil: pausedUntil.toISOString(), heldDeliveries: 0 },
    });
    const notice = await t.db('project_notice_outbox').where({ project_id: projectId }).first();
    assert.match(JSON.stringify(notice), /the revocation of the portal links by member alice/);
  });
});
