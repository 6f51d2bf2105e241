// Checks every published package's tarball as the registry would take it (docs/releasing.md):
//   1. publint: package.json fields and the files its exports, main, types and bin name, inside the tarball;
//   2. "are the types wrong" (@arethetypeswrong/core): each entry point's types resolve, from an ES module and
//      from CommonJS under `node16` resolution and under `bundler`, to declarations that match the JavaScript.
//      One problem kind is accepted, documented: CJSResolvesToESM (`require()` of an ES module). The packages
//      are ES modules and require Node ≥ 20.19, which loads them from `require()`; TypeScript types that with
//      `module: nodenext` (5.8+) or `node20` (5.9+). scripts/check-packages.ts proves both on the installed
//      tarballs. The `node10` resolution (no `exports` support) is not checked: no supported Node uses it;
//   3. every @inboxkit dependency of a package pins its sibling's current version exactly (what a release
//      publishes together; `changeset version` rewrites the pins);
//   4. `npm publish --dry-run` of the tarball.
// Packs every package itself (each one's prepack builds it; turbo's cache makes that quick), or takes the
// tarballs `npm run check:packages -- --keep` left: `--tarballs <folder>`.
//
//   npm run release:check [-- --tarballs <folder>]
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkPackage, createPackageFromTarballData } from '@arethetypeswrong/core';
import type { Problem } from '@arethetypeswrong/core';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** attw problem kinds accepted for every package, with the reason (see the header and docs/releasing.md). */
const ACCEPTED: Partial<Record<Problem['kind'], string>> = {
  CJSResolvesToESM:
    'require() of an ES module: Node ≥ 20.19 (engines) loads it; TypeScript nodenext/node20 types it',
};

