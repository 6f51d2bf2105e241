// The browser bundle's size as an app gets it: esbuild bundles, tree-shakes and minifies an entry that uses the
// whole queue (createIntentQueue with its IndexedDB default, the storages and Background Sync), then gzip -9.
// Fails above the budget (5 kB min+gzip). Run by the client's size test in `npm test`, or alone:
//   npm run size -w packages/client

import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

/** The budget of the issue: ≤ 5 kB min+gzip. */
export const BUDGET_BYTES = 5 * 1024;

const ENTRY = `
import { createIntentQueue, memoryStorage, indexedDbStorage, requestBackgroundSync, handleBackgroundSync } from '@inboxkit/client';
globalThis.client = { createIntentQueue, memoryStorage, indexedDbStorage, requestBackgroundSync, handleBackgroundSync };
`;

/** Bundles the entry for browsers (es2020, minified) and returns its minified and gzipped byte counts. */
export async function measureBundle(): Promise<{ minified: number; gzipped: number }> {
  const result = await build({
    stdin: { contents: ENTRY, resolveDir: fileURLToPath(new URL('.', import.meta.url)), loader: 'js' },
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2020',
    conditions: ['@inboxkit/source'],
    write: false,
    logLevel: 'silent',
  });
  const code = result.outputFiles[0]!.contents;
  return { minified: code.length, gzipped: gzipSync(code, { level: 9 }).length };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { minified, gzipped } = await measureBundle();
  console.log(
    `@inboxkit/client browser bundle: ${minified} B minified, ${gzipped} B min+gzip (budget ${BUDGET_BYTES} B)`,
  );
  if (gzipped > BUDGET_BYTES) process.exit(1);
}
