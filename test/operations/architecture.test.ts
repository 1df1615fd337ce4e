// The house's rules, read from the imports of the product code: no circle of imports (type imports count), no room
// that imports the delivery path's activities from the API, and no folder of more than a dozen files.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const ROOT = resolve(__dirname, '../..');
const PRODUCT = ['api', 'activities', 'workflows', 'worker', 'db', 'common', 'client', 'cli', 'dev'];
const MAX_FILES_PER_FOLDER = 12;

function sourceFiles(folder: string): string[] {
  return readdirSync(folder).flatMap((name) => {
    const path = join(folder, name);
    if (statSync(path).isDirectory()) return name === 'migrations' ? [] : sourceFiles(path);
    return name.endsWith('.ts') && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Each product file's relative imports (static, dynamic and type-only), resolved to files. */
export function importGraph(files: readonly string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const targets = importedFiles
      .map((imported) => imported.fileName)
      .filter((name) => name.startsWith('.'))
      .map((name) => resolve(dirname(file), name))
      .map((base) =>
        [`${base}.ts`, join(base, 'index.ts'), base].find((path) => existsSync(path) && path.endsWith('.ts')),
      )
      .filter((path): path is string => path !== undefined);
    graph.set(file, targets);
  }
  return graph;
}

/** The strongly connected components of more than one file (Tarjan): each is a circle of imports. */
export function circles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next++);
    stack.push(node);
    onStack.add(node);
    for (const target of graph.get(node) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(node, Math.min(low.get(node)!, low.get(target)!));
      } else if (onStack.has(target)) low.set(node, Math.min(low.get(node)!, index.get(target)!));
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

describe('the structure of the product code', () => {
  const files = PRODUCT.flatMap((folder) => sourceFiles(join(ROOT, folder)));
  const graph = importGraph(files);
  const name = (path: string) => relative(ROOT, path);

  it('finds a circle when there is one (the checker itself)', () => {
    const graph = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a']],
      ['d', ['a']],
      ['e', ['e']],
    ]);
    assert.deepEqual(circles(graph), [['a', 'b', 'c'], ['e']]);
    assert.deepEqual(
      circles(
        new Map([
          ['a', ['b']],
          ['b', []],
        ]),
      ),
      [],
    );
  });

  it('has no circle of imports, type imports included', () => {
    assert.deepEqual(
      circles(graph).map((circle) => circle.map(name)),
      [],
    );
  });

  it('has no import from api/ into activities/: what both need lives in common/ or db/', () => {
    const crossings = [...graph]
      .filter(([file]) => name(file).startsWith('api/'))
      .flatMap(([file, targets]) =>
        targets.filter((t) => name(t).startsWith('activities/')).map((t) => `${name(file)} -> ${name(t)}`),
      );
    assert.deepEqual(crossings, []);
  });

  it(`has no folder of product code with more than ${MAX_FILES_PER_FOLDER} files`, () => {
    const perFolder = new Map<string, number>();
    for (const file of files) perFolder.set(name(dirname(file)), (perFolder.get(name(dirname(file))) ?? 0) + 1);
    const crowded = [...perFolder]
      .filter(([, count]) => count > MAX_FILES_PER_FOLDER)
      .map(([folder, count]) => `${folder}: ${count}`);
    assert.deepEqual(crowded, []);
  });

  it('keeps nothing at the top of api/ but the app, its entry points and its public index', () => {
    const top = readdirSync(join(ROOT, 'api')).filter((entry) => entry.endsWith('.ts'));
    assert.deepEqual(top.sort(), ['app.ts', 'index.ts', 'server.ts']);
  });
});
