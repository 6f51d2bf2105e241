// The consumers' payload schemas for edit and retry (`--schemas MODULE`): a module of the application that
// exports `schemas`, its consumers' schemas by consumer name (zod, valibot, ArkType or any Standard Schema,
// or anything with zod's `safeParse`) — the same objects its `idempotentConsumer({ schema })` use, so an edit
// is checked exactly as the consumer will check the replayed message.

import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

import { ConfigurationError } from '@inboxkit/core';
import type { PayloadSchema } from '@inboxkit/core';

/** Payload schemas by consumer name. */
export type ConsumerSchemas = Readonly<Record<string, PayloadSchema<unknown>>>;

function isSchema(value: unknown): value is PayloadSchema<unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const standard = (value as { '~standard'?: { validate?: unknown } })['~standard'];
  return (
    typeof standard?.validate === 'function' ||
    typeof (value as { safeParse?: unknown }).safeParse === 'function'
  );
}

/**
 * Imports `path` (relative to `cwd`) and returns its `schemas` export. A module that cannot be loaded, has no
 * `schemas` object, or holds something that is not a schema is a `ConfigurationError` saying which.
 *
 * @example
 * // consumer-schemas.js: export const schemas = { orders: z.object({ orderId: z.string() }) };
 * const schemas = await loadSchemas('./consumer-schemas.js', process.cwd());
 */
export async function loadSchemas(path: string, cwd: string): Promise<ConsumerSchemas> {
  const file = resolve(cwd, path);
  let module: { schemas?: unknown };
  try {
    module = (await import(pathToFileURL(file).href)) as { schemas?: unknown };
  } catch (error) {
    throw new ConfigurationError(`cannot load --schemas ${file}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const schemas = module.schemas;
  if (typeof schemas !== 'object' || schemas === null) {
    throw new ConfigurationError(
      `--schemas ${file} exports no \`schemas\` object (export const schemas = { <consumer>: <schema> })`,
    );
  }
  for (const [consumer, schema] of Object.entries(schemas)) {
    if (!isSchema(schema)) {
      throw new ConfigurationError(
        `--schemas ${file}: schemas.${consumer} is not a schema (Standard Schema or zod-style safeParse)`,
      );
    }
  }
  return schemas as ConsumerSchemas;
}
