// The handler's transaction object of the libraries whose statements the seam cannot watch on a node-postgres
// client (postgres.js, Drizzle on postgres.js, Prisma): a Proxy over it that passes the text of every SQL
// statement to the transaction-control watch first, and answers a COMMIT or ROLLBACK with the refusal, unsent.
// Their other calls (query builders, model methods, helpers) go through untouched: none of them can end the
// transaction.

import type { TransactionControlWatch } from '@inboxkit/core/postgres';

/** A rejected promise that also answers postgres.js' query methods (`.values()`, `.raw()` …) with itself. */
function refusal(error: unknown): Promise<never> {
  const refused = Promise.reject(error);
  refused.catch(() => undefined); // the caller's await sees it; an unawaited one is no unhandled rejection
  const self = (): Promise<never> => refused;
  return Object.assign(refused, { values: self, raw: self, execute: self, simple: self, describe: self });
}

/** The SQL text of a tagged template's strings, of a `Prisma.sql` object, or of a string. */
function textOf(first: unknown): unknown {
  if (Array.isArray(first)) return first.join(' ');
  const strings = typeof first === 'object' && first !== null ? (first as { strings?: unknown }).strings : undefined;
  return Array.isArray(strings) ? strings.join(' ') : first;
}

/**
 * postgres.js' transaction `sql` (`sql.begin`'s), refusing transaction control sent as a tagged template
 * (tx`COMMIT`) or through `unsafe`. `tx.file()` is not read.
 */
export function refusingSql<T extends object>(sql: T, watch: TransactionControlWatch): T {
  return new Proxy(sql, {
    apply(target, self, args: unknown[]) {
      const first = args[0];
      const refused = Array.isArray(first) && 'raw' in first ? watch.refuse(textOf(first)) : undefined;
      return refused === undefined ? Reflect.apply(target as (...a: unknown[]) => unknown, self, args) : refusal(refused);
    },
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (property !== 'unsafe' || typeof value !== 'function') return value;
      return (text: unknown, ...rest: unknown[]) => {
        const refused = watch.refuse(text);
        return refused === undefined ? (value as (...a: unknown[]) => unknown).call(target, text, ...rest) : refusal(refused);
      };
    },
  });
}

const PRISMA_RAW = new Set<string | symbol>(['$executeRaw', '$executeRawUnsafe', '$queryRaw', '$queryRawUnsafe']);

/** Prisma's transaction client, refusing transaction control sent through `$executeRaw*` and `$queryRaw*`. */
export function refusingPrisma<T extends object>(tx: T, watch: TransactionControlWatch): T {
  return new Proxy(tx, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (!PRISMA_RAW.has(property) || typeof value !== 'function') return value;
      return (first: unknown, ...rest: unknown[]) => {
        const refused = watch.refuse(textOf(first));
        return refused === undefined ? (value as (...a: unknown[]) => unknown).call(target, first, ...rest) : refusal(refused);
      };
    },
  });
}
