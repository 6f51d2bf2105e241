// Connection strings carry passwords in several places: the userinfo of a URL, a `?password=` query parameter,
// a key/value `password='…'`. The CLI prints a connection string only through `maskConnectionString`, and
// learns the secrets to scrub from free text through `connectionStringSecrets`.

import { parseKeyValueConnectionString } from './key-value-connection-string.js';

/** What a masked secret is replaced with. */
export const MASK = '***';

/**
 * True for the names of connection parameters whose value is, or locates, a secret: `password`,
 * `sslpassword`, `passfile`, `sslkey`, tokens, secrets and API keys (any case).
 */
export function isSecretParameter(name: string): boolean {
  return /pass|pwd|secret|token|credential|sslkey|api_?key|access_?key|private_?key/i.test(name);
}

/** `postgres://`, `amqp://`, and node-postgres' `socket:/path?db=…`. */
const URL_SCHEME = /^([a-z][a-z0-9+.-]*:(?:\/\/)?)/i;

/** True when `text` is written as a URL (`postgres://…`, `amqp://…`); otherwise it is key/value or a name. */
export function isUrlForm(text: string): boolean {
  return URL_SCHEME.test(text.trim());
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

/**
 * Where the userinfo of a URL ends (the index of its `@` in `rest`, the text after `scheme://`), or -1. Passwords
 * with a raw `/`, `?`, `#` or `@` are malformed but common; the last `@` before the query (or, failing that,
 * anywhere) is taken, so such a password is masked whole even if the host is masked with it.
 */
function userinfoEnd(rest: string): number {
  const query = rest.search(/[?#]/);
  const beforeQuery = query < 0 ? rest : rest.slice(0, query);
  const at = beforeQuery.lastIndexOf('@');
  return at >= 0 ? at : rest.lastIndexOf('@');
}

/** A URL-form connection string cut where its secrets are. */
export interface ConnectionUrlParts {
  readonly scheme: string;
  readonly user: string;
  /** Undefined when the userinfo has no `:`. */
  readonly password: string | undefined;
  /** Everything after the userinfo's `@` (or after `scheme://` when there is no userinfo). */
  readonly tail: string;
  readonly hasUserinfo: boolean;
}

/** Splits a URL-form connection string at its userinfo; `undefined` when `text` is not URL-form. */
export function splitConnectionUrl(text: string): ConnectionUrlParts | undefined {
  const scheme = URL_SCHEME.exec(text)?.[1];
  if (scheme === undefined) return undefined;
  const rest = text.slice(scheme.length);
  const at = userinfoEnd(rest);
  if (at < 0) return { scheme, user: '', password: undefined, tail: rest, hasUserinfo: false };
  const userinfo = rest.slice(0, at);
  const colon = userinfo.indexOf(':');
  return {
    scheme,
    user: colon < 0 ? userinfo : userinfo.slice(0, colon),
    password: colon < 0 ? undefined : userinfo.slice(colon + 1),
    tail: rest.slice(at + 1),
    hasUserinfo: true,
  };
}

/** The `key=value` pairs of the query of `tail`, with their positions. */
function queryParameters(tail: string): { key: string; value: string; start: number; end: number }[] {
  const q = tail.indexOf('?');
  if (q < 0) return [];
  const hash = tail.indexOf('#', q);
  const end = hash < 0 ? tail.length : hash;
  const out: { key: string; value: string; start: number; end: number }[] = [];
  let pos = q + 1;
  for (const pair of tail.slice(q + 1, end).split('&')) {
    const eq = pair.indexOf('=');
    if (eq >= 0) {
      out.push({
        key: decode(pair.slice(0, eq)),
        value: pair.slice(eq + 1),
        start: pos + eq + 1,
        end: pos + pair.length,
      });
    }
    pos += pair.length + 1;
  }
  return out;
}

function maskQuery(tail: string): string {
  let out = tail;
  for (const p of queryParameters(tail).reverse()) {
    if (isSecretParameter(p.key)) out = `${out.slice(0, p.start)}${MASK}${out.slice(p.end)}`;
  }
  return out;
}

function maskKeyValue(text: string): string {
  let out = text;
  const { entries } = parseKeyValueConnectionString(text);
  for (const e of [...entries].reverse()) {
    if (isSecretParameter(e.key)) out = `${out.slice(0, e.start)}${MASK}${out.slice(e.end)}`;
  }
  return out;
}

/**
 * Returns a connection string with every secret replaced by `***`, whatever its form: a URL (password in the
 * userinfo, also with several hosts or a malformed password; secret query parameters such as `password`,
 * `sslpassword`), or a libpq key/value string (`password='a b\'c'`, `sslpassword=…`, quoted or not). Text
 * without secrets (a host list, a queue name) is returned unchanged.
 *
 * @example
 * maskConnectionString('postgres://app:s3cret@db:5432/app'); // 'postgres://app:***@db:5432/app'
 * maskConnectionString("host=db password='a b' dbname=app"); // 'host=db password=*** dbname=app'
 */
export function maskConnectionString(text: string): string {
  const url = splitConnectionUrl(text);
  if (url === undefined) return text.includes('=') ? maskKeyValue(text) : text;
  const userinfo = !url.hasUserinfo
    ? ''
    : url.password === undefined
      ? `${url.user}@`
      : `${url.user}:${MASK}@`;
  return `${url.scheme}${userinfo}${maskQuery(url.tail)}`;
}

/**
 * The secrets in a connection string, as written and as decoded (percent-decoding, libpq quoting), for
 * scrubbing them out of free text such as a driver's error message. Empty when it holds none.
 *
 * @example
 * connectionStringSecrets('postgres://app:p%40ss@db/app'); // ['p%40ss', 'p@ss']
 */
export function connectionStringSecrets(text: string): string[] {
  const found: string[] = [];
  const url = splitConnectionUrl(text);
  if (url !== undefined) {
    if (url.password !== undefined && url.password !== '') found.push(url.password, decode(url.password));
    for (const p of queryParameters(url.tail))
      if (isSecretParameter(p.key) && p.value !== '') found.push(p.value, decode(p.value));
  } else if (text.includes('=')) {
    for (const e of parseKeyValueConnectionString(text).entries) {
      if (isSecretParameter(e.key) && e.value !== '') found.push(e.value, text.slice(e.start, e.end));
    }
  }
  return [...new Set(found)];
}
