import { addProject } from '../../db';
import { type CliCommand, parseCommandArgs, withDb } from '../command';

export const projectAdd: CliCommand = {
  usage: 'project add <projectId> [--name <name>]',
  summary: 'create a project (does nothing when it exists)',
  async run(args, io) {
    const { values, positionals } = parseCommandArgs(args, { name: { type: 'string' } }, ['projectId']);
    const [projectId] = positionals as [string];
    const added = await withDb(io, (db) => addProject(db, projectId, values.name));
    io.out(added ? `Project ${projectId} added` : `Project ${projectId} already exists`);
  },
};
