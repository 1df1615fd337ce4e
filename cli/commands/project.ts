import { addProject, appendAuditEvent } from '../../db';
import { cliActor, type CliCommand, parseCommandArgs, withDb } from '../command';

export const projectAdd: CliCommand = {
  usage: 'project add <projectId> [--name <name>]',
  summary: 'create a project (does nothing when it exists)',
  async run(args, io) {
    const { values, positionals } = parseCommandArgs(args, { name: { type: 'string' } }, ['projectId']);
    const [projectId] = positionals as [string];
    const added = await withDb(
      io,
      (db) =>
        db.transaction(async (trx) => {
          const made = await addProject(trx, projectId, values.name);
          if (made)
            await appendAuditEvent(trx, { actor: cliActor(io), action: 'project.add', outcome: 'ok', projectId });
          return made;
        }),
      // The owner's command (projects are not the API's to make): it opens no secret, so production asks for no keys.
      { audit: true, withoutKeys: true },
    );
    io.out(added ? `Project ${projectId} added` : `Project ${projectId} already exists`);
  },
};
