// The public API of every published package, as a text report committed in api/<package>.api.md, and the rule
// that keeps it honest (docs/releasing.md):
//   1. the report built from the package's compiled type declarations (dist/**/*.d.ts, what a user's TypeScript
//      reads) must equal the committed one: a difference means the API changed and nobody looked;
//   2. a committed report that differs from the one at the package's last release needs a changeset
//      (.changeset/*.md) naming that package, with a bump at least as large as the change asks for (0.x: minor
//      for a breaking change, patch for an addition; from 1.0: major, minor), unless the package's version was
//      already bumped for a release (`changeset version` consumed the changesets). Never released (no
//      `<name>@<version>` tag), the base is the first committed report and any changeset naming the package
//      will do, `none` included: nothing published can break, and `none` keeps the first version as it is.
//
// A report lists, per entry point (`@inboxkit/core`, `@inboxkit/core/postgres` …), every export with its
// declaration as TypeScript prints it (comments dropped, private class members dropped, declaration order of the
// entry point kept out: exports sorted by name), whether it is a value at run time (`export`) or a type only
// (`export type`, from the compiled module's own exports), then every type the API uses that no entry point
// exports, and the package's module augmentations. It names no file: moving code between files is no change.
//
//   npm run api:check                 (builds the packages with turbo, cached; fails on either rule)
//   npm run api:update                (rewrites api/*.api.md; then add a changeset: npx changeset)
//   … -- --no-build                   (use the dist/ folders as they are, e.g. right after npm run check:packages)
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, realpathSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const API_DIR = join(ROOT, 'api');
const CHANGESET_DIR = join(ROOT, '.changeset');

interface PackageJson {
  name: string;
  version: string;
  private?: boolean;
  exports?: Record<string, Record<string, string>>;
}

interface Package {
  dir: string;
  /** Folder name under packages/: the report is api/<short>.api.md. */
  short: string;
  json: PackageJson;
  /** dist/ of the package, real path with a trailing separator. */
  dist: string;
  entries: { specifier: string; dts: string; js: string }[];
}

type Bump = 'none' | 'patch' | 'minor' | 'major';
const BUMPS: Bump[] = ['none', 'patch', 'minor', 'major'];

export function publicPackages(): Package[] {
  return readdirSync(join(ROOT, 'packages'))
    .sort()
    .map((short) => ({ short, dir: join(ROOT, 'packages', short) }))
    .filter(({ dir }) => existsSync(join(dir, 'package.json')))
    .map(({ short, dir }) => ({
      short,
      dir,
      json: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as PackageJson,
    }))
    .filter(({ json }) => !json.private)
    .map(({ short, dir, json }) => ({
      short,
      dir,
      json,
      dist: join(dir, 'dist') + sep,
      entries: Object.entries(json.exports ?? {}).map(([key, conditions]) => {
        if (!conditions['types'] || !conditions['default'])
          throw new Error(`${json.name}: exports["${key}"] has no types or default`);
        return {
          specifier: key === '.' ? json.name : `${json.name}/${key.slice(2)}`,
          dts: join(dir, conditions['types']),
          js: join(dir, conditions['default']),
        };
      }),
    }));
}

/** The committed report's file for a package. */
export function reportPath(pkg: Pick<Package, 'short'>): string {
  return join(API_DIR, `${pkg.short}.api.md`);
}

// ------------------------------------------------------------------------------------------------ reports

const printer = ts.createPrinter({ removeComments: true, newLine: ts.NewLineKind.LineFeed });

function isPrivateMember(member: ts.ClassElement): boolean {
  if (member.name && ts.isPrivateIdentifier(member.name)) return false; // `#private;`: keeps the class nominal
  return (ts.getCombinedModifierFlags(member) & ts.ModifierFlags.Private) !== 0;
}

