#!/usr/bin/env node
// The `inboxkit` command. An installed package runs its compiled dist/ (plain JavaScript, no TypeScript loader).
// In a checkout of the repository (recognised by its tsconfig.json, which is not published) it runs the
// TypeScript sources through tsx instead, resolving the other @inboxkit packages to their sources too, so the
// command never runs a stale build there and needs none.
import { existsSync } from 'node:fs';
import { register } from 'node:module';

const inCheckout = existsSync(new URL('../tsconfig.json', import.meta.url));

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
  return import(new URL('../src/index.ts', import.meta.url).href);
}

// The AWS SDK warns on every start about Node versions it will drop in the future; an operator's terminal is
// not the place for it. Every other warning is printed as Node would.
process.removeAllListeners('warning');
process.on('warning', (warning) => {
  if (`${warning.name} ${warning.message}`.includes('NodeVersionSupportWarning')) return;
  process.stderr.write(`${warning.name}: ${warning.message}\n`);
});

const { main } = inCheckout ? await loadFromSource() : await import('../dist/index.js');
process.exitCode = await main(process.argv.slice(2));
