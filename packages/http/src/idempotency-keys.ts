// idempotencyKeys(): the framework-neutral Idempotency-Key protocol on Postgres. A request claims its key in one
// statement (INSERT … ON CONFLICT … DO UPDATE … WHERE claimable RETURNING); the winner runs, everyone else is
// answered from the row: replay, 409 while in flight, 422 for another payload.

import { randomUUID } from 'node:crypto';
import { ConfigurationError, FastPathAuthority, FastPathGuard, LeaseLostError } from '@inboxkit/core';
import { databaseIdentity, type SqlRow, type SqlSeam, type SqlStatement } from '@inboxkit/core/postgres';
import type { Transaction } from 'kysely';
import type { AnsweredDecision, IdempotencyDecision, ProceedDecision } from './idempotency-decision.js';
import { ResponseAlreadySentError, ResponseTooLargeError } from './idempotency-errors.js';
import {
  resolveIdempotencyKeysConfig,
  type IdempotencyKeysConfig,
  type ResolvedIdempotencyKeysConfig,
} from './idempotency-keys-config.js';
import type { IdempotentRequest } from './idempotent-request.js';
import {
  problemResponse,
  toHttpResponse,
  type HttpResponse,
  type IdempotentResponseInit,
} from './http-response.js';
import {
  cachedResponseId,
  decodeCachedResponse,
  encodeCachedResponse,
  HTTP_FAST_PATH_SCOPE,
  type CachedResponse,
} from './cached-response.js';
import { canonicalQuery } from './canonical-query.js';
import { IdempotencyKeyMetrics, registerMetrics, UNMATCHED_ROUTE } from './idempotency-key-metrics.js';
import { replayedHeaders } from './replay-headers.js';
import { requestFingerprint } from './request-fingerprint.js';

/** The request header carrying the key. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';

/** 1–255 printable ASCII characters (the IETF draft's sf-string). */
const VALID_KEY = /^[\x20-\x7E]{1,255}$/;
/** A surrogate half without its other half: UTF-8 cannot carry it (Postgres would store U+FFFD). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** A principal must show something: not only whitespace, invisible (default-ignorable) or control characters. */
const VISIBLE = /[^\s\p{Default_Ignorable_Code_Point}\p{Cc}]/u;

/** The Idempotency-Key protocol for one table; adapters call `begin` per request. */
export interface IdempotencyKeys<DB, N = unknown, Tx = Transaction<DB>> {
  readonly config: ResolvedIdempotencyKeysConfig<DB, N, Tx>;
  /** Decides what to do with a request (see `IdempotencyDecision`). `required` overrides the config's. */
  begin(
    request: IdempotentRequest<N>,
    options?: { readonly required?: boolean },
  ): Promise<IdempotencyDecision<DB, Tx>>;
}

interface KeyRow {
  status: string;
  fingerprint: string;
  response_status: number | null;
  response_headers: Record<string, string> | null;
  response_body: Uint8Array | null;
}

/** A response just stored: its stored headers, and how long its row lives from `at` (performance.now()). */
interface StoredResponse {
  readonly headers: Record<string, string>;
  readonly remainingMs: number;
  readonly at: number;
}

/** How long a key's row lives from now, in ms, as of the statement (SQL). */
const REMAINING_MS = '(extract(epoch from expires_at - clock_timestamp()) * 1000)::float8';

/** Thrown inside the transaction to roll it back when the response is not to be stored. */
class NotStored {
  constructor(readonly response: HttpResponse) {}
}

/**
 * Creates the Idempotency-Key protocol on the application's database (run `migrateIdempotencyKeys` first).
 * Throws a `ConfigurationError` for bad options.
 *
 * @example
 * const keys = idempotencyKeys({ db, principal: (req) => String(req.headers['x-tenant'] ?? 'anonymous') });
 * const decision = await keys.begin({ method: 'POST', route: '/payments', headers, body, native: req });
 */