/** One declaration as TypeScript prints it, without comments, private members or export/declare keywords. */
function renderDeclaration(declaration: ts.Declaration): string {
  let node: ts.Node = declaration;
  if (ts.isVariableDeclaration(node) && ts.isVariableDeclarationList(node.parent)) {
    const keyword =
      node.parent.flags & ts.NodeFlags.Const ? 'const' : node.parent.flags & ts.NodeFlags.Let ? 'let' : 'var';
    const type = node.type
      ? printer.printNode(ts.EmitHint.Unspecified, node.type, node.getSourceFile())
      : 'unknown';
    return `${keyword} ${node.name.getText()}: ${type};`;
  }
  if (ts.isClassDeclaration(node)) {
    node = ts.factory.updateClassDeclaration(
      node,
      node.modifiers,
      node.name,
      node.typeParameters,
      node.heritageClauses,
      node.members.filter((member) => !isPrivateMember(member)),
    );
  }
  const text = printer.printNode(ts.EmitHint.Unspecified, node, declaration.getSourceFile());
  return text.replace(/^(?:(?:export|default|declare)\s+)+/, '').trimEnd();
}

function resolveAlias(checker: ts.TypeChecker, symbol: ts.Symbol): ts.Symbol {
  return symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
}

/** The symbols a declaration's types name (type references, heritage clauses, typeof queries, import types). */
function referencedSymbols(checker: ts.TypeChecker, root: ts.Node): ts.Symbol[] {
  const found: ts.Symbol[] = [];
  const visit = (node: ts.Node) => {
    let symbol: ts.Symbol | undefined;
    if (ts.isTypeReferenceNode(node)) symbol = checker.getSymbolAtLocation(node.typeName);
    else if (ts.isExpressionWithTypeArguments(node)) symbol = checker.getSymbolAtLocation(node.expression);
    else if (ts.isTypeQueryNode(node)) symbol = checker.getSymbolAtLocation(node.exprName);
    else if (ts.isImportTypeNode(node) && node.qualifier)
      symbol = checker.getSymbolAtLocation(node.qualifier);
    if (symbol) found.push(resolveAlias(checker, symbol));
    ts.forEachChild(node, visit);
  };
  visit(root);
  return found;
}

function declarationsOf(symbol: ts.Symbol, within: (file: string) => boolean): ts.Declaration[] {
  return (symbol.declarations ?? [])
    .filter((d) => within(d.getSourceFile().fileName))
    .filter((d) => !ts.isSourceFile(d) && !ts.isTypeParameterDeclaration(d))
    .sort((a, b) => {
      const fa = a.getSourceFile().fileName;
      const fb = b.getSourceFile().fileName;
      return fa === fb ? a.pos - b.pos : fa < fb ? -1 : 1;
    });
}

