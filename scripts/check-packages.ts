// Checks every package as a user gets it from the registry: packs each one (its `prepack` builds it), then
//   1. the tarball holds compiled JS, type declarations, README.md, LICENSE and every file its `exports` and
//      `bin` name, and no tests; package.json has license, repository, engines and a prepack build;
//   2. every module a package's compiled code imports is declared by that package (dependencies or peers);
//   3. in an empty project with all the tarballs (and the peers npm installs for them), every entry point
//      loads with `import` and with `require` (Node ≥ 20.19 loads ES modules from CommonJS) and exports the
//      same names, TypeScript resolves its types from an ESM and a CommonJS file, and `inboxkit --help` and
//      each command's help run from the compiled bin;
//   4. the CLI installed alone (its own dependencies only, no peers) loads its database and broker clients.
// Third-party packages come from the npm cache first (`--prefer-offline`), the registry otherwise.
//
//   npm run check:packages [-- --keep]      (--keep leaves the work folder for a look)
import { execFile, type ExecFileOptions } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const NPM_FLAGS = ['--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];

interface PackageJson {
  name: string;
  version: string;
  private?: boolean;
  license?: string;
  repository?: { url?: string; directory?: string };
  engines?: { node?: string };
  scripts?: Record<string, string>;
  exports?: Record<string, Record<string, string>>;
  bin?: Record<string, string>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

interface Packed {
  dir: string;
  json: PackageJson;
  tarball: string;
  files: string[];
}

const problems: string[] = [];
const problem = (message: string) => {
  problems.push(message);
  console.log(`  PROBLEM ${message}`);
};
const started = Date.now();
const step = (title: string) => console.log(`\n[check-packages ${seconds(Date.now() - started)}] ${title}`);

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(0)}s`;
}

/**
 * Each command this check starts is bounded (npm installs 10 minutes, tsc 5, anything else 2): a command that hangs —
 * a process kept alive by a handle, an install stuck on the network — ends the check with its name and
 * output instead of holding CI until its own limit.
 */
const LIMIT_MS = { npm: 10 * 60_000, other: 2 * 60_000 };

function run(
  file: string,
  args: string[],
  options: ExecFileOptions = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const timeout = options.timeout ?? (file === 'npm' ? LIMIT_MS.npm : LIMIT_MS.other);
  const began = Date.now();
  return new Promise((resolvePromise) => {
    execFile(
      file,
      args,
      { maxBuffer: 64 * 1024 * 1024, killSignal: 'SIGKILL', ...options, timeout },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        const timedOut = error !== null && error.killed === true && Date.now() - began >= timeout;
        const note = timedOut
          ? `\n[check-packages] ${file} ${args.join(' ')}: no exit after ${seconds(timeout)}, killed`
          : '';
        if (timedOut) console.log(note.trim());
        resolvePromise({
          code: timedOut ? 124 : code,
          stdout: String(stdout),
          stderr: `${String(stderr)}${note}`,
        });
      },
    );
  });
}

async function must(file: string, args: string[], options: ExecFileOptions = {}): Promise<string> {
  let result = await run(file, args, options);
  // An npm install that hung (a registry request that never answered) is tried once more; a second hang fails.
  if (result.code === 124 && file === 'npm') result = await run(file, args, options);
  if (result.code !== 0) {
    throw new Error(
      `${file} ${args.join(' ')} exited with ${result.code}\n${result.stdout}\n${result.stderr}`,
    );
  }
  return result.stdout;
}

/**
 * The bare module names a compiled file imports: `static` (import/export … from, bare import) and `dynamic`
 * (`import('…')`). Comments are dropped first: doc comments hold example code.
 */
function importedModules(source: string): { static: string[]; dynamic: string[] } {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const collect = (patterns: RegExp[]) => {
    const names = new Set<string>();
    for (const pattern of patterns) {
      for (const match of code.matchAll(pattern)) {
        const specifier = match[1]!;
        if (specifier.startsWith('.') || specifier.startsWith('node:') || specifier.startsWith('/')) continue;
        const parts = specifier.split('/');
        const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
        if (!builtinModules.includes(name)) names.add(name);
      }
    }
    return [...names];
  };
  return {
    static: collect([
      /\b(?:import|export)\s[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g,
      /\bimport\s*['"]([^'"]+)['"]/g,
    ]),
    dynamic: collect([/\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g]),
  };
}

/** Every published entry point: `name` for '.', `name/sub` for './sub'. */
function entryPoints(json: PackageJson): string[] {
  return Object.keys(json.exports ?? { '.': {} }).map((key) =>
    key === '.' ? json.name : `${json.name}/${key.slice(2)}`,
  );
}

const work = mkdtempSync(join(tmpdir(), 'inboxkit-packages-'));
const keep = process.argv.includes('--keep');
try {
  const dirs = readdirSync(join(ROOT, 'packages'))
    .map((name) => join(ROOT, 'packages', name))
    .filter((dir) => existsSync(join(dir, 'package.json')));
  const packages = dirs
    .map((dir) => ({ dir, json: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as PackageJson }))
    .filter((p) => !p.json.private);

  step(`npm pack ${packages.length} packages (each one's prepack builds it)`);
  const tarballs = join(work, 'tarballs');
  mkdirSync(tarballs);
  await must(
    'npm',
    [
      'pack',
      '--pack-destination',
      tarballs,
      ...packages.flatMap((p) => ['-w', p.json.name]),
      '--loglevel=error',
    ],
    { cwd: ROOT, env: { ...process.env, TURBO_TELEMETRY_DISABLED: '1' } },
  );
  const packed: Packed[] = [];
  for (const { dir, json } of packages) {
    const tarball = join(tarballs, `${json.name.replace(/^@/, '').replace('/', '-')}-${json.version}.tgz`);
    if (!existsSync(tarball)) throw new Error(`npm pack wrote no ${tarball}`);
    const files = (await must('tar', ['-tzf', tarball]))
      .split('\n')
      .filter(Boolean)
      .map((f) => f.replace(/^package\//, ''));
    packed.push({ dir, json, tarball, files });
  }

  step('tarball contents and package.json fields');
  for (const { json, files, tarball } of packed) {
    const has = (file: string) => files.includes(file.replace(/^\.\//, ''));
    const missing = (what: string) => problem(`${json.name}: ${what}`);
    for (const file of ['package.json', 'README.md', 'LICENSE'])
      if (!has(file)) missing(`no ${file} in the tarball`);
    if (json.license !== 'MIT') missing(`license is ${json.license ?? 'missing'}`);
    if (!json.repository?.url || !json.repository.directory) missing('no repository url and directory');
    if (!json.engines?.node) missing('no engines.node');
    if (!json.scripts?.['prepack']) missing('no prepack script (a tarball could point at a missing dist/)');
    for (const [entry, conditions] of Object.entries(json.exports ?? {})) {
      if (!conditions['types'] || !conditions['default'])
        missing(`exports["${entry}"] lacks types or default`);
      for (const [condition, target] of Object.entries(conditions)) {
        if (!has(target)) missing(`exports["${entry}"]["${condition}"] = ${target} is not in the tarball`);
      }
    }
    for (const [command, target] of Object.entries(json.bin ?? {})) {
      if (!has(target)) missing(`bin ${command} = ${target} is not in the tarball`);
    }
    const tests = files.filter((f) => /(^|\/)test\/|\.test\.[cm]?[jt]s$/.test(f));
    if (tests.length > 0) missing(`tests in the tarball: ${tests.slice(0, 3).join(', ')}`);
    const js = files.filter((f) => f.startsWith('dist/') && f.endsWith('.js')).length;
    const dts = files.filter((f) => f.startsWith('dist/') && f.endsWith('.d.ts')).length;
    if (js === 0 || dts === 0)
      missing(`no compiled JS or no declarations in dist/ (${js} .js, ${dts} .d.ts)`);
    const size = (await must('du', ['-k', tarball])).split('\t')[0];
    console.log(`  ${json.name}: ${files.length} files (${js} .js, ${dts} .d.ts), ${size} kB`);
  }

  step('every module the compiled code imports is declared');
  const unpacked = join(work, 'unpacked');
  for (const { json, tarball } of packed) {
    const into = join(unpacked, json.name);
    mkdirSync(into, { recursive: true });
    await must('tar', ['-xzf', tarball, '-C', into]);
    const declared = new Set([
      ...Object.keys(json.dependencies ?? {}),
      ...Object.keys(json.peerDependencies ?? {}),
      ...Object.keys(json.optionalDependencies ?? {}),
      json.name,
    ]);
    // A dynamic import may load a devDependency: a guarded, optional load (the CLI's bin loads tsx only in a
    // checkout of the repository). A static one may not: the module would fail to load where it is installed.
    const devOnly = new Set(Object.keys(json.devDependencies ?? {}));
    const used = new Map<string, string>();
    const undeclared: [string, string][] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) walk(path);
        else if (/\.[cm]?js$/.test(entry.name)) {
          const file = path.slice(into.length + 1);
          const imports = importedModules(readFileSync(path, 'utf8'));
          for (const name of [...imports.static, ...imports.dynamic])
            if (!used.has(name)) used.set(name, file);
          for (const name of imports.static) if (!declared.has(name)) undeclared.push([name, file]);
          for (const name of imports.dynamic) {
            if (!declared.has(name) && !devOnly.has(name)) undeclared.push([name, file]);
          }
        }
      }
    };
    walk(join(into, 'package'));
    for (const [name, file] of undeclared)
      problem(`${json.name}: ${file} imports ${name}, which it does not declare`);
    console.log(`  ${json.name}: imports ${[...used.keys()].sort().join(', ') || 'nothing'} — all declared`);
  }

  step('an empty project with every tarball: import, require, TypeScript, inboxkit --help');
  const project = join(work, 'project');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true }, null, 2));
  // The optional peers (express, fastify for their adapters; @nestjs/terminus for @inboxkit/nestjs/terminus) as a
  // user of those has them. Kysely is a
  // peer (^0.28 || ^0.29) that npm installs at its newest; 0.29 needs Node 22, so on older Nodes the project
  // names 0.28, as a user there must (README: supported runtimes).
  const kyselyForThisNode = Number(process.versions.node.split('.')[0]) >= 22 ? [] : ['kysely@~0.28.0'];
  // @nestjs/terminus does not install beside the Nest 12 peers on Node 20 (npm's ERESOLVE through terminus's
  // optional @mikro-orm/nestjs peer, which wants Nest 11): there the terminus entry is neither installed nor loaded.
  const terminusHere = Number(process.versions.node.split('.')[0]) >= 22;
  const terminusForThisNode = terminusHere ? ['@nestjs/terminus'] : [];
  await must(
    'npm',
    [
      'install',
      ...NPM_FLAGS,
      ...packed.map((p) => p.tarball),
      'express',
      'fastify',
      ...terminusForThisNode,
      ...kyselyForThisNode,
    ],
    { cwd: project },
  );
  const ls = JSON.parse((await run('npm', ['ls', '--all', '--json'], { cwd: project })).stdout) as {
    dependencies?: Record<string, { resolved?: string; version?: string }>;
  };
  for (const { json } of packed) {
    const resolved = ls.dependencies?.[json.name]?.resolved ?? '';
    if (!resolved.startsWith('file:'))
      problem(`${json.name} was not installed from its tarball (${resolved})`);
  }
  const entries = packed
    .flatMap((p) => entryPoints(p.json))
    .filter((entry) => terminusHere || entry !== '@inboxkit/nestjs/terminus');
  writeFileSync(
    join(project, 'load.mjs'),
    `import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const results = [];
for (const entry of ${JSON.stringify(entries)}) {
  const result = { entry };
  try {
    result.esm = Object.keys(await import(entry)).sort();
  } catch (error) {
    result.esmError = String(error?.stack ?? error).split('\\n').slice(0, 3).join(' | ');
  }
  try {
    result.cjs = Object.keys(require(entry)).filter((k) => k !== '__esModule' && k !== 'module.exports').sort();
  } catch (error) {
    result.cjsError = String(error?.stack ?? error).split('\\n').slice(0, 3).join(' | ');
  }
  results.push(result);
}
console.log(JSON.stringify(results));
`,
  );
  const loaded = JSON.parse((await must('node', ['load.mjs'], { cwd: project })).trim()) as {
    entry: string;
    esm?: string[];
    cjs?: string[];
    esmError?: string;
    cjsError?: string;
  }[];
  for (const result of loaded) {
    if (result.esmError) problem(`import('${result.entry}') failed: ${result.esmError}`);
    if (result.cjsError) problem(`require('${result.entry}') failed: ${result.cjsError}`);
    if (!result.esm || !result.cjs) continue;
    if (result.esm.length === 0) problem(`import('${result.entry}') exports nothing`);
    if (result.esm.join() !== result.cjs.join()) {
      problem(`require('${result.entry}') and import() export different names`);
    }
    console.log(`  ${result.entry}: ${result.esm.length} exports, the same through import and require`);
  }

  // TypeScript consumers: the `types` condition from an ES module and from a CommonJS module (TypeScript 5.8+
  // with module nodenext types require() of ES modules as Node 20.19+ runs it).
  const typeImports = entries.map((entry, i) => `import * as m${i} from '${entry}';`).join('\n');
  const use = `export const loaded = [${entries.map((_, i) => `m${i}`).join(', ')}];\n`;
  writeFileSync(join(project, 'esm-consumer.mts'), `${typeImports}\n${use}`);
  writeFileSync(
    join(project, 'cjs-consumer.cts'),
    `${entries.map((entry, i) => `import m${i} = require('${entry}');`).join('\n')}\n${use}`,
  );
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: [],
      },
      files: ['esm-consumer.mts', 'cjs-consumer.cts'],
    }),
  );
  const tsc = await run('node', [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], {
    cwd: project,
    timeout: 5 * 60_000,
  });
  if (tsc.code !== 0) problem(`TypeScript consumers do not compile:\n${tsc.stdout}${tsc.stderr}`);
  else console.log(`  TypeScript (module nodenext): ${entries.length} entry points typed from .mts and .cts`);

  const bin = join(project, 'node_modules/.bin/inboxkit');
  const cli = packed.find((p) => p.json.bin?.['inboxkit'])!;
  const version = await run(bin, ['--version'], { cwd: project });
  if (version.stdout.trim() !== `inboxkit ${cli.json.version}`) {
    problem(
      `inboxkit --version printed ${JSON.stringify(version.stdout.trim())}, not inboxkit ${cli.json.version}`,
    );
  }
  for (const args of [
    ['--help'],
    ...['migrate', 'status', 'prune', 'dlq list', 'dlq replay', 'doctor'].map((c) => [
      ...c.split(' '),
      '--help',
    ]),
  ]) {
    const help = await run(bin, args, { cwd: project });
    if (help.code !== 0 || !/Usage: inboxkit/.test(help.stdout)) {
      problem(`inboxkit ${args.join(' ')} exited with ${help.code}: ${help.stdout}${help.stderr}`);
    }
  }
  console.log(
    '  inboxkit --version, --help and each command --help: ok (compiled bin, no TypeScript loader)',
  );

  step('the CLI alone: its own dependencies, no peers');
  const alone = join(work, 'cli-alone');
  mkdirSync(alone);
  writeFileSync(join(alone, 'package.json'), JSON.stringify({ name: 'operator', private: true }, null, 2));
  const cliTarballs = packed
    .filter(
      (p) => p.json.name === cli.json.name || Object.keys(cli.json.dependencies ?? {}).includes(p.json.name),
    )
    .map((p) => p.tarball);
  // --legacy-peer-deps: npm installs no peer dependency, so the CLI runs only on what it declares itself.
  await must('npm', ['install', ...NPM_FLAGS, '--legacy-peer-deps', ...cliTarballs], { cwd: alone });
  const aloneBin = join(alone, 'node_modules/.bin/inboxkit');
  const help = await run(aloneBin, ['--help'], { cwd: alone });
  if (help.code !== 0) problem(`inboxkit --help (CLI alone) exited with ${help.code}: ${help.stderr}`);
  // Each client loads: a command against a closed port fails to connect, never to find a module.
  for (const args of [
    ['status', '--database-url', 'postgres://inboxkit@127.0.0.1:1/inboxkit'],
    [
      'doctor',
      '--kafka-brokers',
      '127.0.0.1:1',
      '--amqp-url',
      'amqp://127.0.0.1:1',
      '--sqs-endpoint',
      'http://127.0.0.1:1',
    ],
  ]) {
    const result = await run(aloneBin, args, { cwd: alone, env: { ...process.env, INBOXKIT_SCHEMA: '' } });
    const output = `${result.stdout}${result.stderr}`;
    if (/ERR_MODULE_NOT_FOUND|Cannot find (package|module)/.test(output) || result.code === 0) {
      problem(`inboxkit ${args[0]} (CLI alone) exited with ${result.code}: ${output.slice(0, 600)}`);
    }
  }
  const imported = await run(
    'node',
    ['-e', "import('@inboxkit/cli').then((m) => console.log(Object.keys(m).length))"],
    {
      cwd: alone,
    },
  );
  if (imported.code !== 0) problem(`import('@inboxkit/cli') (CLI alone) failed: ${imported.stderr}`);
  console.log(
    `  inboxkit --help, status and doctor against closed ports, import('@inboxkit/cli'): all modules load`,
  );
} finally {
  if (keep) console.log(`\nwork folder kept: ${work}`);
  else rmSync(work, { recursive: true, force: true });
}

console.log(
  `\n[check-packages ${seconds(Date.now() - started)}] ${problems.length === 0 ? 'all packages ready' : `${problems.length} problem(s)`}`,
);
process.exitCode = problems.length === 0 ? 0 : 1;
