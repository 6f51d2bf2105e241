// A stored response as the fast path keeps it: the request's fingerprint and the response exactly as Postgres
// stores it (status, allow-listed headers, body bytes), in one string. Keyed by a hash of the key's scope
// (principal, method, route, key), so a principal's id never appears in a cache key.

import { createHash } from 'node:crypto';
import { validateHeaderName, validateHeaderValue } from 'node:http';
import type { HttpResponse } from './http-response.js';
import { replayedHeaders } from './replay-headers.js';

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

/** What Postgres would replay, which a response read back from the cache must be to be served. */
export interface ReplayRule {
  /** The statuses stored for replays (the `storeStatus` option). */
  readonly storeStatus: (status: number) => boolean;
  /** The headers replays carry (the `replayHeaders` option). */
  readonly replayHeaders: ReadonlySet<string>;
}

/** Canonical base64 (what `encodeCachedResponse` writes): Node's decoder would skip anything else silently. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Reads a cache value back; undefined for anything Postgres would not replay as it stands (the caller then asks
 * Postgres): not the shape `encodeCachedResponse` writes, a status that is not an integer in 100–599 or that
 * `rule.storeStatus` refuses, a header outside `rule.replayHeaders` (the rule applied when Postgres stores a
 * response) or one Node would refuse to send, a body that is not canonical base64. A value is believed only
 * whole.
 */
export function decodeCachedResponse(value: string, rule: ReplayRule): CachedResponse | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const { f, s, h, b } = parsed as Record<string, unknown>;
  if (typeof f !== 'string' || typeof s !== 'number' || typeof b !== 'string' || !BASE64.test(b))
    return undefined;
  if (!Number.isInteger(s) || s < 100 || s > 599 || !storedStatus(rule, s)) return undefined;
  if (typeof h !== 'object' || h === null || Array.isArray(h)) return undefined;
  const headers: Record<string, string> = {};
  for (const [name, v] of Object.entries(h)) {
    if (typeof v !== 'string' || !sendable(name, v)) return undefined;
    headers[name] = v;
  }
  if (Object.keys(replayedHeaders(headers, rule.replayHeaders)).length !== Object.keys(headers).length)
    return undefined;
  return { fingerprint: f, status: s, headers, body: Buffer.from(b, 'base64') };
}

function storedStatus(rule: ReplayRule, status: number): boolean {
  try {
    return rule.storeStatus(status);
  } catch {
    return false;
  }
}

/** True when Node would send this header as it is (no line break, no invalid character). */
function sendable(name: string, value: string): boolean {
  try {
    validateHeaderName(name);
    validateHeaderValue(name, value);
    return true;
  } catch {
    return false;
  }
}