/** Builds every package's report from its compiled declarations: one TypeScript program for all of them. */
export async function buildReports(packages: Package[]): Promise<Map<string, string>> {
  for (const pkg of packages)
    for (const entry of pkg.entries)
      if (!existsSync(entry.dts))
        throw new Error(`${entry.dts} is missing: build the packages first (npm run build)`);

  const program = ts.createProgram({
    rootNames: packages.flatMap((p) => p.entries.map((e) => e.dts)),
    options: {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      strict: true,
      skipLibCheck: true,
      noEmit: true,
      types: ['node'],
    },
  });
  const checker = program.getTypeChecker();
  const real = (file: string) => (existsSync(file) ? realpathSync(file) : file);
  const ownerOf = (file: string) => packages.find((p) => real(file).startsWith(p.dist));

  // Every symbol some entry point of some package exports: a type the API uses is reported where it is exported.
  const exportedAnywhere = new Set<ts.Symbol>();
  const exportsOf = new Map<string, ts.Symbol[]>();
  for (const pkg of packages) {
    for (const entry of pkg.entries) {
      const source = program.getSourceFile(entry.dts);
      const moduleSymbol = source && checker.getSymbolAtLocation(source);
      if (!moduleSymbol) throw new Error(`TypeScript cannot read ${entry.dts} as a module`);
      const symbols = checker.getExportsOfModule(moduleSymbol);
      exportsOf.set(entry.specifier, symbols);
      for (const symbol of symbols) exportedAnywhere.add(resolveAlias(checker, symbol));
    }
  }

  const reports = new Map<string, string>();
  for (const pkg of packages) {
    const ours = (file: string) => ownerOf(file) !== undefined;
    const lines: string[] = [
      `# ${pkg.json.name}: public API`,
      '',
      'Generated by `npm run api:update` from the compiled type declarations. Do not edit by hand: CI compares',
      'it with the packages (`npm run api:check`), and a change to it needs a changeset (docs/releasing.md).',
      '',
    ];
    const unexported = new Map<ts.Symbol, string>();
    const queue: ts.Symbol[] = [];
    const note = (declaration: ts.Node) => {
      for (const symbol of referencedSymbols(checker, declaration)) {
        if (symbol.flags & ts.SymbolFlags.TypeParameter) continue;
        if (exportedAnywhere.has(symbol) || unexported.has(symbol)) continue;
        if (!declarationsOf(symbol, ours).length) continue; // a dependency's type, or a built-in
        unexported.set(symbol, '');
        queue.push(symbol);
      }
    };

    for (const entry of pkg.entries) {
      // What the compiled module exports at run time: a name missing there is a type only.
      const runtime = new Set(Object.keys((await import(pathToFileURL(entry.js).href)) as object));
      const symbols = [...exportsOf.get(entry.specifier)!].sort((a, b) =>
        a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
      );
      lines.push(`## ${entry.specifier}`, '', '```ts');
      for (const exported of symbols) {
        const target = resolveAlias(checker, exported);
        const declarations = declarationsOf(target, ours);
        const keyword = runtime.has(exported.name) ? 'export' : 'export type';
        const rendered = declarations.map((d) => renderDeclaration(d));
        const declaredName =
          target.name === exported.name || target.name === 'default' ? '' : ` (declared as ${target.name})`;
        if (rendered.length === 0) {
          // Re-exported from a dependency: its shape is that package's, only the name is ours.
          const from = target.declarations?.[0]?.getSourceFile().fileName ?? '?';
          const dependency = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(from)?.[1] ?? 'a dependency';
          lines.push(`${keyword} ${exported.name}${declaredName}: re-exported from ${dependency}`, '');
          continue;
        }
        lines.push(`${keyword} ${exported.name}${declaredName}:`);
        for (const text of rendered) lines.push(text);
        lines.push('');
        for (const d of declarations) note(d);
      }
      for (const name of runtime) {
        if (!symbols.some((s) => s.name === name))
          lines.push(`export ${name}: at run time only, no declaration`, '');
      }
      if (lines[lines.length - 1] === '') lines.pop();
      lines.push('```', '');
    }

    for (let symbol = queue.shift(); symbol; symbol = queue.shift()) {
      const text = declarationsOf(symbol, ours).map((d) => {
        note(d);
        return renderDeclaration(d);
      });
      unexported.set(symbol, text.join('\n'));
    }
    if (unexported.size > 0) {
      lines.push('## Used by the API, exported by no entry point', '', '```ts');
      const blocks = [...unexported.entries()]
        .sort(([a, ta], [b, tb]) =>
          a.name < b.name ? -1 : a.name > b.name ? 1 : ta < tb ? -1 : ta > tb ? 1 : 0,
        )
        .map(([, text]) => text);
      lines.push(blocks.join('\n\n'), '```', '');
    }

    // `declare module '…'` blocks: this package adds members to another package's types.
    const augmentations: string[] = [];
    for (const source of program.getSourceFiles()) {
      if (ownerOf(source.fileName) !== pkg) continue;
      for (const statement of source.statements) {
        if (ts.isModuleDeclaration(statement) && ts.isStringLiteral(statement.name)) {
          augmentations.push(renderDeclaration(statement));
          note(statement);
        }
      }
    }
    if (augmentations.length > 0) {
      lines.push('## Module augmentations', '', '```ts', augmentations.sort().join('\n\n'), '```', '');
    }
    reports.set(pkg.json.name, lines.join('\n'));
  }
  return reports;
}

// --------------------------------------------------------------------------------------------- changesets

