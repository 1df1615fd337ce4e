import type { Knex } from 'knex';

/** The processes that connect with a role of their own; migrations and `webhooks audit prune` run as the owner. */
export type ProcessRole = 'api' | 'worker';

export type TablePrivilege = 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE';

/**
 * What each process may do to each table, read off the db/ query functions the API (api/) and the workers
 * (activities/, worker/) call. A new table is one line here; a table without one is the owner's alone. Locking reads
 * (FOR UPDATE/SHARE) and INSERT … ON CONFLICT DO UPDATE need UPDATE; UPDATE, DELETE and RETURNING need SELECT.
 * Foreign keys' cascades run as the owner, so deleting a registration needs no grant on the tables that cascade.
 */
export const TABLE_GRANTS: Readonly<Record<string, Readonly<Record<ProcessRole, readonly TablePrivilege[]>>>> = {
  // Read at every start to check the schema is current (db/connection.ts); only `webhooks migrate` writes it.
  knex_migrations: { api: ['SELECT'], worker: ['SELECT'] },
  knex_migrations_lock: { api: [], worker: [] },
  // Projects and members are the CLI's (the owner's); the API revokes portal links by bumping a generation. A purge (a
  // worker's activity) deletes a project's rows of these tables and of those below it names, the project's last.
  projects: { api: ['SELECT', 'UPDATE'], worker: ['SELECT', 'DELETE'] },
  project_members: { api: ['SELECT'], worker: ['SELECT', 'DELETE'] },
  webhook_registrations: { api: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'], worker: ['SELECT', 'UPDATE', 'DELETE'] },
  deliveries: { api: ['SELECT', 'UPDATE'], worker: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'] },
  // DELETE: an erasure or a purge deletes a row's attempts with it (no foreign key cascades them: db/migrations/029).
  delivery_attempts: { api: ['SELECT'], worker: ['SELECT', 'INSERT', 'DELETE'] },
  // DELETE: a purge removes the project's health row (no foreign key cascades it).
  endpoint_health: { api: ['SELECT'], worker: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'] },
  webhook_circuit_breakers: { api: ['SELECT'], worker: ['SELECT', 'INSERT', 'UPDATE'] },
  // A new registration takes over the waiters its project's deleted one left (db/endpoints/waiter-handover.ts).
  webhook_breaker_waiters: { api: ['SELECT', 'INSERT', 'UPDATE'], worker: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'] },
  // The next free slot of each registration with a rate limit, taken by the workers' attempts (and read by their
  // resumers); a registration's deletion cascades to it.
  webhook_rate_limits: { api: [], worker: ['SELECT', 'INSERT', 'UPDATE'] },
  webhook_unregistered_waiters: { api: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'], worker: ['SELECT', 'DELETE'] },
  // A purge deletes the project's send limits (the API's alone otherwise).
  webhook_send_limits: { api: ['SELECT', 'INSERT', 'UPDATE'], worker: ['SELECT', 'DELETE'] },
  // DELETE for the worker: a purge removes the project's contacts and the notices told, counting them.
  project_notification_contacts: { api: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'], worker: ['SELECT', 'DELETE'] },
  project_notices: { api: [], worker: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'] },
  // Pause notices are queued by the action that pauses or resumes (API, or a worker's expiry) and sent by a worker.
  project_notice_outbox: { api: ['INSERT'], worker: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'] },
  // Live portal links, counted per project when one is made (their ids, never their tokens); a purge deletes them.
  portal_links: { api: ['SELECT', 'INSERT', 'DELETE'], worker: ['SELECT', 'DELETE'] },
  // Append-only: the chain is extended and read, never changed; pruning is the owner's (`webhooks audit prune`).
  audit_events: { api: ['SELECT', 'INSERT'], worker: ['SELECT', 'INSERT'] },
  // Each chain's head row orders its appends (INSERT … ON CONFLICT DO UPDATE); the trail's id is read, never written.
  audit_chain_heads: { api: ['SELECT', 'INSERT', 'UPDATE'], worker: ['SELECT', 'INSERT', 'UPDATE'] },
  audit_trail: { api: ['SELECT'], worker: ['SELECT'] },
  // The workers write the scheduled digests; each is recorded so that verify can name one missing from the folder.
  audit_digests: { api: [], worker: ['SELECT', 'INSERT'] },
  // An erasure is recorded by the API (with its audit row) and carried out by a worker's activities, which delete the
  // person's rows of `deliveries` and their attempts and record what they found; nobody removes the record.
  erasures: { api: ['SELECT', 'INSERT'], worker: ['SELECT', 'UPDATE'] },
  erasure_executions: { api: ['SELECT'], worker: ['SELECT', 'INSERT', 'UPDATE'] },
  // Each project's wrapped data key: made by whichever process first seals a payload of the project, read by every
  // codec; a purge (a worker's activity) destroys them; `webhooks data-keys rewrap` (the owner) rewraps them under
  // the newest ring key after a rotation.
  project_data_keys: { api: ['SELECT', 'INSERT'], worker: ['SELECT', 'INSERT', 'UPDATE'] },
  // A purge is recorded by the API or the CLI (with its audit row; a failed one is made pending again to be run again)
  // and carried out by a worker's activities, which record what each step removed; nobody removes the record.
  purges: { api: ['SELECT', 'INSERT', 'UPDATE'], worker: ['SELECT', 'UPDATE'] },
  // The executions a purge found before its batch jobs deleted them, each counted once (the worker's alone).
  purge_executions: { api: [], worker: ['SELECT', 'INSERT'] },
};

/**
 * The functions each process may EXECUTE (by signature); the migration that makes one revokes it from PUBLIC. The
 * delivery log's partitions are made and dropped by the owner's SECURITY DEFINER function, hourly by the workers,
 * who may not create or drop a table themselves.
 */
export const FUNCTION_GRANTS: Readonly<Record<string, Readonly<Record<ProcessRole, boolean>>>> = {
  'delivery_log_maintain(integer, integer)': { api: false, worker: true },
};

/** The role names of the configuration (DATABASE_API_ROLE, DATABASE_WORKER_ROLE); an unset one gets no grants. */
export type ProcessRoleNames = Partial<Record<ProcessRole, string>>;

const VARIABLE: Record<ProcessRole, string> = { api: 'DATABASE_API_ROLE', worker: 'DATABASE_WORKER_ROLE' };

/** A grant that cannot be applied as configured: the message names the variable and what to do. */
export class RoleGrantError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RoleGrantError';
  }
}

/** Tables of the current schema that TABLE_GRANTS does not list (none once every table has its line). */
export async function tablesWithoutGrants(db: Knex | Knex.Transaction): Promise<string[]> {
  const tables = await schemaTables(db);
  return tables.filter((table) => !(table in TABLE_GRANTS));
}

/** The schema's tables; a partition is reached (and its privileges checked) through its parent, so it is left out. */
async function schemaTables(db: Knex | Knex.Transaction): Promise<string[]> {
  const { rows } = await db.raw<{ rows: { name: string }[] }>(
    `SELECT c.relname AS name FROM pg_class c
      WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
        AND c.relkind IN ('r', 'p') AND NOT c.relispartition
      ORDER BY c.relname`,
  );
  return rows.map((row) => row.name);
}

/** Refuses a role that is missing, or whose grants would mean nothing: the owner itself, a superuser, an owner of tables. */
async function checkRole(db: Knex | Knex.Transaction, process: ProcessRole, role: string): Promise<void> {
  const variable = VARIABLE[process];
  const { rows } = await db.raw<{ rows: { superuser: boolean; is_me: boolean; owned: number }[] }>(
    `SELECT r.rolsuper AS superuser, r.rolname = current_user AS is_me,
            (SELECT count(*)::int FROM pg_tables t WHERE t.schemaname = current_schema() AND t.tableowner = r.rolname)
              AS owned
       FROM pg_roles r WHERE r.rolname = ?`,
    [role],
  );
  const [found] = rows;
  if (!found)
    throw new RoleGrantError(
      `${variable}: role ${role} does not exist; create it first (deploy/postgres/init-roles.sh, docs/operators.md)`,
    );
  if (found.is_me)
    throw new RoleGrantError(
      `${variable}: role ${role} is the owner running the migrations; give the ${process} a role of its own`,
    );
  if (found.superuser)
    throw new RoleGrantError(`${variable}: role ${role} is a superuser; give the ${process} an ordinary role`);
  if (found.owned > 0)
    throw new RoleGrantError(
      `${variable}: role ${role} owns ${found.owned} table(s) of this schema and could change them at will; ` +
        'reassign them to the owner (REASSIGN OWNED BY … TO …) first',
    );
}

const configuredRoles = (roles: ProcessRoleNames) =>
  (Object.entries(roles) as [ProcessRole, string | undefined][]).filter((entry): entry is [ProcessRole, string] =>
    Boolean(entry[1]),
  );

/** Refuses roles that cannot be granted as configured; `webhooks migrate` asks before it migrates anything. */
export async function checkProcessRoles(db: Knex | Knex.Transaction, roles: ProcessRoleNames): Promise<void> {
  if (roles.api && roles.api === roles.worker)
    throw new RoleGrantError('DATABASE_API_ROLE and DATABASE_WORKER_ROLE must name two different roles');
  for (const [process, role] of configuredRoles(roles)) await checkRole(db, process, role);
}

/**
 * Sets each configured role's privileges to exactly what TABLE_GRANTS lists, on every table of the schema (what was
 * granted before and is no longer listed is revoked), and USAGE on the sequences of the tables it inserts into. One
 * transaction, re-applied by every `webhooks migrate`, so new tables are covered and a failure changes nothing.
 */
export async function applyRoleGrants(db: Knex, roles: ProcessRoleNames): Promise<void> {
  const configured = configuredRoles(roles);
  if (configured.length === 0) return;
  await db.transaction(async (trx) => {
    await checkProcessRoles(trx, roles);
    const tables = await schemaTables(trx);
    const listedMissing = Object.keys(TABLE_GRANTS).filter((table) => !tables.includes(table));
    if (listedMissing.length > 0)
      throw new RoleGrantError(`tables listed in db/roles.ts are missing from the schema: ${listedMissing.join(', ')}`);
    const { rows: sequences } = await trx.raw<{ rows: { table: string; sequence: string }[] }>(
      `SELECT t.relname AS "table", s.relname AS sequence
         FROM pg_depend d
         JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
         JOIN pg_class t ON t.oid = d.refobjid
        WHERE t.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND d.deptype IN ('a', 'i')`,
    );
    for (const [process, role] of configured) {
      await trx.raw('GRANT USAGE ON SCHEMA ?? TO ??', [await currentSchema(trx), role]);
      for (const table of tables) {
        await trx.raw('REVOKE ALL ON TABLE ?? FROM ??', [table, role]);
        const privileges = TABLE_GRANTS[table]?.[process] ?? [];
        if (privileges.length > 0) await trx.raw(`GRANT ${privileges.join(', ')} ON TABLE ?? TO ??`, [table, role]);
      }
      for (const [signature, grants] of Object.entries(FUNCTION_GRANTS)) {
        await trx.raw(`REVOKE ALL ON FUNCTION ${signature} FROM ??`, [role]);
        if (grants[process]) await trx.raw(`GRANT EXECUTE ON FUNCTION ${signature} TO ??`, [role]);
      }
      for (const { table, sequence } of sequences) {
        await trx.raw('REVOKE ALL ON SEQUENCE ?? FROM ??', [sequence, role]);
        if (TABLE_GRANTS[table]?.[process].includes('INSERT'))
          await trx.raw('GRANT USAGE ON SEQUENCE ?? TO ??', [sequence, role]);
      }
    }
  });
}

async function currentSchema(db: Knex.Transaction): Promise<string> {
  const { rows } = await db.raw<{ rows: { schema: string }[] }>('SELECT current_schema() AS schema');
  return rows[0]!.schema;
}
