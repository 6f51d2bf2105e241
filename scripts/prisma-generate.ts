// Generates the Prisma clients of the repository (packages/data's tests, examples/data-layers), which are not
// committed: `npm install` runs this (the root package's postinstall), so typecheck, lint, tests and the example
// find them in a fresh clone. Offline except for the npm registry: `prisma generate` runs no engine, and
// PRISMA_SCHEMA_ENGINE_BINARY=/bin/false stops the Prisma 7 CLI from downloading its migration engine first
// (CHECKPOINT_DISABLE=1 its version check). A schema whose client is already generated from the same schema
// text by the same CLI version is skipped (stamps in node_modules/.cache/prisma-generate).
//
//   node --import tsx scripts/prisma-generate.ts [--force]

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
/** Each schema's generator writes `./generated` beside it. */
const SCHEMAS = ['packages/data/test/prisma/schema.prisma', 'examples/data-layers/prisma/schema.prisma'];
const CLI = join(ROOT, 'node_modules/prisma/build/index.js');

if (!existsSync(CLI)) {
  // Installed without dev dependencies: nothing here needs the clients then.
  console.log('prisma-generate: the prisma CLI is not installed (dev dependencies omitted); skipped');
  process.exit(0);
}
const version = (
  JSON.parse(readFileSync(join(ROOT, 'node_modules/prisma/package.json'), 'utf8')) as { version: string }
).version;
const force = process.argv.includes('--force');

// Stamps outside the generated folders, which Prisma refuses to write into when they hold foreign files.
const STAMPS = join(ROOT, 'node_modules/.cache/prisma-generate');
mkdirSync(STAMPS, { recursive: true });

for (const schema of SCHEMAS) {
  const path = join(ROOT, schema);
  const output = join(dirname(path), 'generated');
  const stamp = join(STAMPS, schema.replaceAll('/', '_'));
  const hash = createHash('sha256').update(version).update(readFileSync(path)).digest('hex');
  const generated = existsSync(join(output, 'client.ts'));
  if (!force && generated && existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === hash) continue;
  // A folder left without its client (a checkout that deleted it) is not Prisma's any more: start afresh.
  if (!generated) rmSync(output, { recursive: true, force: true });
  execFileSync(process.execPath, [CLI, 'generate', '--schema', path, '--no-hints'], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? '/bin/false',
      CHECKPOINT_DISABLE: '1',
      PRISMA_HIDE_UPDATE_MESSAGE: '1',
    },
  });
  writeFileSync(stamp, `${hash}\n`);
  console.log(`prisma-generate: ${schema} → generated/ (prisma ${version})`);
}