/** The packages each pending changeset (.changeset/*.md) names, with the largest bump it asks for. */
export function pendingChangesets(): Map<string, { bump: Bump; files: string[] }> {
  const named = new Map<string, { bump: Bump; files: string[] }>();
  if (!existsSync(CHANGESET_DIR)) return named;
  for (const file of readdirSync(CHANGESET_DIR).sort()) {
    if (!file.endsWith('.md') || file === 'README.md') continue;
    const text = readFileSync(join(CHANGESET_DIR, file), 'utf8');
    const front = /^---\r?\n([\s\S]*?)\r?\n---/.exec(text);
    if (!front) throw new Error(`.changeset/${file} has no front matter (--- "package": bump ---)`);
    for (const line of front[1]!.split(/\r?\n/)) {
      if (!line.trim()) continue;
      const match = /^\s*["']?([^"':]+(?::[^"':]+)?)["']?\s*:\s*(patch|minor|major|none)\s*$/.exec(line);
      if (!match) throw new Error(`.changeset/${file}: cannot read the line ${JSON.stringify(line)}`);
      const [, name, level] = match as unknown as [string, string, Bump];
      const before = named.get(name);
      const bump = before && BUMPS.indexOf(before.bump) > BUMPS.indexOf(level) ? before.bump : level;
      named.set(name, { bump, files: [...(before?.files ?? []), file] });
    }
  }
  return named;
}

function git(args: string[]): string | undefined {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return undefined;
  }
}

/**
 * The package's last release: its newest `<name>@<version>` tag (what `changeset publish` tags), else — never
 * released — the commit that first committed its report (the surface the first release is to have).
 */
export function lastRelease(pkg: Package): { ref: string; label: string; released: boolean } | undefined {
  const tags = (git(['tag', '--list', `${pkg.json.name}@*`, '--sort=-v:refname']) ?? '')
    .split('\n')
    .filter(Boolean);
  if (tags[0]) return { ref: tags[0], label: `its last release (tag ${tags[0]})`, released: true };
  const relative = reportPath(pkg).slice(ROOT.length + 1);
  const added = (git(['log', '--diff-filter=A', '--format=%H', '--', relative]) ?? '')
    .split('\n')
    .filter(Boolean);
  const first = added[added.length - 1];
  return first
    ? {
        ref: first,
        label: `the first committed report (${first.slice(0, 10)}; not released yet)`,
        released: false,
      }
    : undefined;
}

/** The bump a report change asks for: breaking when a line of the old report is gone, else an addition. */
export function requiredBump(before: string, after: string, version: string): Bump {
  const kept = new Set(after.split('\n'));
  const breaking = before.split('\n').some((line) => !kept.has(line));
  const major = Number(version.split('.')[0]);
  if (major === 0) return breaking ? 'minor' : 'patch';
  return breaking ? 'major' : 'minor';
}

/** Why a change asks for its bump, for the failure message. */
function why(before: string, after: string): string {
  const kept = new Set(after.split('\n'));
  return before.split('\n').some((line) => !kept.has(line))
    ? 'a declaration was removed or changed: breaking'
    : 'declarations were added only';
}

function changedLines(before: string, after: string): string[] {
  const beforeSet = new Set(before.split('\n'));
  const afterSet = new Set(after.split('\n'));
  return [
    ...before
      .split('\n')
      .filter((l) => !afterSet.has(l))
      .map((l) => `  - ${l}`),
    ...after
      .split('\n')
      .filter((l) => !beforeSet.has(l))
      .map((l) => `  + ${l}`),
  ];
}

// ----------------------------------------------------------------------------------------------------- main

