// `inboxkit console`'s web server: node:http, one page (console-page/), a JSON API over ConsoleApi, and the
// live progress of replays as server-sent events. Bound to 127.0.0.1 unless told otherwise; anywhere else it
// refuses to start without a credential, and then answers 401 to any request that does not carry it.

import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import { ConfigurationError } from '@inboxkit/core';
import type { Kysely } from 'kysely';

import type { CliServices } from '../cli-services.js';
import { openInboxStore } from '../inbox/inbox-store.js';
import { postgresInboxLookup } from '../inbox/postgres-inbox-lookup.js';
import { withInboxTable } from '../inbox/with-inbox-table.js';
import { displayName } from '../output/display-text.js';
import { systemClock } from '../replay/clock.js';
import type { Clock } from '../replay/clock.js';
import type { ConnectionSettings } from '../settings/connection-settings.js';
import type { ConsumerFingerprints, ConsumerSchemas } from '../settings/load-schemas.js';
import type { FastPathEntries } from '../inbox/fast-path-entries.js';
import { ConsoleApi, HttpError } from './console-api.js';
import type { ConsoleDlq } from './console-dlq.js';
import {
  acceptableHost,
  checkAuthorization,
  credentialWeakness,
  isLoopback,
  MIN_CREDENTIAL_LENGTH,
} from './console-auth.js';
import { crossOriginRefusal } from './console-origin.js';

/** Options of `startConsoleServer`. */
export interface ConsoleServerOptions {
  /** The address to listen on. Default is `127.0.0.1`; any non-loopback address needs `allowRemote` and a `credential`. */
  readonly host?: string | undefined;
  /** The port. `0` picks a free one (see `ConsoleServer.url`). Default is 7070. */
  readonly port?: number | undefined;
  /** Let the console listen on a non-loopback address. Default is `false`. */
  readonly allowRemote?: boolean | undefined;
  /**
   * The secret every request must carry (basic auth password with any user name, or a Bearer token); at least
   * 16 characters, 8 of them different, not a run like `abcdef…` (`credentialWeakness`). Required with `allowRemote`; optional on loopback. Never logged. Default is none.
   */
  readonly credential?: string | undefined;
  /** The DLQs the page lists and replays from. */
  readonly dlqs: readonly ConsoleDlq[];
  /** How the console opens transports (the CLI's own by default in `inboxkit console`). */
  readonly services: CliServices;
  /** Broker settings, and the inbox table's schema and name. */
  readonly connection: ConnectionSettings;
  /** The inbox database; not closed by the console. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the inbox schema is addressed by name at run time
  readonly db: Kysely<any>;
  /** Who replays are recorded as when the request names nobody (basic auth user). */
  readonly operator: string;
  /**
   * The consumers' Redis fast path: forgetting an id deletes its entry there too (else the fast path answers
   * its deliveries `duplicate` for up to the dedupe window). Not closed by the console. Default is none.
   */
  readonly fastPath?: FastPathEntries | undefined;
  /** The consumers' payload schemas by consumer name: edits from the page are checked against them. Default is none. */
  readonly schemas?: ConsumerSchemas | undefined;
  /**
   * The consumers' `fingerprint` options by consumer name: an edit of such a consumer's dead letter is
   * fingerprinted with it, as the consumer will (`loadConsumerModule`). Default is none (the whole payload).
   */
  readonly fingerprints?: ConsumerFingerprints | undefined;
  /** How often the inbox's state counts are read for the chart. Default is 10,000 ms. */
  readonly sampleIntervalMs?: number | undefined;
  /** Default is the system clock. */
  readonly clock?: Clock | undefined;
  /** One line per event worth a log (listening, replay started/finished, refused requests). Default is none. */
  readonly log?: ((line: string) => void) | undefined;
}

/** A running console. */
export interface ConsoleServer {
  /** `http://host:port/`, the port resolved. */
  readonly url: string;
  /** Stops replays after the message in hand, stops sampling, closes the server. */
  close(): Promise<void>;
}

const PAGE_DIR = new URL('../../console-page/', import.meta.url);
const ASSETS: Readonly<Record<string, { file: string; type: string }>> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/console.js': { file: 'console.js', type: 'text/javascript; charset=utf-8' },
  '/console.css': { file: 'console.css', type: 'text/css; charset=utf-8' },
  // The CLI's own display rule (src/output/display-text.ts re-exports it): one rule for terminal and page.
  '/display-text.js': { file: 'display-text.js', type: 'text/javascript; charset=utf-8' },
};
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};
/** Request bodies larger than this are refused (an edited payload fits easily). */
const MAX_BODY_BYTES = 1_048_576;

