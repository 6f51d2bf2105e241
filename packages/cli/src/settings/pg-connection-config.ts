// What node-postgres needs for the CLI's `--database-url`. URLs go to node-postgres as they are; libpq's
// key/value strings (`host=db user=app password=… dbname=app`), which node-postgres would misread as a
// relative URL (host "base", the whole string as the database name), are translated here. Forms
// node-postgres cannot serve (several hosts) are refused with a ConfigurationError that shows no secret.

import { readFileSync } from 'node:fs';

import { ConfigurationError } from '@inboxkit/core';
import type { ConnectionOptions } from 'node:tls';

import { parseKeyValueConnectionString } from './key-value-connection-string.js';
import { isUrlForm, maskConnectionString, splitConnectionUrl } from './mask-connection-string.js';

/** The part of node-postgres' client config the CLI sets from a connection string. */
export interface PgConnectionConfig {
  connectionString?: string;
  host?: string;
  port?: number;
  user?: string;
  password?: string;
  database?: string;
  application_name?: string;
  fallback_application_name?: string;
  options?: string;
  client_encoding?: string;
  connectionTimeoutMillis?: number;
  keepAlive?: boolean;
  keepAliveInitialDelayMillis?: number;
  ssl?: boolean | ConnectionOptions;
}

/** The key/value parameters the CLI translates (libpq's names). */
export const KEY_VALUE_PARAMETERS = [
  'host',
  'hostaddr',
  'port',
  'user',
  'password',
  'dbname',
  'application_name',
  'fallback_application_name',
  'options',
  'client_encoding',
  'connect_timeout',
  'keepalives',
  'keepalives_idle',
  'sslmode',
  'sslrootcert',
  'sslcert',
  'sslkey',
  'sslpassword',
] as const;

function refuse(connection: string, why: string): never {
  throw new ConfigurationError(
    `cannot use the database connection ${maskConnectionString(connection)}: ${why}`,
  );
}

function oneHost(connection: string, hosts: string, what: string): void {
  if (hosts.includes(',')) {
    refuse(
      connection,
      `it names several ${what}s (${hosts}); node-postgres connects to one: give the one to use`,
    );
  }
}

function file(connection: string, key: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    return refuse(connection, `cannot read ${key} ${path}: ${(error as Error).message}`);
  }
}

function seconds(connection: string, key: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0)
    refuse(connection, `${key} must be a whole number of seconds, got ${JSON.stringify(value)}`);
  return n * 1000;
}

/** libpq's sslmode and certificate files as node's TLS options (libpq's meaning, as pg's libpq compatibility mode reads them). */
function sslOf(connection: string, p: ReadonlyMap<string, string>): boolean | ConnectionOptions | undefined {
  const mode = p.get('sslmode');
  const files = ['sslrootcert', 'sslcert', 'sslkey'].some((k) => p.has(k));
  // As in libpq, sslpassword alone (the passphrase of an sslkey) does not turn TLS on.
  if (mode === undefined && !files) return undefined;
  if (mode === 'disable' || mode === 'allow') return false;
  const tls: ConnectionOptions = {};
  const rootcert = p.get('sslrootcert');
  if (rootcert !== undefined) tls.ca = file(connection, 'sslrootcert', rootcert);
  const cert = p.get('sslcert');
  if (cert !== undefined) tls.cert = file(connection, 'sslcert', cert);
  const key = p.get('sslkey');
  if (key !== undefined) tls.key = file(connection, 'sslkey', key);
  const passphrase = p.get('sslpassword');
  if (passphrase !== undefined) tls.passphrase = passphrase;
  switch (mode) {
    case undefined:
    case 'verify-full':
      return tls;
    case 'prefer':
    case 'require':
      // Encrypted; the server is verified only against a given root certificate (and then not by name).
      if (rootcert === undefined) tls.rejectUnauthorized = false;
      else tls.checkServerIdentity = () => undefined;
      return tls;
    case 'verify-ca':
      if (rootcert === undefined)
        refuse(connection, 'sslmode=verify-ca needs sslrootcert (the CA to verify against)');
      tls.checkServerIdentity = () => undefined;
      return tls;
    default:
      return refuse(
        connection,
        `unknown sslmode ${JSON.stringify(mode)}: use disable, allow, prefer, require, verify-ca or verify-full`,
      );
  }
}

