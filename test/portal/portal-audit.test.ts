// The audit rows of portal links, made and revoked through the domain functions on the real PostgreSQL: each names
// its action and what changed (the link's id, never its token), in the same transaction as the link.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { portalLinkId } from '../../api/http/audited-actions';
import { createPortalSession, revokePortalSessions } from '../../api/portal/links';
import { createPortalTokens, portalSigningKeys } from '../../api/auth/portal-tokens';
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
});
