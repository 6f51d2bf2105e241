// idempotencyKeys(): the framework-neutral Idempotency-Key protocol on Postgres. A request claims its key in one
// statement (INSERT … ON CONFLICT … DO UPDATE … WHERE claimable RETURNING); the winner runs, everyone else is
// answered from the row: replay, 409 while in flight, 422 for another payload.

import { randomUUID } from 'node:crypto';
import { ConfigurationError, LeaseLostError } from '@inboxkit/core';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { AnsweredDecision, IdempotencyDecision, ProceedDecision } from './idempotency-decision.js';
import { ResponseTooLargeError } from './idempotency-errors.js';
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
import { canonicalQuery } from './canonical-query.js';
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
export interface IdempotencyKeys<DB, N = unknown> {
  readonly config: ResolvedIdempotencyKeysConfig<DB, N>;
  /** Decides what to do with a request (see `IdempotencyDecision`). `required` overrides the config's. */
  begin(
    request: IdempotentRequest<N>,
    options?: { readonly required?: boolean },
  ): Promise<IdempotencyDecision<DB>>;
}

interface KeyRow {
  status: string;
  fingerprint: string;
  response_status: number | null;
  response_headers: Record<string, string> | null;
  response_body: Buffer | null;
}

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
export function idempotencyKeys<DB, N = unknown>(
  config: IdempotencyKeysConfig<DB, N>,
): IdempotencyKeys<DB, N> {
  const resolved = resolveIdempotencyKeysConfig(config);
  const db = resolved.db as unknown as Kysely<unknown>;
  const table = sql.raw(resolved.names.qualifiedTable);
  const leaseSeconds = resolved.leaseMs / 1000;
  const retentionSeconds = resolved.retentionMs / 1000;

  async function begin(
    request: IdempotentRequest<N>,
    options: { readonly required?: boolean } = {},
  ): Promise<IdempotencyDecision<DB>> {
    const header = request.headers[IDEMPOTENCY_KEY_HEADER];
    if (header === undefined) {
      if (options.required ?? resolved.required) {
        return answered(
          'missing',
          problemResponse(400, 'Idempotency-Key missing', 'This request requires an Idempotency-Key header.'),
        );
      }
      return { kind: 'unkeyed' };
    }
    if (typeof header !== 'string' || !VALID_KEY.test(header)) {
      return answered(
        'invalid',
        problemResponse(
          400,
          'Invalid Idempotency-Key',
          'The Idempotency-Key header must be one value of 1 to 255 printable ASCII characters.',
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
    const fingerprint = requestFingerprint(method, request.route, request.body, query);
    const where = sql`principal = ${principal} AND method = ${method} AND route = ${request.route} AND idempotency_key = ${header}`;
    // Three steps, so that only a request that runs the handler writes: (1) a new key is claimed by a plain
    // INSERT; (2) on a conflict the row is read, and a replay, a 422 or a 409 is answered from it without
    // locking it (ON CONFLICT DO UPDATE would lock the row even when its WHERE refuses, and a replay would then
    // cost a commit with a WAL flush); (3) a row that may be taken over (expired, released, lease over) is
    // claimed by a conditional UPDATE. A row that changes between the steps (pruned, claimed by another
    // request) sends the request round again.
    for (let round = 0; round < 5; round++) {
      const token = randomUUID();
      const leaseUntil = sql`now() + ${leaseSeconds}::float8 * interval '1 second'`;
      const expiresAt = sql`now() + ${retentionSeconds}::float8 * interval '1 second'`;
      const inserted = await sql<{ attempts: number; recovery_points: Record<string, unknown> }>`
        INSERT INTO ${table} (principal, method, route, idempotency_key, fingerprint, status, lease_token, locked_until, expires_at)
        VALUES (${principal}, ${method}, ${request.route}, ${header}, ${fingerprint}, 'processing', ${token}::uuid, ${leaseUntil}, ${expiresAt})
        ON CONFLICT (principal, method, route, idempotency_key) DO NOTHING
        RETURNING attempts, recovery_points`.execute(db);
      const row = inserted.rows[0];
      if (row !== undefined) return proceed(id, token, row.attempts, { ...row.recovery_points });
      const existing = await sql<KeyRow & { expired: boolean; lease_over: boolean }>`
        SELECT status, fingerprint, response_status, response_headers, response_body,
               expires_at <= now() AS expired, (status = 'processing' AND locked_until <= now()) AS lease_over
        FROM ${table} WHERE ${where}`.execute(db);
      const found = existing.rows[0];
      if (found === undefined) continue;
      if (
        found.expired ||
        (found.fingerprint === fingerprint && (found.status === 'released' || found.lease_over))
      ) {
        const claimed = await sql<{ attempts: number; recovery_points: Record<string, unknown> }>`
          UPDATE ${table} AS k SET
            fingerprint = ${fingerprint}, status = 'processing', lease_token = ${token}::uuid,
            locked_until = ${leaseUntil}, expires_at = ${expiresAt},
            attempts = CASE WHEN k.expires_at <= now() THEN 1 ELSE k.attempts + 1 END,
            created_at = CASE WHEN k.expires_at <= now() THEN now() ELSE k.created_at END,
            recovery_points = CASE WHEN k.expires_at <= now() THEN '{}'::jsonb ELSE k.recovery_points END,
            response_status = NULL, response_headers = NULL, response_body = NULL, completed_at = NULL
          WHERE ${where} AND (k.expires_at <= now()
             OR (k.fingerprint = ${fingerprint}
                 AND (k.status = 'released' OR (k.status = 'processing' AND k.locked_until <= now()))))
          RETURNING attempts, recovery_points`.execute(db);
        const taken = claimed.rows[0];
        if (taken !== undefined) return proceed(id, token, taken.attempts, { ...taken.recovery_points });
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
        );
      }
      if (found.status === 'completed' && found.response_status !== null) {
        return answered('replay', {
          status: found.response_status,
          headers: { ...(found.response_headers ?? {}), 'idempotent-replayed': 'true' },
          body: found.response_body ?? Buffer.alloc(0),
        });
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
  ): ProceedDecision<DB> {
    let settled = false;
    const where = sql`principal = ${id.principal} AND method = ${id.method} AND route = ${id.route}
      AND idempotency_key = ${id.key} AND status = 'processing' AND lease_token = ${token}::uuid`;

    function stored(response: HttpResponse): { headers: Record<string, string> } {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(response.headers))
        if (resolved.replayHeaders.has(name)) headers[name] = value;
      const size = response.body.length + Buffer.byteLength(JSON.stringify(headers));
      if (size > resolved.maxResponseBytes) {
        throw new ResponseTooLargeError(
          `the response (${size} bytes with its stored headers) exceeds maxResponseBytes (${resolved.maxResponseBytes}), so it cannot be stored for replays; the key was released`,
        );
      }
      return { headers };
    }

    async function store(executor: Kysely<unknown>, response: HttpResponse): Promise<void> {
      const { headers } = stored(response);
      const result = await sql`
        UPDATE ${table} SET status = 'completed', response_status = ${response.status},
          response_headers = ${JSON.stringify(headers)}::jsonb, response_body = ${response.body},
          completed_at = now(), expires_at = now() + ${retentionSeconds}::float8 * interval '1 second',
          lease_token = NULL, locked_until = NULL
        WHERE ${where}`.execute(executor);
      if (result.numAffectedRows !== 1n) {
        throw new LeaseLostError(
          `the lease on Idempotency-Key ${JSON.stringify(id.key)} expired and another request took it over`,
        );
      }
    }

    async function release(): Promise<void> {
      if (settled) return;
      settled = true;
      await sql`UPDATE ${table} SET status = 'released', lease_token = NULL, locked_until = NULL WHERE ${where}`.execute(
        db,
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
      async phase<T>(name: string, fn: (tx: Transaction<DB>) => Promise<T>): Promise<T> {
        if (settled)
          throw new Error('this idempotency key is settled already: phases run before the response');
        if (Object.hasOwn(points, name)) return points[name] as T;
        const value = await resolved.db.transaction().execute(async (tx) => {
          // JSON round trip: a resumed retry gets exactly what a first run gets.
          const result = JSON.parse(JSON.stringify((await fn(tx)) ?? null)) as T;
          const updated = await sql`
            UPDATE ${table} SET recovery_points = recovery_points || jsonb_build_object(${name}::text, ${JSON.stringify(result)}::jsonb),
              locked_until = now() + ${leaseSeconds}::float8 * interval '1 second'
            WHERE ${where}`.execute(tx);
          if (updated.numAffectedRows !== 1n) {
            throw new LeaseLostError(
              `the lease on Idempotency-Key ${JSON.stringify(id.key)} expired and another request took it over`,
            );
          }
          return result;
        });
        points[name] = value;
        return value;
      },
      async transaction(fn: (tx: Transaction<DB>) => Promise<IdempotentResponseInit>): Promise<HttpResponse> {
        if (settled) throw new Error('this idempotency key is settled already: call transaction() once');
        try {
          const response = await resolved.db.transaction().execute(async (tx) => {
            const response = toHttpResponse(await fn(tx));
            if (!resolved.storeStatus(response.status)) throw new NotStored(response);
            await store(tx as unknown as Kysely<unknown>, response);
            return response;
          });
          settled = true;
          return response;
        } catch (error) {
          await release();
          if (error instanceof NotStored) return error.response;
          throw error;
        }
      },
      async complete(init: IdempotentResponseInit): Promise<HttpResponse> {
        if (settled) throw new Error('this idempotency key is settled already');
        const response = toHttpResponse(init);
        if (!resolved.storeStatus(response.status)) {
          await release();
          return response;
        }
        try {
          await store(db, response);
        } catch (error) {
          await release();
          throw error;
        }
        settled = true;
        return response;
      },
      release,
    };
  }

  return Object.freeze({ config: resolved, begin });
}

function answered(kind: AnsweredDecision['kind'], response: HttpResponse): AnsweredDecision {
  return { kind, response };
}
