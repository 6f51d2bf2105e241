// The request fingerprint: SHA-256 of method + route + the canonical body, so the same key sent with another
// payload is caught (422) instead of replaying a response that belongs to a different request.

import { createHash } from 'node:crypto';
import { canonicalJson } from '@inboxkit/core';

/**
 * The fingerprint of a request. JSON bodies are canonicalized (key order does not matter); bytes are hashed
 * as they are.
 *
 * @example
 * requestFingerprint('POST', '/payments', { amount: 1 }) === requestFingerprint('post', '/payments', { amount: 1 });
 */
export function requestFingerprint(method: string, route: string, body: unknown): string {
  const canonical =
    body instanceof Uint8Array
      ? `bytes:${Buffer.from(body).toString('base64')}`
      : `json:${canonicalJson(body ?? null)}`;
  return createHash('sha256').update(`${method.toUpperCase()}\n${route}\n${canonical}`).digest('hex');
}