function fromKeyValue(connection: string): PgConnectionConfig {
  const parsed = parseKeyValueConnectionString(connection);
  if (parsed.error !== undefined)
    refuse(connection, `not a valid key/value connection string (${parsed.error})`);
  const p = new Map<string, string>();
  for (const e of parsed.entries) {
    if (!(KEY_VALUE_PARAMETERS as readonly string[]).includes(e.key)) {
      refuse(
        connection,
        `the parameter ${JSON.stringify(e.key)} is not supported here; the supported ones are ${KEY_VALUE_PARAMETERS.join(', ')} (or write the connection as a postgres:// URL)`,
      );
    }
    p.set(e.key, e.value);
  }
  const host = p.get('host') ?? p.get('hostaddr');
  if (host !== undefined) oneHost(connection, host, 'host');
  const port = p.get('port');
  if (port !== undefined) oneHost(connection, port, 'port');
  const config: PgConnectionConfig = {};
  if (host !== undefined && host !== '') config.host = host;
  if (port !== undefined && port !== '') {
    const n = Number(port);
    if (!Number.isInteger(n) || n <= 0 || n > 65_535)
      refuse(connection, `port must be a TCP port, got ${JSON.stringify(port)}`);
    config.port = n;
  }
  const user = p.get('user');
  if (user !== undefined) config.user = user;
  const password = p.get('password');
  if (password !== undefined) config.password = password;
  const database = p.get('dbname');
  if (database !== undefined) config.database = database;
  for (const key of [
    'application_name',
    'fallback_application_name',
    'options',
    'client_encoding',
  ] as const) {
    const value = p.get(key);
    if (value !== undefined) config[key] = value;
  }
  const timeout = p.get('connect_timeout');
  if (timeout !== undefined) config.connectionTimeoutMillis = seconds(connection, 'connect_timeout', timeout);
  const keepalives = p.get('keepalives');
  if (keepalives !== undefined) config.keepAlive = keepalives !== '0';
  const idle = p.get('keepalives_idle');
  if (idle !== undefined) config.keepAliveInitialDelayMillis = seconds(connection, 'keepalives_idle', idle);
  const ssl = sslOf(connection, p);
  if (ssl !== undefined) config.ssl = ssl;
  return config;
}

/**
 * The node-postgres client config for a connection string in any form libpq accepts: a `postgres://` /
 * `postgresql://` URL is passed on as `connectionString`; a key/value string is translated parameter by
 * parameter (`dbname` → `database`, `connect_timeout` → `connectionTimeoutMillis`, `sslmode` and the
 * certificate files → `ssl`). Throws a `ConfigurationError` (with the connection masked) for what node-postgres
 * cannot serve: several hosts, an unknown key/value parameter, an unterminated quote.
 *
 * @example
 * new pg.Pool({ ...pgConnectionConfig("host=db user=app password='s e' dbname=app"), max: 2 });
 */
export function pgConnectionConfig(connection: string): PgConnectionConfig {
  const text = connection.trim();
  // node-postgres' own socket form: `/var/run/postgresql dbname`.
  if (text.startsWith('/')) return { connectionString: text };
  if (!isUrlForm(text)) return fromKeyValue(text);
  const url = splitConnectionUrl(text);
  if (url !== undefined) {
    const authority = url.tail.split(/[/?#]/, 1)[0] ?? '';
    oneHost(text, authority, 'host');
  }
  return { connectionString: text };
}
