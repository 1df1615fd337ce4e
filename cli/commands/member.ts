import { addMember, appendAuditEvent, projectExists, removeMember } from '../../db';
import { CliError, cliActor, type CliCommand, parseCommandArgs, withDb } from '../command';

export const memberAdd: CliCommand = {
  usage: 'member add <projectId> <userId>',
  summary: 'let a user (token sub) manage the project’s webhook',
  async run(args, io) {
    const [projectId, userId] = parseCommandArgs(args, {}, ['projectId', 'userId']).positionals as [string, string];
    const added = await withDb(
      io,
      (db) =>
        db.transaction(async (trx) => {
          if (!(await projectExists(trx, projectId))) throw new CliError(`No project with id ${projectId} was found`);
          const changed = await addMember(trx, projectId, userId);
          if (changed)
            await appendAuditEvent(trx, {
              actor: cliActor(io),
              action: 'member.add',
              outcome: 'ok',
              projectId,
              changes: { userId },
            });
          return changed;
        }),
      // The owner's command (members are not the API's to make): it opens no secret, so production asks for no keys.
      { audit: true, withoutKeys: true },
    );
    io.out(
      added ? `User ${userId} added to project ${projectId}` : `User ${userId} already is a member of ${projectId}`,
    );
  },
};

export const memberRemove: CliCommand = {
  usage: 'member remove <projectId> <userId>',
  summary: 'revoke a user’s access to the project',
  async run(args, io) {
    const [projectId, userId] = parseCommandArgs(args, {}, ['projectId', 'userId']).positionals as [string, string];
    const removed = await withDb(
      io,
      (db) =>
        db.transaction(async (trx) => {
          if (!(await projectExists(trx, projectId))) throw new CliError(`No project with id ${projectId} was found`);
          const changed = await removeMember(trx, projectId, userId);
          if (changed)
            await appendAuditEvent(trx, {
              actor: cliActor(io),
              action: 'member.remove',
              outcome: 'ok',
              projectId,
              changes: { userId },
            });
          return changed;
        }),
      // The owner's command (members are not the API's to make): it opens no secret, so production asks for no keys.
      { audit: true, withoutKeys: true },
    );
    io.out(
      removed ? `User ${userId} removed from project ${projectId}` : `User ${userId} was not a member of ${projectId}`,
    );
  },
};
