// The consumers' payload schemas for edit and retry (`--schemas MODULE`): a module of the application that
// exports `schemas`, its consumers' schemas by consumer name (zod, valibot, ArkType or any Standard Schema,
// or anything with zod's `safeParse`) — the same objects its `idempotentConsumer({ schema })` use, so an edit
// is checked exactly as the consumer will check the replayed message. The module may also export
// `fingerprints`, its consumers' `fingerprint` options by consumer name (`{ exclude: [...] }`, `{ include: [...] }`
// or a function): an edit is then fingerprinted as that consumer fingerprints it, which the amended row must
// hold or the replay is a `payload-mismatch` again. The CLI cannot know a consumer's options any other way.

import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

import { checkFingerprintResolver, ConfigurationError } from '@inboxkit/core';
import type { FingerprintInput, FingerprintResolver, PayloadSchema } from '@inboxkit/core';

/** Payload schemas by consumer name. */
export type ConsumerSchemas = Readonly<Record<string, PayloadSchema<unknown>>>;

/** Consumers' `fingerprint` options by consumer name. */
export type ConsumerFingerprints = Readonly<Record<string, FingerprintResolver<FingerprintInput>>>;

/** What a `--schemas` module gives: `schemas`, and `fingerprints` (empty when it exports none). */
export interface ConsumerModule {
  readonly schemas: ConsumerSchemas;
  readonly fingerprints: ConsumerFingerprints;
}

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
  return (await loadConsumerModule(path, cwd)).schemas;
}

/**
 * Imports `path` (relative to `cwd`) and returns its `schemas` and its optional `fingerprints` export, each
 * checked: a module that cannot be loaded, has no `schemas` object, holds something that is not a schema, or a
 * `fingerprints` entry that is not a consumer's `fingerprint` option is a `ConfigurationError` saying which.
 *
 * @example
 * // consumers.js: export const schemas = { orders: Order };
 * //               export const fingerprints = { orders: { exclude: ['sentAt'] } };
 * const { schemas, fingerprints } = await loadConsumerModule('./consumers.js', process.cwd());
 */
export async function loadConsumerModule(path: string, cwd: string): Promise<ConsumerModule> {
  const file = resolve(cwd, path);
  let module: { schemas?: unknown; fingerprints?: unknown };
  try {
    module = (await import(pathToFileURL(file).href)) as { schemas?: unknown; fingerprints?: unknown };
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
  const fingerprints = module.fingerprints ?? {};
  if (typeof fingerprints !== 'object' || fingerprints === null) {
    throw new ConfigurationError(
      `--schemas ${file}: \`fingerprints\` must be an object (export const fingerprints = { <consumer>: { exclude: [...] } })`,
    );
  }
  for (const [consumer, resolver] of Object.entries(fingerprints)) {
    try {
      checkFingerprintResolver(resolver as FingerprintResolver<FingerprintInput>, `fingerprints.${consumer}`);
    } catch (error) {
      // Its message says what to change; the module's path is what it lacks.
      throw new ConfigurationError(`--schemas ${file}: ${(error as Error).message}`);
    }
  }
  return { schemas: schemas as ConsumerSchemas, fingerprints: fingerprints as ConsumerFingerprints };
}
