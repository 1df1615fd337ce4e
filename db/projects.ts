import type { Db } from './connection';

export async function projectExists(db: Db, projectId: string): Promise<boolean> {
  return (await db('projects').where({ id: projectId }).first('id')) !== undefined;
}

/** Adds a project; returns false when it already existed (idempotent). */
export async function addProject(db: Db, projectId: string, name?: string): Promise<boolean> {
  const rows = await db('projects')
    .insert({ id: projectId, name: name ?? null })
    .onConflict('id')
    .ignore()
    .returning('id');
  return rows.length > 0;
}

/** Adds a member; returns false when the user already was one. */
export async function addMember(db: Db, projectId: string, userId: string): Promise<boolean> {
  const rows = await db('project_members')
    .insert({ project_id: projectId, user_id: userId })
    .onConflict(['project_id', 'user_id'])
    .ignore()
    .returning('user_id');
  return rows.length > 0;
}

/** Removes a member; returns false when the user was not one. */
export async function removeMember(db: Db, projectId: string, userId: string): Promise<boolean> {
  return (await db('project_members').where({ project_id: projectId, user_id: userId }).delete()) > 0;
}

/** Whether the project exists and the user is one of its members, in one round trip. */
export async function projectAccess(
  db: Db,
  projectId: string,
  userId: string,
): Promise<{ projectExists: boolean; isMember: boolean }> {
  const row = await db('projects as p')
    .leftJoin('project_members as m', (join) => {
      join.on('m.project_id', '=', 'p.id').andOn('m.user_id', '=', db.raw('?', [userId]));
    })
    .where('p.id', projectId)
    .first<{ member: string | null } | undefined>('m.user_id as member');
  return { projectExists: row !== undefined, isMember: row?.member != null };
}
