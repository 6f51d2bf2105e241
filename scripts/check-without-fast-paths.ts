// Proves that the Kysely seam's fast paths are a removable folder: copies @inboxkit/core's and @inboxkit/data's
// sources into a temporary directory, deletes packages/core/src/kysely/fast, replaces the one import of it
// (kysely-seam.ts: `pgFastPaths`) by "no fast path", and typechecks both packages' src there. It fails when a file
// outside that folder imports from it again (as postgres/index.ts did with the SQL-literal helper, which broke
// @inboxkit/data). The eslint rule no-restricted-imports (eslint.config.js) says the same at lint time; this
// check is the deletion itself. Run by packages/data/test/without-fast-paths.test.ts (so by npm test), or alone:
//   node --import tsx scripts/check-without-fast-paths.ts
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The one import of the folder, and what stands for it once the folder is gone: a probe that finds no fast path. */
const FAST_IMPORT =
  "import { pgFastPaths, type PgFastPaths, type PgFastPathsProbe } from './fast/pg-fast-paths.js';";
const NO_FAST_PATHS = `interface PgFastPaths {
  begin(connection: DatabaseConnection, first: SqlStatement): Promise<SqlRow[]>;
  commit(connection: DatabaseConnection): Promise<string | undefined>;
}
interface PgFastPathsProbe {
  known(): Promise<PgFastPaths | undefined>;
  readonly statements: StatementFastPath | undefined;
}
const pgFastPaths = (..._: unknown[]): PgFastPathsProbe => ({ known: async () => undefined, statements: undefined });`;

export interface WithoutFastPathsResult {
  readonly ok: boolean;
  /** tsc's output (the errors, when not ok). */
  readonly output: string;
}

/** Typechecks core's and data's sources with the fast-path folder deleted, in a temporary copy of `root`. */
export function checkWithoutFastPaths(root = ROOT): WithoutFastPathsResult {
  const dir = mkdtempSync(join(tmpdir(), 'inboxkit-without-fast-'));
  try {
    for (const pkg of ['core', 'data']) {
      cpSync(join(root, 'packages', pkg, 'src'), join(dir, 'packages', pkg, 'src'), { recursive: true });
      cpSync(join(root, 'packages', pkg, 'package.json'), join(dir, 'packages', pkg, 'package.json'));
      if (existsSync(join(root, 'packages', pkg, 'node_modules'))) {
        symlinkSync(
          join(root, 'packages', pkg, 'node_modules'),
          join(dir, 'packages', pkg, 'node_modules'),
          'dir',
        );
      }
    }
    symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
    cpSync(join(root, 'tsconfig.base.json'), join(dir, 'tsconfig.base.json'));
    rmSync(join(dir, 'packages/core/src/kysely/fast'), { recursive: true });
    const seamFile = join(dir, 'packages/core/src/kysely/kysely-seam.ts');
    const seam = readFileSync(seamFile, 'utf8');
    if (!seam.includes(FAST_IMPORT)) {
      return {
        ok: false,
        output: `kysely-seam.ts no longer has the one import of the fast paths this check replaces:\n  ${FAST_IMPORT}`,
      };
    }
    writeFileSync(seamFile, seam.replace(FAST_IMPORT, NO_FAST_PATHS));
    // @inboxkit/core resolves to the copy (not node_modules' link to the real package, which has the folder).
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        extends: './tsconfig.base.json',
        compilerOptions: {
          noEmit: true,
          paths: {
            '@inboxkit/core': ['./packages/core/src/index.ts'],
            '@inboxkit/core/*': ['./packages/core/src/*/index.ts'],
          },
        },
        include: ['packages/core/src', 'packages/data/src'],
      }),
    );
    try {
      const tsc = join(root, 'node_modules/typescript/bin/tsc');
      const output = execFileSync(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], {
        encoding: 'utf8',
        stdio: 'pipe',
      });
      return { ok: true, output };
    } catch (error) {
      const failed = error as { stdout?: string; stderr?: string; message: string };
      return { ok: false, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` || failed.message };
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const result = checkWithoutFastPaths();
  if (result.ok)
    console.log(
      '[without fast paths] @inboxkit/core and @inboxkit/data compile with packages/core/src/kysely/fast deleted',
    );
  else {
    console.error(
      `[without fast paths] with packages/core/src/kysely/fast deleted, the sources do not compile:\n${result.output}`,
    );
    process.exitCode = 1;
  }
}