async function main() {
  const argv = process.argv.slice(2);
  const mode = argv.includes('--update') ? 'update' : 'check';
  const started = Date.now();
  if (!argv.includes('--no-build')) {
    try {
      execFileSync('npx', ['turbo', 'run', 'build', '--output-logs=errors-only', '--log-prefix=none'], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
        encoding: 'utf8',
        env: { ...process.env, TURBO_TELEMETRY_DISABLED: '1' },
      });
    } catch (error) {
      const { stdout, stderr } = error as { stdout?: string; stderr?: string };
      console.error(`${stdout ?? ''}${stderr ?? ''}`);
      console.error(
        'api: the packages do not build (turbo run build, above): no API report without their declarations',
      );
      process.exit(1);
    }
  }
  const packages = publicPackages();
  const reports = await buildReports(packages);
  const problems: string[] = [];

  if (mode === 'update') {
    mkdirSync(API_DIR, { recursive: true });
    for (const pkg of packages) {
      const path = reportPath(pkg);
      const text = reports.get(pkg.json.name)!;
      const before = existsSync(path) ? readFileSync(path, 'utf8') : '';
      if (before !== text) {
        writeFileSync(path, text);
        console.log(`api: ${path.slice(ROOT.length + 1)} updated`);
      }
    }
  } else {
    for (const pkg of packages) {
      const path = reportPath(pkg);
      const committed = existsSync(path) ? readFileSync(path, 'utf8') : undefined;
      const text = reports.get(pkg.json.name)!;
      if (committed !== text) {
        const diff = committed === undefined ? ['  (no report yet)'] : changedLines(committed, text);
        problems.push(
          `${pkg.json.name}: its public API differs from ${path.slice(ROOT.length + 1)}:\n${diff.slice(0, 40).join('\n')}${diff.length > 40 ? `\n  … ${diff.length - 40} more lines` : ''}\n` +
            `  If the change is meant: run \`npm run api:update\`, commit api/, and add a changeset naming ${pkg.json.name} (\`npx changeset\`).`,
        );
      }
    }
  }

  // Rule 2, on the reports as they are now in api/ (just written by --update, or checked equal above).
  const changesets = pendingChangesets();
  for (const pkg of packages) {
    const path = reportPath(pkg);
    if (!existsSync(path)) continue;
    const release = lastRelease(pkg);
    if (!release) continue; // not committed yet: rule 1 (or the next commit) covers it
    const released = git(['show', `${release.ref}:${path.slice(ROOT.length + 1)}`]);
    const releasedJson = git(['show', `${release.ref}:packages/${pkg.short}/package.json`]);
    const releasedVersion = releasedJson ? (JSON.parse(releasedJson) as PackageJson).version : undefined;
    if (releasedVersion !== undefined && releasedVersion !== pkg.json.version) continue; // versioned for release
    const now = readFileSync(path, 'utf8');
    if (released === undefined || released === now) continue;
    const needed = requiredBump(released, now, pkg.json.version);
    const pending = changesets.get(pkg.json.name);
    if (!pending) {
      problems.push(
        `${pkg.json.name}: its public API changed since ${release.label}, and no changeset names it.\n` +
          (release.released
            ? `  Add one (\`npx changeset\`: ${pkg.json.name}, ${needed} or more, and what changed for its users), commit .changeset/.`
            : `  Add one naming it, commit .changeset/: \`"${pkg.json.name}": none\` keeps its first version at ${pkg.json.version}` +
              ` (never published: nothing to break yet), or ${needed} for a new version.`),
      );
    } else if (release.released && BUMPS.indexOf(pending.bump) < BUMPS.indexOf(needed)) {
      problems.push(
        `${pkg.json.name}: its public API changed since ${release.label} in a way that asks for a ${needed} bump` +
          ` (${why(released, now)}),` +
          ` but its changesets (${pending.files.join(', ')}) ask for ${pending.bump}.`,
      );
    }
  }

  const took = `${((Date.now() - started) / 1000).toFixed(1)}s`;
  if (mode === 'update' && problems.length > 0) {
    // The reports are written; what is left is the author's: say it, without failing the update.
    console.log(`api: reports written (${took}); before committing:\n\n${problems.join('\n\n')}`);
  } else if (problems.length > 0) {
    console.error(`api: ${problems.length} problem(s) (${took})\n\n${problems.join('\n\n')}`);
    process.exitCode = 1;
  } else {
    console.log(
      `api: ${packages.length} packages, ${packages.reduce((n, p) => n + p.entries.length, 0)} entry points: ` +
        `${mode === 'update' ? 'reports written' : 'reports match, every change since a release has its changeset'} (${took})`,
    );
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
