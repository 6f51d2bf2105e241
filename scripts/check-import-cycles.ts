// Import cycles between the source files of the packages (packages/*/src): every relative import, `import type`
// and `export … from` included, since a cycle of types still ties two files' designs together. Prints each
// cycle (one strongly connected set of files, with one closed path through it) and exits 1 when there is any.
// Run by `npm run lint` (so by CI's lint phase); `--root <dir>` checks another tree (its test uses one).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/** Every file's relative imports resolved to files, keyed by path relative to `root`. */
export function importGraph(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const packages = join(root, 'packages');
  for (const name of existsSync(packages) ? readdirSync(packages).sort() : []) {
    const src = join(packages, name, 'src');
    if (!existsSync(src)) continue;
    for (const file of sourceFiles(src)) {
      const text = readFileSync(file, 'utf8');
      const targets = ts
        .preProcessFile(text, true, true)
        .importedFiles.map((ref) => ref.fileName)
        .filter((spec) => spec.startsWith('.'))
        .map((spec) => resolveSource(dirname(file), spec))
        .filter((target): target is string => target !== undefined)
        .map((target) => relative(root, target));
      graph.set(relative(root, file), [...new Set(targets)].sort());
    }
  }
  return graph;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir).sort()) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (/\.tsx?$/.test(entry) && !entry.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** An import's `.js` specifier → its `.ts` (or `.tsx`) source, or the folder's index.ts, as TypeScript's NodeNext resolution finds it. */
function resolveSource(from: string, spec: string): string | undefined {
  const base = resolve(from, spec);
  const stem = base.replace(/\.(m|c)?js$/, '');
  for (const candidate of [`${stem}.ts`, `${stem}.tsx`, join(base, 'index.ts')]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return undefined;
}

/** The cycles: each strongly connected set of two or more files (or a file importing itself), as one closed path. */
export function importCycles(graph: Map<string, string[]>): string[][] {
  // Tarjan's algorithm, iterative enough for a source tree (recursion depth = longest import chain).
  let index = 0;
  const indexOf = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (node: string): void => {
    indexOf.set(node, index);
    low.set(node, index);
    index += 1;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!indexOf.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, indexOf.get(next)!));
    }
    if (low.get(node) === indexOf.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) components.push(component);
    }
  };
  for (const node of [...graph.keys()].sort()) if (!indexOf.has(node)) visit(node);
  return components.map((component) => closedPath(graph, component));
}

/** One closed path through a strongly connected set, from its first file (by name) back to it. */
function closedPath(graph: Map<string, string[]>, component: string[]): string[] {
  const members = new Set(component);
  const start = [...component].sort()[0]!;
  // Breadth-first from start's successors back to start: the shortest cycle through start.
  const previous = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const next of graph.get(node) ?? []) {
      if (!members.has(next)) continue;
      if (next === start) {
        const path = [start];
        for (let at = node; at !== start; at = previous.get(at)!) path.splice(1, 0, at);
        return [...path, start];
      }
      if (!previous.has(next)) {
        previous.set(next, node);
        queue.push(next);
      }
    }
  }
  return [start, start];
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('check-import-cycles.ts')) {
  const at = process.argv.indexOf('--root');
  const root =
    at > 0 ? resolve(process.argv[at + 1]!) : resolve(dirname(new URL(import.meta.url).pathname), '..');
  const graph = importGraph(root);
  const cycles = importCycles(graph);
  if (cycles.length === 0) {
    console.log(`[import cycles] none in ${graph.size} source files of packages/*/src`);
  } else {
    console.error(
      `[import cycles] ${cycles.length} in packages/*/src (move the shared piece into a file both import):`,
    );
    for (const cycle of cycles) console.error(`  ${cycle.join(' → ')}`);
    process.exitCode = 1;
  }
}