function validate(options: ConsoleServerOptions): void {
  const host = options.host ?? '127.0.0.1';
  if (!isLoopback(host) && options.allowRemote !== true) {
    throw new ConfigurationError(
      `the console binds ${host}, which other machines can reach: pass --allow-remote and set a credential (INBOXKIT_CONSOLE_TOKEN or --token-file), or bind 127.0.0.1`,
    );
  }
  if (!isLoopback(host) && options.credential === undefined) {
    throw new ConfigurationError(
      `the console binds ${host} without a credential: set INBOXKIT_CONSOLE_TOKEN or pass --token-file FILE (at least ${MIN_CREDENTIAL_LENGTH} characters)`,
    );
  }
  const weakness = options.credential === undefined ? undefined : credentialWeakness(options.credential);
  if (weakness !== undefined) throw new ConfigurationError(weakness);
}

function send(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const json = JSON.stringify(body ?? null);
  response.writeHead(status, {
    ...SECURITY_HEADERS,
    'content-type': 'application/json; charset=utf-8',
    ...headers,
  });
  response.end(json);
}

async function readJson(request: IncomingMessage): Promise<Record<string, unknown>> {
  const type = request.headers['content-type'] ?? '';
  if (!/^application\/json\b/i.test(type))
    throw new HttpError(415, 'send the request body as application/json');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES)
      throw new HttpError(413, `the request body is larger than ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new HttpError(400, 'the request body is not valid JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new HttpError(400, 'the request body must be a JSON object');
  }
  return parsed as Record<string, unknown>;
}

/**
 * Starts the console: checks the inbox table answers, takes the first state reading, listens. Rejects with a
 * `ConfigurationError` saying what to change when the bind, the credential or the inbox table is wrong.
 *
 * @example
 * const console = await startConsoleServer({
 *   dlqs: [{ transport: 'rabbitmq', name: 'orders.dlq' }], services: defaultCliServices(process.env),
 *   connection, db, operator: 'alice', port: 0,
 * });
 * console.log(console.url); // http://127.0.0.1:41234/
 */
export async function startConsoleServer(options: ConsoleServerOptions): Promise<ConsoleServer> {
  validate(options);
  const host = options.host ?? '127.0.0.1';
  const log = options.log ?? (() => undefined);
  const store = await withInboxTable(options.connection, async () => {
    const opened = await openInboxStore(options.db, options.connection);
    await opened.countByStatus();
    return opened;
  });
  const api = new ConsoleApi({
    dlqs: options.dlqs,
    services: options.services,
    connection: options.connection,
    inspector: store,
    store,
    lifecycle: store,
    fastPath: options.fastPath,
    schemas: options.schemas,
    fingerprints: options.fingerprints,
    lookup: postgresInboxLookup(options.db, store),
    clock: options.clock ?? systemClock,
    sampleIntervalMs: options.sampleIntervalMs ?? 10_000,
    log,
  });
  await api.start();
  const streams = new Set<ServerResponse>();
  let port = options.port ?? 7070;

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const url = new URL(request.url ?? '/', 'http://console.invalid');
    if (!acceptableHost(request.headers.host, host, port)) {
      send(response, 421, { error: 'this console answers only to localhost, 127.0.0.1 or [::1]' });
      return;
    }
    // Before the credential: a browser sends a cached basic-auth credential with another page's requests too.
    const crossOrigin = crossOriginRefusal(request.method ?? 'GET', url.pathname, request.headers);
    if (crossOrigin !== undefined) {
      log(`refused ${request.method ?? '?'} ${displayName(url.pathname)}: ${crossOrigin}`);
      send(response, 403, { error: crossOrigin });
      return;
    }
    const auth = checkAuthorization(request.headers.authorization, options.credential);
    if (!auth.ok) {
      log(`refused ${request.method ?? '?'} ${displayName(url.pathname)}: no valid credential`);
      send(
        response,
        401,
        { error: 'this console needs its credential' },
        { 'www-authenticate': 'Basic realm="inboxkit console", charset="UTF-8"' },
      );
      return;
    }
    const requestedBy = auth.user ?? options.operator;
    const asset = request.method === 'GET' ? ASSETS[url.pathname] : undefined;
    if (asset !== undefined) {
      const content = await readFile(new URL(asset.file, PAGE_DIR));
      response.writeHead(200, { ...SECURITY_HEADERS, 'content-type': asset.type });
      response.end(content);
      return;
    }
    if (request.method === 'POST') {
      // A page of another site can send a form, not this header: no cross-site request forgery.
      if (request.headers['x-inboxkit-console'] !== '1')
        throw new HttpError(403, 'POST requests need the header x-inboxkit-console: 1');
    }
    const route = `${request.method ?? 'GET'} ${url.pathname}`;
    const job = /^\/api\/replays\/([0-9a-f-]{36})(\/events)?$/.exec(url.pathname);
    if (route === 'GET /api/overview') return send(response, 200, await api.overview());
    // Reading a RabbitMQ or SQS DLQ receives and releases every message it reads: not a safe method.
    if (route === 'GET /api/dead-letters')
      throw new HttpError(
        405,
        'listing a DLQ receives and releases its messages on RabbitMQ and SQS: send it as POST /api/dead-letters with the header x-inboxkit-console: 1 and the filters as a JSON body',
        { allow: 'POST' },
      );
    if (route === 'POST /api/dead-letters')
      return send(response, 200, await api.deadLetters(await readJson(request)));
    if (route === 'GET /api/message') return send(response, 200, await api.message(url.searchParams));
    if (route === 'POST /api/message-body') {
      const whole = await api.messageBody(await readJson(request));
      response.writeHead(200, {
        ...SECURITY_HEADERS,
        'content-type': 'application/octet-stream',
        'content-length': String(whole.length),
      });
      response.end(whole);
      return;
    }
    if (route === 'POST /api/dry-run')
      return send(response, 200, await api.dryRun(await readJson(request), requestedBy));
    if (route === 'POST /api/replays')
      return send(response, 202, api.startReplay(await readJson(request), requestedBy));
    if (route === 'POST /api/edit')
      return send(response, 200, await api.edit(await readJson(request), requestedBy));
    if (route === 'POST /api/discard') return send(response, 200, await api.discard(await readJson(request), requestedBy));
    if (route === 'POST /api/archive') return send(response, 200, await api.archive(await readJson(request), requestedBy));
    if (route === 'GET /api/audit') return send(response, 200, await api.audit(url.searchParams));
    if (route === 'POST /api/forget')
      return send(response, 200, await api.forget(await readJson(request), requestedBy));
    if (route === 'GET /api/replays') return send(response, 200, api.jobs.list());
    if (request.method === 'GET' && job !== null) {
      const view = api.jobs.get(job[1]!);
      if (view === undefined) throw new HttpError(404, `no replay ${job[1]} in this console`);
      if (job[2] === undefined) return send(response, 200, view);
      // Server-sent events: the job as it stands, then each entry as it is replayed, then `done`.
      response.writeHead(200, {
        ...SECURITY_HEADERS,
        'content-type': 'text/event-stream; charset=utf-8',
        connection: 'keep-alive',
      });
      streams.add(response);
      const write = (event: string, data: unknown): void =>
        void response.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      write('job', view);
      if (view.state !== 'running') {
        response.end();
        streams.delete(response);
        return;
      }
      const stop = api.jobs.watch(view.id, (event) => {
        if (event.type === 'entry') write('entry', event.entry);
        else {
          write('done', event.job);
          response.end();
        }
      });
      response.on('close', () => {
        stop();
        streams.delete(response);
      });
      return;
    }
    throw new HttpError(404, `no such page or API: ${request.method ?? ''} ${url.pathname}`);
  };

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      const status = error instanceof HttpError ? error.status : 500;
      const message = error instanceof Error ? error.message : String(error);
      if (!(error instanceof HttpError))
        log(`error on ${request.method ?? '?'} ${displayName(request.url ?? '')}: ${message}`);
      if (response.headersSent) response.end();
      else send(response, status, { error: message }, error instanceof HttpError ? error.headers : {});
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}/`;
  log(`console listening on ${url}${options.credential === undefined ? '' : ' (credential required)'}`);
  return {
    url,
    async close() {
      await api.stop();
      for (const stream of streams) stream.end();
      server.closeIdleConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
