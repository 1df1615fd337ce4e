// Carries Stryker's incremental results across renamed files: `npx tsx test/mutation/carry-renames.ts` before
// `npm run test:mutation` when modules or test files moved since test/mutation/incremental.json was committed.
//
// Stryker keys its results by path, so a moved module or test file would lose all of them and the next run would try
// every mutant again. This renames the keys the way git sees the moves (`git diff -M` from the commit that last wrote
// the file), and takes a moved test file's new text as its recorded text when the two differ only in imports and
// comments: mocha reports no test locations, so any other change makes Stryker try again every mutant its tests cover,
// as it should.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';

const FILE = 'test/mutation/incremental.json';
const git = (...args: string[]): string => execFileSync('git', args, { encoding: 'utf8' });

const base = git('log', '-1', '--format=%H', '--', FILE).trim();
const renames = new Map(
  git('diff', '-M', '--name-status', base, 'HEAD')
    .split('\n')
    .filter((line) => line.startsWith('R'))
    .map((line) => line.split('\t').slice(1) as [string, string]),
);

/** A test file's text without its imports, comments and the depth of its relative paths. */
function body(source: string): string {
  const kept: string[] = [];
  let inImport = false;
  for (const line of source.split('\n')) {
    const text = line.trim();
    const ends = /from '[^']+';$/.test(text) || /^import '[^']+';$/.test(text);
    if (inImport) inImport = !ends;
    else if (text.startsWith('import ')) inImport = !ends;
    else if (!text.startsWith('//')) kept.push(line.replace(/(\.\.\/)+/g, '../').replace(/'\.\//g, "'../"));
  }
  return kept.join('\n').replace(/\s+/g, ' ').trim();
}

interface Recorded {
  source: string;
}
const results = JSON.parse(readFileSync(FILE, 'utf8')) as {
  files: Record<string, Recorded>;
  testFiles: Record<string, Recorded>;
};
const rename = (entries: Record<string, Recorded>): Record<string, Recorded> =>
  Object.fromEntries(Object.entries(entries).map(([path, v]) => [renames.get(path) ?? path, v]));
results.files = rename(results.files);
results.testFiles = rename(results.testFiles);
let refreshed = 0;
for (const [path, entry] of Object.entries(results.testFiles)) {
  let current: string;
  try {
    current = readFileSync(path, 'utf8');
  } catch {
    continue;
  }
  if (current !== entry.source && body(current) === body(entry.source)) {
    entry.source = current;
    refreshed += 1;
  }
}
writeFileSync(FILE, `${JSON.stringify(results, null, 2)}\n`);
console.log(`${renames.size} renames since ${base.slice(0, 7)}; ${refreshed} moved test files kept their results`);
