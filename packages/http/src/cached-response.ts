// A stored response as the fast path keeps it: the request's fingerprint and the response exactly as Postgres
// stores it (status, allow-listed headers, body bytes), in one string. Keyed by a hash of the key's scope
// (principal, method, route, key), so a principal's id never appears in a cache key.

import { createHash } from 'node:crypto';
import type { HttpResponse } from './http-response.js';

/** The fast path's scope for Idempotency-Key responses (consumers use their own names). */
export const HTTP_FAST_PATH_SCOPE = 'inboxkit-http';

/** A stored response read back from the cache. */
export interface CachedResponse {
  readonly fingerprint: string;
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

/** The cache id of a key's scope: SHA-256 of principal, method, route and key (collision-free in practice). */
export function cachedResponseId(principal: string, method: string, route: string, key: string): string {
  return createHash('sha256')
    .update(JSON.stringify([principal, method, route, key]))
    .digest('hex');
}

/** The cache value of a stored response (`headers`: the allow-listed ones, as stored in Postgres). */
export function encodeCachedResponse(
  fingerprint: string,
  response: Pick<HttpResponse, 'status' | 'body'>,
  headers: Readonly<Record<string, string>>,
): string {
  return JSON.stringify({
    f: fingerprint,
    s: response.status,
    h: headers,
    b: response.body.toString('base64'),
  });
}

/** Reads a cache value back; undefined for anything that is not one (the caller then asks Postgres). */
export function decodeCachedResponse(value: string): CachedResponse | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { f, s, h, b } = parsed as Record<string, unknown>;
  if (typeof f !== 'string' || typeof s !== 'number' || typeof b !== 'string') return undefined;
  if (typeof h !== 'object' || h === null || Array.isArray(h)) return undefined;
  const headers: Record<string, string> = {};
  for (const [name, v] of Object.entries(h)) {
    if (typeof v !== 'string') return undefined;
    headers[name] = v;
  }
  return { fingerprint: f, status: s, headers, body: Buffer.from(b, 'base64') };
}
