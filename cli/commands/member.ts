import { addMember, appendAuditEvent, projectExists, removeMember } from '../../db';
import { CliError, cliActor, type CliCommand, parseCommandArgs, withDb } from '../command';

/** `member add` and `member remove`: the same steps, with the change and the words of each. */
function memberCommand(
  action: 'add' | 'remove',
  summary: string,
  change: typeof addMember,
  said: (changed: boolean, userId: string, projectId: string) => string,
): CliCommand {
  return {
    usage: `member ${action} <projectId> <userId>`,
    summary,
    async run(args, io) {
      const [projectId, userId] = parseCommandArgs(args, {}, ['projectId', 'userId']).positionals as [string, string];
      const changed = await withDb(
        io,
        (db) =>
          db.transaction(async (trx) => {
            if (!(await projectExists(trx, projectId))) throw new CliError(`No project with id ${projectId} was found`);
            const done = await change(trx, projectId, userId);
            if (done)
              await appendAuditEvent(trx, {
                actor: cliActor(io),
                action: `member.${action}`,
                outcome: 'ok',
                projectId,
                changes: { userId },
              });
            return done;
          }),
        // The owner's command (members are not the API's to make): it opens no secret, so production asks for no keys.
        { audit: true, withoutKeys: true },
      );
      io.out(said(changed, userId, projectId));
    },
  };
}

export const memberAdd = memberCommand(
  'add',
  'let a user (token sub) manage the project’s webhook',
  addMember,
  (added, user, project) =>
    added ? `User ${user} added to project ${project}` : `User ${user} already is a member of ${project}`,
);

export const memberRemove = memberCommand(
  'remove',
  'revoke a user’s access to the project',
  removeMember,
  (removed, user, project) =>
    removed ? `User ${user} removed from project ${project}` : `User ${user} was not a member of ${project}`,
);
