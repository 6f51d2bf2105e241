// What counts as "the same payload": a consumer's `fingerprint` option (and the HTTP middleware's request
// fingerprint) may leave volatile fields out (`exclude`), keep only the fields that carry the intent (`include`),
// or compute the identity with a function. The projection is then fingerprinted canonically (`canonicalJson`).

import { ConfigurationError, InboxkitError, type InboxkitErrorOptions } from './errors.js';

/**
 * Which part of a decoded payload is its identity. Dot paths walk plain objects (`'meta.traceId'` is the member
 * `traceId` of the member `meta`); arrays and other values are kept or dropped whole.
 *
 * - `{ exclude: ['sentAt', 'meta.traceId'] }`: everything but these members (a missing member is fine).
 * - `{ include: ['orderId', 'amount'] }`: only these members (a missing one is left out).
 * - a function: its result, canonically fingerprinted. A throw dead-letters the message (`fingerprint-failed`).
 */
export type FingerprintFields =
  | { readonly include: readonly string[]; readonly exclude?: undefined }
  | { readonly exclude: readonly string[]; readonly include?: undefined };

/** A resolver of a payload's identity: include/exclude dot paths, or a function of `T` whose result is fingerprinted. */
export type FingerprintResolver<T> = FingerprintFields | ((input: T) => unknown);

/** A fingerprint resolver threw, or answered what cannot be fingerprinted. Code `FINGERPRINT_FAILED`. */
export class FingerprintError extends InboxkitError {
  constructor(message: string, options: InboxkitErrorOptions = {}) {
    super('FINGERPRINT_FAILED', message, false, options);
  }
}

/** A checked resolver: `project(input, value)` is what gets fingerprinted. */
export interface CheckedFingerprintResolver<T> {
  readonly project: (input: T, value: unknown) => unknown;
}

/**
 * Validates a `fingerprint` option (`option` names it in errors) and returns its projection, or `undefined`
 * when none was given. Throws a `ConfigurationError` saying what to change.
 */
export function checkFingerprintResolver<T>(
  resolver: FingerprintResolver<T> | undefined,
  option: string,
): CheckedFingerprintResolver<T> | undefined {
  if (resolver === undefined) return undefined;
  if (typeof resolver === 'function') return { project: (input) => resolver(input) };
  if (typeof resolver !== 'object' || resolver === null) {
    throw new ConfigurationError(
      `${option} must be { include: [paths] }, { exclude: [paths] } or a function, got ${resolver === null ? 'null' : typeof resolver}`,
    );
  }
  const { include, exclude } = resolver as { include?: unknown; exclude?: unknown };
  if (include !== undefined && exclude !== undefined) {
    throw new ConfigurationError(`${option} takes include or exclude, not both: keep one list`);
  }
  const list = include ?? exclude;
  const which = include !== undefined ? 'include' : 'exclude';
  if (list === undefined) throw new ConfigurationError(`${option} needs include: [paths] or exclude: [paths]`);
  if (!Array.isArray(list) || list.length === 0) {
    throw new ConfigurationError(`${option}.${which} must be a non-empty array of dot paths such as 'meta.traceId'`);
  }
  const paths = list.map((path: unknown) => {
    if (typeof path !== 'string' || path === '' || path.split('.').some((segment) => segment === '')) {
      throw new ConfigurationError(
        `${option}.${which} has an invalid path ${JSON.stringify(path)}: each must be a non-empty dot path such as 'meta.traceId'`,
      );
    }
    return path.split('.');
  });
  return include !== undefined
    ? { project: (_input, value) => pickPaths(value, paths) }
    : { project: (_input, value) => omitPaths(value, paths) };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !ArrayBuffer.isView(value);
}

/** `value` without the members at `paths`; copies only the objects along a path, never mutates `value`. */
export function omitPaths(value: unknown, paths: readonly (readonly string[])[]): unknown {
  let out = value;
  for (const path of paths) out = omit(out, path, 0);
  return out;
}

function omit(value: unknown, path: readonly string[], at: number): unknown {
  if (!isRecord(value) || !Object.prototype.hasOwnProperty.call(value, path[at]!)) return value;
  const key = path[at]!;
  const copy: Record<string, unknown> = { ...value };
  if (at === path.length - 1) delete copy[key];
  else copy[key] = omit(value[key], path, at + 1);
  return copy;
}

/** Only the members of `value` at `paths`, in their nesting; a missing path is left out. */
export function pickPaths(value: unknown, paths: readonly (readonly string[])[]): unknown {
  const out: Record<string, unknown> = {};
  for (const path of paths) {
    let current: unknown = value;
    let found = true;
    for (const key of path) {
      if (!isRecord(current) || !Object.prototype.hasOwnProperty.call(current, key)) {
        found = false;
        break;
      }
      current = current[key];
    }
    if (!found) continue;
    let target = out;
    for (let i = 0; i < path.length - 1; i++) {
      const key = path[i]!;
      if (!isRecord(target[key])) target[key] = {};
      target = target[key] as Record<string, unknown>;
    }
    target[path[path.length - 1]!] = current;
  }
  return out;
}
