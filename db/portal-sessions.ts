import type { Db } from './connection';

/** The project's current portal link generation; undefined when there is no such project. */
export async function portalLinkGeneration(db: Db, projectId: string): Promise<number | undefined> {
  const row = await db('projects')
    .where({ id: projectId })
    .first<{ generation: number } | undefined>('portal_link_generation as generation');
  return row?.generation;
}

/** Revokes every portal link of the project made so far; false when there is no such project. */
export async function revokePortalLinks(db: Db, projectId: string): Promise<boolean> {
  const updated = await db('projects').where({ id: projectId }).increment('portal_link_generation', 1);
  return updated > 0;
}
