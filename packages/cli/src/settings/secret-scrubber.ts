// The last line of defence against printing a secret: everything the CLI writes goes through one scrubber,
// which removes the secrets it was told about (wherever and however a library quotes them) and anything that
// looks like a credential in a connection string, a URL or a key/value pair.

import type { OutputStream } from '../cli-io.js';
import { connectionStringSecrets, isSecretParameter, MASK } from './mask-connection-string.js';

/**
 * Environment variables whose value is a secret as a whole. `DATABASE_URL` and `AMQP_URL` are connection
 * strings: only their secrets are scrubbed.
 */
export const SECRET_ENVIRONMENT = [
  'PGPASSWORD',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'INBOXKIT_CONSOLE_TOKEN',
] as const;

/** Environment variables holding connection strings. */
const CONNECTION_ENVIRONMENT = ['DATABASE_URL', 'AMQP_URL', 'SQS_ENDPOINT'] as const;

/**
 * Shorter secrets are not scrubbed as plain text (replacing every `ab` of the output would garble it); they
 * are still masked wherever they stand as a credential (`user:…@`, `password=…`).
 */
export const MIN_SCRUBBED_LENGTH = 4;

/** `scheme://user:password@` in free text: the password runs to the last `@` of the word. */
const URL_CREDENTIAL = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@'"]*:)\S*@/gi;
/** `?password=…` / `&sslpassword=…` in a URL: the value runs to the next `&`, `#` or space. */
const QUERY_SECRET = /([?&]([^\s=&#]+)=)[^\s&#'"]*/g;
/** `password=…` / `password = '…'` in key/value text. */
const KEY_VALUE_SECRET = /(^|[\s'"(,;])([a-z_]+)(\s*=\s*)('(?:\\.|[^'\\])*'?|(?:\\.|\S)*)/gim;

/**
 * The mask for a credential's value. A value masked already and followed by punctuation of the sentence
 * around it (`password=***:` in "at host=db password=***: connection refused") keeps that punctuation.
 */
function masked(value: string): string {
  return /^\*\*\*[:;,.)]$/.test(value) ? value : MASK;
}

/** A secret's first (last) character is a word character: letter, digit or `_`. */
const WORD_CHAR = /^[\p{L}\p{N}_]/u;
const WORD_CHAR_END = /[\p{L}\p{N}_]$/u;

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Removes secrets from text the CLI is about to print. */
export class SecretScrubber {
  #literal: RegExp | undefined;
  readonly #secrets = new Set<string>();

  /** Scrubs `secrets` (and their JSON-escaped spelling) from now on. */
  add(...secrets: readonly (string | undefined)[]): this {
    for (const secret of secrets) {
      if (secret === undefined || secret.length < MIN_SCRUBBED_LENGTH) continue;
      this.#secrets.add(secret);
      this.#secrets.add(JSON.stringify(secret).slice(1, -1));
    }
    // Longest first, so a secret containing another is replaced whole. Only whole occurrences: a secret that
    // begins (ends) with a letter or digit is not matched right after (before) another one, so a password
    // `c2a71b` leaves the queue `orders-9fc2a71be0` alone but not `for c2a71b`, `"c2a71b"` or `:c2a71b@`.
    const alternatives = [...this.#secrets]
      .sort((a, b) => b.length - a.length)
      .map((secret) => {
        const lead = WORD_CHAR.test(secret) ? '(?<![\\p{L}\\p{N}_])' : '';
        const tail = WORD_CHAR_END.test(secret) ? '(?![\\p{L}\\p{N}_])' : '';
        return `${lead}${escapeRegExp(secret)}${tail}`;
      });
    this.#literal = alternatives.length === 0 ? undefined : new RegExp(alternatives.join('|'), 'gu');
    return this;
  }

  /** Scrubs the secrets of a connection string (`--database-url`, `--amqp-url`). */
  addConnectionString(text: string | undefined): this {
    return text === undefined ? this : this.add(...connectionStringSecrets(text));
  }

  /** `text` without the known secrets and without any credential-shaped value. */
  scrub(text: string): string {
    const literal = this.#literal === undefined ? text : text.replace(this.#literal, MASK);
    return literal
      .replace(URL_CREDENTIAL, `$1${MASK}@`)
      .replace(QUERY_SECRET, (match, prefix: string, key: string) =>
        isSecretParameter(key) ? `${prefix}${masked(match.slice(prefix.length))}` : match,
      )
      .replace(KEY_VALUE_SECRET, (match, lead: string, key: string, eq: string, value: string) =>
        isSecretParameter(key) ? `${lead}${key}${eq}${masked(value)}` : match,
      );
  }

  /** A stream that writes through this scrubber. */
  wrap<S extends OutputStream>(out: S): OutputStream {
    return {
      write: (chunk: string) => out.write(this.scrub(String(chunk))),
      isTTY: out.isTTY,
      columns: out.columns,
    };
  }
}

/**
 * A scrubber for one CLI run: the secrets of every connection string on the command line (whatever flag, or
 * none, it was given to) and in the environment, and the secret environment variables.
 *
 * @example
 * const scrubber = secretScrubber(argv, process.env);
 * process.stderr.write(scrubber.scrub(error.message));
 */
export function secretScrubber(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): SecretScrubber {
  const scrubber = new SecretScrubber();
  for (const arg of argv) {
    // `--database-url=…` as well as the bare value.
    const value = /^--[a-z-]+=/.test(arg) ? arg.slice(arg.indexOf('=') + 1) : arg;
    scrubber.addConnectionString(value);
  }
  for (const name of CONNECTION_ENVIRONMENT) scrubber.addConnectionString(env[name]);
  for (const name of SECRET_ENVIRONMENT) scrubber.add(env[name]);
  return scrubber;
}