interface PackageJson {
  name: string;
  version: string;
  private?: boolean;
  exports?: Record<string, unknown>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

function run(file: string, args: string[], cwd = ROOT): Promise<{ code: number; output: string }> {
  return new Promise((done) => {
    execFile(
      file,
      args,
      { cwd, maxBuffer: 64 * 1024 * 1024, env: { ...process.env, TURBO_TELEMETRY_DISABLED: '1' } },
      (error, stdout, stderr) => {
        done({
          code: error ? (typeof error.code === 'number' ? error.code : 1) : 0,
          output: `${stdout}${stderr}`,
        });
      },
    );
  });
}

const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)}s`;
const problems: string[] = [];
const problem = (message: string) => {
  problems.push(message);
  console.log(`  PROBLEM ${message}`);
};

const packages = readdirSync(join(ROOT, 'packages'))
  .sort()
  .map((name) => join(ROOT, 'packages', name, 'package.json'))
  .filter((file) => existsSync(file))
  .map((file) => JSON.parse(readFileSync(file, 'utf8')) as PackageJson)
  .filter((json) => !json.private);
const tarballName = (json: PackageJson) =>
  `${json.name.replace(/^@/, '').replace('/', '-')}-${json.version}.tgz`;

const given = process.argv.indexOf('--tarballs');
const work = given === -1 ? mkdtempSync(join(tmpdir(), 'inboxkit-release-')) : undefined;
const tarballs = given === -1 ? work! : resolve(process.argv[given + 1] ?? '');
try {
  if (work) {
    console.log(
      `[release:check ${elapsed()}] npm pack ${packages.length} packages (each one's prepack builds it)`,
    );
    const packed = await run('npm', [
      'pack',
      '--pack-destination',
      tarballs,
      ...packages.flatMap((p) => ['-w', p.name]),
      '--loglevel=error',
    ]);
    if (packed.code !== 0) throw new Error(`npm pack failed:\n${packed.output}`);
  }
  for (const json of packages) {
    if (!existsSync(join(tarballs, tarballName(json))))
      throw new Error(`no ${tarballName(json)} in ${tarballs}`);
  }

  console.log(`[release:check ${elapsed()}] publint, are-the-types-wrong, internal versions`);
  const acceptedAnywhere = new Set<string>();
  const versions = new Map(packages.map((p) => [p.name, p.version]));
  for (const json of packages) {
    const data = readFileSync(join(tarballs, tarballName(json)));
    const notes: string[] = [];

    const lint = await publint({
      pack: { tarball: data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) },
      level: 'suggestion',
      strict: true,
    });
    for (const message of lint.messages) {
      const text = `publint ${message.type} ${message.code}: ${formatMessage(message, lint.pkg) ?? ''}`;
      if (message.type === 'suggestion') notes.push(text);
      else problem(`${json.name}: ${text}`);
    }

    const analysis = await checkPackage(createPackageFromTarballData(new Uint8Array(data)));
    if (!('problems' in analysis)) {
      problem(`${json.name}: are-the-types-wrong found no types in the tarball`);
    } else {
      const accepted = new Set<string>();
      for (const found of analysis.problems) {
        const where = 'entrypoint' in found ? ` (${found.entrypoint}, ${found.resolutionKind})` : '';
        if ('resolutionKind' in found && found.resolutionKind === 'node10') continue;
        if (ACCEPTED[found.kind]) {
          accepted.add(found.kind);
          continue;
        }
        problem(
          `${json.name}: are-the-types-wrong ${found.kind}${where}: see https://github.com/arethetypeswrong/arethetypeswrong.github.io/blob/main/docs/problems/${found.kind}.md`,
        );
      }
      const entrypoints = Object.keys(analysis.entrypoints);
      const declared = Object.keys(json.exports ?? {});
      if (entrypoints.sort().join() !== declared.sort().join()) {
        problem(
          `${json.name}: are-the-types-wrong checked ${entrypoints.join(', ')}, package.json exports ${declared.join(', ')}`,
        );
      }
      for (const kind of accepted) notes.push(`accepted ${kind}`);
      for (const kind of accepted) acceptedAnywhere.add(kind);
      notes.unshift(`${entrypoints.length} entry point(s) × node16 from ESM, node16 from CJS, bundler`);
    }

    for (const [name, range] of Object.entries({ ...json.dependencies, ...json.peerDependencies })) {
      const sibling = versions.get(name);
      // Siblings pin each other exactly (changeset version rewrites the pins when it bumps a sibling).
      if (sibling && range !== sibling) {
        problem(
          `${json.name}: depends on ${name}@${range}, not on the workspace's ${name}@${sibling} exactly`,
        );
      }
    }
    console.log(`  ${json.name}@${json.version}: ${notes.join('; ')}`);
  }

  for (const kind of acceptedAnywhere)
    console.log(`  (${kind} accepted: ${ACCEPTED[kind as Problem['kind']]})`);

  console.log(`[release:check ${elapsed()}] npm publish --dry-run of each tarball`);
  const published = await Promise.all(
    packages.map((json) =>
      run(
        'npm',
        [
          'publish',
          '--dry-run',
          '--access',
          'public',
          '--loglevel=notice',
          join(tarballs, tarballName(json)),
        ],
        tarballs,
      ),
    ),
  );
  packages.forEach((json, i) => {
    const { code, output } = published[i]!;
    if (code !== 0 || !output.includes(`+ ${json.name}@${json.version}`)) {
      problem(
        `${json.name}: npm publish --dry-run exited with ${code}:\n${output.split('\n').slice(-15).join('\n')}`,
      );
    } else {
      const files = /total files:\s*(\d+)/.exec(output)?.[1] ?? '?';
      const size = /package size:\s*([^\n]+)/.exec(output)?.[1] ?? '?';
      console.log(`  ${json.name}@${json.version}: npm publish --dry-run ok (${files} files, ${size})`);
    }
  });
} finally {
  if (work) rmSync(work, { recursive: true, force: true });
}

console.log(
  `[release:check ${elapsed()}] ${problems.length === 0 ? `${packages.length} packages ready to publish` : `${problems.length} problem(s)`}`,
);
process.exitCode = problems.length === 0 ? 0 : 1;
