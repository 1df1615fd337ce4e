import { addMember, projectExists, removeMember } from '../../db';
import { CliError, type CliCommand, parseCommandArgs, withDb } from '../command';

export const memberAdd: CliCommand = {
  usage: 'member add <projectId> <userId>',
  summary: 'let a user (token sub) manage the project’s webhook',
  async run(args, io) {
    const [projectId, userId] = parseCommandArgs(args, {}, ['projectId', 'userId']).positionals as [string, string];
    const added = await withDb(io, async (db) => {
      if (!(await projectExists(db, projectId))) throw new CliError(`No project with id ${projectId} was found`);
      return addMember(db, projectId, userId);
    });
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
    const removed = await withDb(io, async (db) => {
      if (!(await projectExists(db, projectId))) throw new CliError(`No project with id ${projectId} was found`);
      return removeMember(db, projectId, userId);
    });
    io.out(
      removed ? `User ${userId} removed from project ${projectId}` : `User ${userId} was not a member of ${projectId}`,
    );
  },
};
