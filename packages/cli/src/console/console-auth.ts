// Who may talk to the console. On loopback the operating system's users are the boundary; anywhere else an
// operator must have passed a credential, and every request must carry it (HTTP basic auth, any user name, the
// credential as password — what a browser prompts for — or `Authorization: Bearer`). The credential is compared
// in constant time and never written anywhere.

import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';

/** The shortest credential accepted: a guessable one on a network port is worse than none. */
export const MIN_CREDENTIAL_LENGTH = 16;

/**
 * Why `credential` is too easy to guess, or `undefined`: shorter than `MIN_CREDENTIAL_LENGTH`, or with fewer
 * than 8 different characters (`aaaaaaaaaaaaaaaa`, `abcabcabcabcabca`, `0000111100001111`), or a run of
 * evenly spaced characters (`abcdefghijklmnop`, `0123456789…`). Says what is wrong, never the credential.
 *
 * @example
 * credentialWeakness('aaaaaaaaaaaaaaaa'); // 'it has only 1 different character(s); …'
 * credentialWeakness(randomBytes(24).toString('hex')); // undefined
 */
export function credentialWeakness(credential: string): string | undefined {
  const chars = [...credential];
  if (chars.length < MIN_CREDENTIAL_LENGTH)
    return `the console credential is shorter than ${MIN_CREDENTIAL_LENGTH} characters: use a longer one (for example \`openssl rand -hex 24\`)`;
  const distinct = new Set(chars).size;
  const fix =
    'use a random one (for example `openssl rand -hex 24 > token-file`, then --token-file token-file)';
  if (distinct < MIN_DISTINCT_CHARACTERS)
    return `the console credential is too easy to guess: it has only ${distinct} different character(s), at least ${MIN_DISTINCT_CHARACTERS} are needed; ${fix}`;
  const step = chars[1]!.codePointAt(0)! - chars[0]!.codePointAt(0)!;
  if (chars.every((c, i) => i === 0 || c.codePointAt(0)! - chars[i - 1]!.codePointAt(0)! === step))
    return `the console credential is too easy to guess: it is a run of evenly spaced characters; ${fix}`;
  return undefined;
}

/** Fewer different characters than this make a credential a pattern, whatever its length. */
const MIN_DISTINCT_CHARACTERS = 8;

/** True for an address only this machine can reach (127.0.0.0/8, ::1, `localhost`). */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  if (bare === 'localhost') return true;
  if (isIP(bare) === 4) return bare.startsWith('127.');
  if (isIP(bare) === 6) return bare === '::1' || /^::ffff:127\./i.test(bare);
  return false;
}

/** The result of checking a request's `Authorization` header. */
export type AuthCheck =
  | {
      readonly ok: true;
      /** The basic-auth user name, when one was given. */ readonly user: string | undefined;
    }
  | { readonly ok: false };

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/**
 * Checks `authorization` against `credential` (`undefined` = none required: every request passes). Basic auth
 * takes any user name and the credential as password; Bearer takes the credential.
 */
export function checkAuthorization(
  authorization: string | undefined,
  credential: string | undefined,
): AuthCheck {
  if (credential === undefined) return { ok: true, user: undefined };
  if (authorization === undefined) return { ok: false };
  const space = authorization.indexOf(' ');
  if (space < 0) return { ok: false };
  const scheme = authorization.slice(0, space).toLowerCase();
  const value = authorization.slice(space + 1).trim();
  let user: string | undefined;
  let secret: string;
  if (scheme === 'bearer') {
    secret = value;
  } else if (scheme === 'basic') {
    const decoded = Buffer.from(value, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return { ok: false };
    user = decoded.slice(0, colon).trim() || undefined;
    secret = decoded.slice(colon + 1);
  } else {
    return { ok: false };
  }
  // Digests of equal length, so timingSafeEqual neither throws nor tells the credential's length.
  return timingSafeEqual(digest(secret), digest(credential)) ? { ok: true, user } : { ok: false };
}

/**
 * True when the `Host` header names this server: on a loopback bind only `localhost`, `127.0.0.1` or `[::1]`
 * with the right port are accepted, so a web page that rebinds its own domain to 127.0.0.1 cannot reach it.
 */
export function acceptableHost(hostHeader: string | undefined, bind: string, port: number): boolean {
  if (!isLoopback(bind)) return true;
  if (hostHeader === undefined) return false;
  const match = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(hostHeader.trim().toLowerCase());
  if (match === null) return false;
  const [, host, portText] = match;
  return isLoopback(host!) && (portText === undefined ? port === 80 : Number(portText) === port);
}
