import type { Db } from './connection';

/** The project's current portal link generation; undefined when there is no such project. */
export async function portalLinkGeneration(db: Db, projectId: string): Promise<number | undefined> {
  const row = await db('projects')
    .where({ id: projectId })
    .first<{ generation: number } | undefined>('portal_link_generation as generation');
  return row?.generation;
}

/**
 * What a portal link is checked against: the project's link generation, and when its creator became a member (the
 * row's created_at, to the microsecond, UTC) or null when they are not one. Undefined when there is no such project.
 */
export async function portalLinkState(
  db: Db,
  projectId: string,
  userId: string,
): Promise<{ generation: number; memberSince: string | null } | undefined> {
  const row = await db('projects as p')
    .leftJoin('project_members as m', (join) => {
      join.on('m.project_id', '=', 'p.id').andOn('m.user_id', '=', db.raw('?', [userId]));
    })
    .where('p.id', projectId)
    .first<{ generation: number; member_since: string | null } | undefined>(
      'p.portal_link_generation as generation',
      db.raw(`to_char(m.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS member_since`),
    );
  return row && { generation: row.generation, memberSince: row.member_since };
}

/** Revokes every portal link of the project made so far; false when there is no such project. */
export async function revokePortalLinks(db: Db, projectId: string): Promise<boolean> {
  const updated = await db('projects').where({ id: projectId }).increment('portal_link_generation', 1);
  return updated > 0;
}

/**
 * Lists a link just made, unless the project already holds `limit` live ones (unexpired, of the current generation):
 * then false, and nothing is written. The project's row is locked to the transaction's end, so links made at once
 * are counted one after another; links expired or revoked are removed on the way.
 */
export async function addPortalLink(
  db: Db,
  link: { id: string; projectId: string; generation: number; expiresAt: Date },
  limit: number,
): Promise<boolean> {
  await db('projects').where({ id: link.projectId }).forUpdate().first('id');
  await db('portal_links')
    .where({ project_id: link.projectId })
    .andWhere((stale) => {
      void stale.where('generation', '<>', link.generation).orWhere('expires_at', '<=', db.fn.now());
    })
    .delete();
  const live = await db('portal_links').where({ project_id: link.projectId }).count<{ count: string }[]>('* as count');
  if (Number(live[0]?.count ?? 0) >= limit) return false;
  await db('portal_links').insert({
    id: link.id,
    project_id: link.projectId,
    generation: link.generation,
    expires_at: link.expiresAt,
  });
  return true;
}
