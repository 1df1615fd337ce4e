import { applyRoleGrants, checkProcessRoles, migrateToLatest, RoleGrantError, tablesWithoutGrants } from '../../db';
import { CliError, type CliCommand, parseCommandArgs, withDb } from '../command';

export const migrate: CliCommand = {
  usage: 'migrate',
  summary:
    'apply pending database migrations as the owner, then grant DATABASE_API_ROLE and DATABASE_WORKER_ROLE their privileges',
  async run(args, io) {
    parseCommandArgs(args, {}, []);
    await withDb(
      io,
      async (db, config) => {
        const roles = { api: config.DATABASE_API_ROLE, worker: config.DATABASE_WORKER_ROLE };
        try {
          // A role that cannot be granted is named before anything is migrated.
          await checkProcessRoles(db, roles);
          const applied = await migrateToLatest(db);
          io.out(applied.length > 0 ? `Applied migrations: ${applied.join(', ')}` : 'Database is already up to date');
          await applyRoleGrants(db, roles);
        } catch (error) {
          if (error instanceof RoleGrantError) throw new CliError(error.message);
          throw error;
        }
        for (const [process, role] of Object.entries(roles))
          if (role) io.out(`Granted the ${process}'s role ${role} its privileges (db/roles.ts)`);
        const unlisted = await tablesWithoutGrants(db);
        if (unlisted.length > 0 && (roles.api || roles.worker))
          io.err(`warning: no grants listed in db/roles.ts for ${unlisted.join(', ')}: the owner's alone`);
      },
      // The owner's step opens no secret or payload: it is given no keys.
      { withoutKeys: true },
    );
  },
};
