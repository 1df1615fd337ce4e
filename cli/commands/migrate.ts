import { migrateToLatest } from '../../db';
import { type CliCommand, parseCommandArgs, withDb } from '../command';

export const migrate: CliCommand = {
  usage: 'migrate',
  summary: 'apply pending database migrations',
  async run(args, io) {
    parseCommandArgs(args, {}, []);
    const applied = await withDb(io, (db) => migrateToLatest(db));
    io.out(applied.length > 0 ? `Applied migrations: ${applied.join(', ')}` : 'Database is already up to date');
  },
};