export function idempotencyKeys<DB, N = unknown, Tx = Transaction<DB>>(
  config: IdempotencyKeysConfig<DB, N, Tx>,
): IdempotencyKeys<DB, N, Tx> {
  const resolved = resolveIdempotencyKeysConfig<DB, N, Tx>(config);
  const seam: SqlSeam<Tx> = resolved.seam;
  const table = resolved.names.qualifiedTable;
  const leaseSeconds = resolved.leaseMs / 1000;
  const retentionSeconds = resolved.retentionMs / 1000;
  const run = (sql: string, parameters: readonly unknown[]): Promise<SqlRow[]> =>
    seam.query({ sql, parameters });
  const fastPath =
    resolved.fastPath === undefined
      ? undefined
      : new FastPathGuard(resolved.fastPath, {
          logger: resolved.logger,
          label: 'idempotency keys: fast path',
        });
  /** The fast path's scope: `inboxkit-http` inside this key table's identity (database, schema, table). */
  const authority =
    resolved.fastPath === undefined
      ? undefined
      : new FastPathAuthority(
          () => databaseIdentity((statement) => seam.query(statement), table),
          HTTP_FAST_PATH_SCOPE,
          {
            logger: resolved.logger,
            label: 'idempotency keys: fast path',
          },
        );
  const metrics = new IdempotencyKeyMetrics(resolved.meterProvider, {
    onOutcome: resolved.onOutcome,
    logger: resolved.logger,
  });

  /** A replay from the fast path, without Postgres; undefined for anything but a hit with this fingerprint. */
  async function cachedReplay(
    guard: FastPathGuard,
    cacheId: string,
    fingerprint: string,
    key: string,
  ): Promise<AnsweredDecision | undefined> {
    let hit: CachedResponse | undefined;
    const known = authority!.scope();
    const scope = typeof known === 'string' ? known : await known;
    if (scope === undefined) {
      metrics.fastPath('bypassed');
      return undefined;
    }
    const result = await guard.check(scope, cacheId, (value) => {
      const cached = decodeCachedResponse(value, resolved);
      if (cached?.fingerprint !== fingerprint) return false;
      hit = cached;
      return true;
    });
    metrics.fastPath(result);
    if (result !== 'hit' || hit === undefined) return undefined;
    return {
      kind: 'replay',
      key,
      source: 'fast-path',
      response: {
        status: hit.status,
        headers: { ...hit.headers, 'idempotent-replayed': 'true' },
        body: hit.body,
      },
    };
  }

  /**
   * Writes a response Postgres holds durably to the fast path, for no longer than its row lives (so the cache
   * never answers for a key whose retention ended), unless it is larger than `fastPathMaxResponseBytes`.
   */
  function remember(
    cacheId: string,
    fingerprint: string,
    response: Pick<HttpResponse, 'status' | 'body'>,
    stored: StoredResponse,
  ): void {
    // The scope is known once a lookup has read it (every request looks up before it can store).
    const scope = authority?.scope();
    if (fastPath === undefined || typeof scope !== 'string') return;
    const size = response.body.length + Buffer.byteLength(JSON.stringify(stored.headers));
    if (size > resolved.fastPathMaxResponseBytes) return;
    const ttlMs = stored.remainingMs - (performance.now() - stored.at);
    // Too close to its end to be worth a write (and a TTL Redis would round to nothing).
    if (!(ttlMs >= 1_000)) return;
    fastPath.remember(scope, cacheId, encodeCachedResponse(fingerprint, response, stored.headers), ttlMs);
  }

  /**
   * The request's key as the `key` option reads it: the header (an array is kept, for the 400 on several), a
   * body member, or the function's answer; `failed` is the 500 answer when the function threw.
   */
  function readKey(request: IdempotentRequest<N>): { key?: unknown; failed?: AnsweredDecision } {
    const source = resolved.key;
    if (source.kind === 'header') return { key: request.headers[IDEMPOTENCY_KEY_HEADER] };
    if (source.kind === 'body') {
      let current: unknown = request.body;
      for (const name of source.path) {
        if (typeof current !== 'object' || current === null || Array.isArray(current) || current instanceof Uint8Array) return {};
        if (!Object.prototype.hasOwnProperty.call(current, name)) return {};
        current = (current as Record<string, unknown>)[name];
      }
      // A member that is present but null counts as absent; any other non-string is an invalid key (400).
      return { key: current === null ? undefined : current };
    }
    try {
      const key = source.read(request);
      if (key !== undefined && typeof key !== 'string') {
        throw new ConfigurationError(`key(request) must return a string or undefined, got ${key === null ? 'null' : typeof key}`);
      }
      return { key };
    } catch (error) {
      return { failed: resolverFailed('key', error) };
    }
  }

  /** A `key` or `fingerprint` function failed: a bug of the server's, answered 500; nothing was claimed. */
  function resolverFailed(option: 'key' | 'fingerprint', error: unknown): AnsweredDecision {
    try {
      resolved.logger?.error({ err: error, option }, `idempotencyKeys: the ${option} function failed; answered 500`);
    } catch {
      // A logger that throws is ignored.
    }
    return answered(
      'resolver-failed',
      problemResponse(
        500,
        'Idempotency resolver failed',
        `The server could not compute this request's idempotency ${option === 'key' ? 'key' : 'fingerprint'}; the request was not run.`,
      ),
    );
  }

  async function begin(
    request: IdempotentRequest<N>,
    options: { readonly required?: boolean } = {},
  ): Promise<IdempotencyDecision<DB, Tx>> {
    const read = readKey(request);
    if (read.failed !== undefined) return read.failed;
    const header = read.key;
    if (header === undefined) {
      if (options.required ?? resolved.required) {
        return answered(
          'missing',
          problemResponse(400, 'Idempotency-Key missing', 'This request requires an Idempotency-Key header.'),
        );
      }
      return { kind: 'unkeyed' };
    }
    if (resolved.key.kind === 'header' && Array.isArray(header) && header.length > 1) {
      return answered(
        'invalid',
        problemResponse(
          400,
          'Several Idempotency-Keys',
          `The request carries ${header.length} Idempotency-Key headers; send exactly one.`,
        ),
      );
    }
    if (typeof header !== 'string' || !VALID_KEY.test(header)) {
      return answered(
        'invalid',
        problemResponse(
          400,
          'Invalid Idempotency-Key',
          resolved.key.kind === 'body'
            ? `The body member ${resolved.key.field}, the idempotency key, must be a string of 1 to 255 printable ASCII characters.`
            : 'The Idempotency-Key header must be one value of 1 to 255 printable ASCII characters.',
        ),
      );
    }
    const principal: unknown = await resolved.principal(request);
    if (
      principal === undefined ||
      principal === null ||
      (typeof principal === 'string' && !VISIBLE.test(principal))
    ) {
      // An empty principal would put every such caller into one scope: one would be served another's response.
      return answered(
        'no-principal',
        problemResponse(
          400,
          'No principal for the Idempotency-Key',
          "The server could not tell who sent this request, so its Idempotency-Key cannot be kept apart from other callers' keys; the request was not run.",
        ),
      );
    }
    if (typeof principal !== 'string') {
      throw new ConfigurationError(
        `principal(request) must return a string, got ${typeof principal}: return the id of the user, tenant or API key that owns the key`,
      );
    }
    if (principal.includes('\u0000') || LONE_SURROGATE.test(principal)) {
      // Postgres cannot store a NUL, and a lone surrogate is written as U+FFFD: two principals would share a scope.
      throw new ConfigurationError(
        'principal(request) returned a string with a NUL or a lone surrogate, which the key table cannot store faithfully: return a well-formed id',
      );
    }
    const method = request.method.toUpperCase();
    const id = { principal, method, route: request.route, key: header };
    const query = canonicalQuery(`?${(request.query ?? '').replace(/^\?/, '')}`);
    let fingerprinted: unknown = request.body;
    if (resolved.fingerprint !== undefined && !(request.body instanceof Uint8Array)) {
      try {
        fingerprinted = resolved.fingerprint.project(request, request.body ?? null);
      } catch (error) {
        return resolverFailed('fingerprint', error);
      }
    }
    let fingerprint: string;
    try {
      fingerprint = requestFingerprint(method, request.route, fingerprinted, query);
    } catch (error) {
      // Only what a fingerprint function answered can fail here (a cycle, an object that shows nothing).
      if (resolved.fingerprint === undefined) throw error;
      return resolverFailed('fingerprint', error);
    }
    // $1–$4 name the key in every statement below.
    const keyParameters = [principal, method, request.route, header];
    const where =
      'principal = $1::text AND method = $2::text AND route = $3::text AND idempotency_key = $4::text';
    const cacheId = fastPath === undefined ? '' : cachedResponseId(principal, method, request.route, header);
    if (fastPath !== undefined) {
      const replay = await cachedReplay(fastPath, cacheId, fingerprint, header);
      if (replay !== undefined) return replay;
    }
    // Three steps, so that only a request that runs the handler writes: (1) a new key is claimed by a plain
    // INSERT; (2) on a conflict the row is read, and a replay, a 422 or a 409 is answered from it without
    // locking it (ON CONFLICT DO UPDATE would lock the row even when its WHERE refuses, and a replay would then
    // cost a commit with a WAL flush); (3) a row that may be taken over (expired, released, lease over) is
    // claimed by a conditional UPDATE. A row that changes between the steps (pruned, claimed by another
    // request) sends the request round again.
    for (let round = 0; round < 5; round++) {
      const token = randomUUID();
      const leaseUntil = "now() + $7::float8 * interval '1 second'";
      const expiresAt = "now() + $8::float8 * interval '1 second'";
      const parameters = [...keyParameters, fingerprint, token, leaseSeconds, retentionSeconds];
      const [row] = await run(
        `INSERT INTO ${table} (principal, method, route, idempotency_key, fingerprint, status, lease_token, locked_until, expires_at)
        VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, 'processing', $6::uuid, ${leaseUntil}, ${expiresAt})
        ON CONFLICT (principal, method, route, idempotency_key) DO NOTHING
        RETURNING attempts, recovery_points`,
        parameters,
      );
      if (row !== undefined)
        return proceed(
          id,
          token,
          Number(row['attempts']),
          { ...(row['recovery_points'] as object) },
          cacheId,
          fingerprint,
          request.responseStarted,
        );
      const [existing] = await run(
        `SELECT status, fingerprint, response_status, response_headers, response_body,
               expires_at <= now() AS expired, (status = 'processing' AND locked_until <= now()) AS lease_over,
               ${REMAINING_MS} AS remaining_ms
        FROM ${table} WHERE ${where}`,
        keyParameters,
      );
      const readAt = performance.now();
      const found = existing as
        (KeyRow & { expired: boolean; lease_over: boolean; remaining_ms: unknown }) | undefined;
      if (found === undefined) continue;
      if (
        found.expired ||
        (found.fingerprint === fingerprint && (found.status === 'released' || found.lease_over))
      ) {
        const [taken] = await run(
          `UPDATE ${table} AS k SET
            fingerprint = $5::text, status = 'processing', lease_token = $6::uuid,
            locked_until = ${leaseUntil}, expires_at = ${expiresAt},
            attempts = CASE WHEN k.expires_at <= now() THEN 1 ELSE k.attempts + 1 END,
            created_at = CASE WHEN k.expires_at <= now() THEN now() ELSE k.created_at END,
            recovery_points = CASE WHEN k.expires_at <= now() THEN '{}'::jsonb ELSE k.recovery_points END,
            response_status = NULL, response_headers = NULL, response_body = NULL, completed_at = NULL
          WHERE ${where} AND (k.expires_at <= now()
             OR (k.fingerprint = $5::text
                 AND (k.status = 'released' OR (k.status = 'processing' AND k.locked_until <= now()))))
          RETURNING attempts, recovery_points`,
          parameters,
        );
        if (taken !== undefined) {
          // The first request still held the key, but its lease ran out: it is slower than the lease.
          if (!found.expired && found.status === 'processing' && found.lease_over)
            metrics.leaseTakeover(request.routeTemplate ?? UNMATCHED_ROUTE, method);
          return proceed(
            id,
            token,
            Number(taken['attempts']),
            { ...(taken['recovery_points'] as object) },
            cacheId,
            fingerprint,
            request.responseStarted,
          );
        }
        continue; // another request took it first: answer from the row as it is now
      }
      if (found.fingerprint !== fingerprint) {
        return answered(
          'mismatch',
          problemResponse(
            422,
            'Idempotency-Key reused',
            'This Idempotency-Key was used with a different request (method, route or body).',
          ),
          header,
        );
      }
      if (found.status === 'completed' && found.response_status !== null) {
        const status = Number(found.response_status);
        const headers = found.response_headers ?? {};
        const body = found.response_body === null ? Buffer.alloc(0) : Buffer.from(found.response_body);
        // Warm the cache from Postgres, as a consumer does from an inbox duplicate: a flushed or restarted Redis
        // fills again from the retries themselves.
        remember(
          cacheId,
          fingerprint,
          { status, body },
          { headers, remainingMs: Number(found.remaining_ms), at: readAt },
        );
        return answered(
          'replay',
          { status, headers: { ...headers, 'idempotent-replayed': 'true' }, body },
          header,
        );
      }
      return answered(
        'conflict',
        problemResponse(
          409,
          'Request in progress',
          'A request with this Idempotency-Key is still being processed; retry later.',
          {
            'retry-after': String(resolved.retryAfterSeconds),
          },
        ),
        header,
      );
    }
    throw new Error(
      'the idempotency key kept changing between claim and read (pruned or taken over concurrently)',
    );
  }

  function proceed(
    id: { principal: string; method: string; route: string; key: string },
    token: string,
    attempt: number,
    points: Record<string, unknown>,
    cacheId: string,
    fingerprint: string,
    responseStarted: () => boolean = () => false,
  ): ProceedDecision<DB, Tx> {
    let settled = false;
    // $1–$5: the key and its lease.
    const fenced = [id.principal, id.method, id.route, id.key, token];
    const where = `principal = $1::text AND method = $2::text AND route = $3::text AND idempotency_key = $4::text
      AND status = 'processing' AND lease_token = $5::uuid`;

    function stored(response: HttpResponse): { headers: Record<string, string> } {
      // What the client got is not this response: storing it would replay something else (checked inside the
      // transaction, so the effect rolls back with it).
      if (responseStarted()) {
        throw new ResponseAlreadySentError(
          'the handler wrote to the response itself, so what the client received cannot be stored for replays; nothing was stored and the key was released: return the response instead of writing it',
        );
      }
      const headers = replayedHeaders(response.headers, resolved.replayHeaders);
      const size = response.body.length + Buffer.byteLength(JSON.stringify(headers));
      if (size > resolved.maxResponseBytes) {
        throw new ResponseTooLargeError(
          `the response (${size} bytes with its stored headers) exceeds maxResponseBytes (${resolved.maxResponseBytes}), so it cannot be stored for replays; the key was released`,
        );
      }
      return { headers };
    }

    /**
     * The statement that stores `response`, fenced by the lease: it returns a row (how long the key now lives)
     * only while the lease holds.
     */
    function storeStatement(response: HttpResponse): {
      statement: SqlStatement;
      headers: Record<string, string>;
    } {
      const { headers } = stored(response);
      return {
        statement: {
          sql: `UPDATE ${table} SET status = 'completed', response_status = $6::int,
            response_headers = $7::jsonb, response_body = $8::bytea,
            completed_at = now(), expires_at = now() + $9::float8 * interval '1 second',
            lease_token = NULL, locked_until = NULL
          WHERE ${where} RETURNING ${REMAINING_MS} AS remaining_ms`,
          parameters: [...fenced, response.status, JSON.stringify(headers), response.body, retentionSeconds],
        },
        headers,
      };
    }

    /** Runs the store statement; what the fast path needs of it, or `LeaseLostError` when the lease is gone. */
    async function storeWith(
      query: (statement: SqlStatement) => Promise<SqlRow[]>,
      response: HttpResponse,
    ): Promise<StoredResponse> {
      const { statement, headers } = storeStatement(response);
      const rows = await query(statement);
      if (rows.length !== 1) throw leaseLost();
      return { headers, remainingMs: Number(rows[0]!['remaining_ms']), at: performance.now() };
    }

    function leaseLost(): LeaseLostError {
      return new LeaseLostError(
        `the lease on Idempotency-Key ${JSON.stringify(id.key)} expired and another request took it over`,
      );
    }

    async function release(): Promise<void> {
      if (settled) return;
      settled = true;
      await run(
        `UPDATE ${table} SET status = 'released', lease_token = NULL, locked_until = NULL WHERE ${where}`,
        fenced,
      );
    }

    return {
      kind: 'proceed',
      key: id.key,
      attempt,
      get settled() {
        return settled;
      },
      recoveryPoints: points,
      async phase<T>(name: string, fn: (tx: Tx) => Promise<T>): Promise<T> {
        if (settled)
          throw new Error('this idempotency key is settled already: phases run before the response');
        if (Object.hasOwn(points, name)) return points[name] as T;
        const value = await seam.transaction<T>(async (t) => {
          // JSON round trip: a resumed retry gets exactly what a first run gets.
          const result = JSON.parse(JSON.stringify((await fn(t.tx)) ?? null)) as T;
          const updated = await t.query({
            sql: `UPDATE ${table} SET recovery_points = recovery_points || jsonb_build_object($6::text, $7::jsonb),
              locked_until = now() + $8::float8 * interval '1 second'
            WHERE ${where} RETURNING 1 AS kept`,
            parameters: [...fenced, name, JSON.stringify(result), leaseSeconds],
          });
          if (updated.length !== 1) throw leaseLost();
          return { end: 'commit', value: result };
        });
        points[name] = value;
        return value;
      },
      async transaction(fn: (tx: Tx) => Promise<IdempotentResponseInit>): Promise<HttpResponse> {
        if (settled) throw new Error('this idempotency key is settled already: call transaction() once');
        try {
          let written: StoredResponse | undefined;
          const response = await seam.transaction<HttpResponse>(async (t) => {
            const response = toHttpResponse(await fn(t.tx));
            if (!resolved.storeStatus(response.status)) throw new NotStored(response);
            written = await storeWith((statement) => t.query(statement), response);
            return { end: 'commit', value: response };
          });
          settled = true;
          // Committed: only now may the cache say so.
          if (written !== undefined) remember(cacheId, fingerprint, response, written);
          return response;
        } catch (error) {
          await release();
          if (error instanceof NotStored) return error.response;
          throw error;
        }
      },
      async complete(init: IdempotentResponseInit): Promise<HttpResponse> {
        if (settled) throw new Error('this idempotency key is settled already');
        let response: HttpResponse;
        let written: StoredResponse;
        try {
          response = toHttpResponse(init);
          if (!resolved.storeStatus(response.status)) {
            await release();
            return response;
          }
          written = await storeWith((statement) => seam.query(statement), response);
        } catch (error) {
          await release();
          throw error;
        }
        settled = true;
        remember(cacheId, fingerprint, response, written);
        return response;
      },
      release,
    };
  }

  const keys = Object.freeze({ config: resolved, begin });
  registerMetrics(keys, metrics);
  return keys;
}

function answered(kind: AnsweredDecision['kind'], response: HttpResponse, key?: string): AnsweredDecision {
  return key === undefined ? { kind, response } : { kind, response, key };
}
