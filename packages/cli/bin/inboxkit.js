#!/usr/bin/env node
// The `inboxkit` command. Runs the compiled `dist/` when it was built; on a fresh clone (no build yet) it runs
// the TypeScript sources through tsx, resolving the other @inboxkit packages to their sources as well.
import { existsSync } from 'node:fs';
import { register } from 'node:module';
import { fileURLToPath } from 'node:url';

const distEntry = new URL('../dist/index.js', import.meta.url);
const sourceEntry = new URL('../src/index.ts', import.meta.url);

async function loadFromSource() {
  const { register: registerTsx } = await import('tsx/esm/api');
  registerTsx();
  // Hooks registered later run first: this one adds the `@inboxkit/source` export condition, then tsx
  // transpiles whatever that resolves to.
  register(
    'data:text/javascript,' +
      encodeURIComponent(
        'export async function resolve(specifier, context, next) {' +
          " const conditions = context.conditions.includes('@inboxkit/source') ? context.conditions : ['@inboxkit/source', ...context.conditions];" +
          ' return next(specifier, { ...context, conditions }); }',
      ),
  );
  return import(sourceEntry.href);
}

async function load() {
  if (!existsSync(fileURLToPath(distEntry))) return loadFromSource();
  try {
    return await import(distEntry.href);
  } catch (error) {
    // A built CLI whose sibling packages were not built: fall back to the sources.
    if (error && error.code === 'ERR_MODULE_NOT_FOUND') return loadFromSource();
    throw error;
  }
}

// The AWS SDK warns on every start about Node versions it will drop in the future; an operator's terminal is
// not the place for it. Every other warning is printed as Node would.
process.removeAllListeners('warning');
process.on('warning', (warning) => {
  if (`${warning.name} ${warning.message}`.includes('NodeVersionSupportWarning')) return;
  process.stderr.write(`${warning.name}: ${warning.message}\n`);
});

const { main } = await load();
process.exitCode = await main(process.argv.slice(2));
