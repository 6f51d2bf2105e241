// Telling a handler's statement that ends its transaction from one that works inside it. The inbox row commits
// with the handler's writes only while the transaction the store opened stays open: a COMMIT sent through
// `context.tx` commits the claim early (a later throw then reads as a duplicate), a ROLLBACK drops the claim and
// leaves the handler's next writes in autocommit (reported processed, applied again on redelivery). Every seam
// passes the text of each statement the handler sends through `tx` to a `TransactionControlWatch`, which refuses
// those before they are sent; what a seam can only find afterwards (a library's own commit(), the connection's
// state) it reports as a `TransactionControlError` with `committed: 'unknown'`.

import { TransactionControlError } from '../errors.js';

/** The first word of every statement that may be transaction control (anchored: fails at once on the others). */
const HEAD = /^\s*(?:COMMIT|END|ABORT|BEGIN|START|PREPARE|ROLLBACK|SAVEPOINT|RELEASE)\b/i;
/** The lower-case first letters of HEAD's words, and of a comment (`-`, `/`), as character codes. */
const MAY_START = new Set([...'cebasprl-/'].map((c) => c.charCodeAt(0) | 32));
/** A control word at the start of the text or after a `;` (whitespace and line comments between). */
const ANY_HEAD = /(?:^|;)\s*(?:--[^\n]*(?:\n|$)\s*)*(?:COMMIT|END|ABORT|BEGIN|START|PREPARE|ROLLBACK|SAVEPOINT|RELEASE)\b/i;
/** Text that starts with a comment: its first word is found by the full scan. */
const COMMENT_FIRST = /^\s*(?:--|\/\*)/;
/** Statements that end, open or prepare a transaction (ROLLBACK TO SAVEPOINT is told apart below). */
const CONTROL = /^(COMMIT|END|ABORT|BEGIN|START\s+TRANSACTION|PREPARE\s+TRANSACTION|ROLLBACK)\b/i;
const ROLLBACK_TO = /^ROLLBACK(\s+(WORK|TRANSACTION))?\s+TO\b/i;
/**
 * The store's own savepoint (`inboxkit_message`, around each message of a batch): the handler may not touch it.
 * Only that name: inboxkit's patterns run inside the handler's transaction with savepoints of their own
 * (`inboxkit_advisory_lock`, `inboxkit_reconciliation_repair`), which are the handler's to use.
 */
const OURS = /^(SAVEPOINT|RELEASE(\s+SAVEPOINT)?|ROLLBACK(\s+(WORK|TRANSACTION))?\s+TO(\s+SAVEPOINT)?)\s+"?inboxkit_message\b/i;

/**
 * The transaction-control statement in `sql` (one statement or several separated by `;`), as the handler
 * wrote it (`COMMIT`, `ROLLBACK`, `END` …, whitespace collapsed), or `undefined`. Comments, string literals,
 * quoted identifiers and dollar-quoted bodies are skipped, so `INSERT … VALUES ('; commit')` and a DO block's
 * `END` are not mistaken for one. The handler's own savepoints (SAVEPOINT, RELEASE, ROLLBACK TO of any name
 * but the store's `inboxkit_message`) are allowed.
 *
 * @example
 * transactionControlIn('SELECT 1; rollback'); // 'rollback'
 * transactionControlIn("INSERT INTO t VALUES ('commit')"); // undefined
 */
export function transactionControlIn(sql: string): string | undefined {
  // The usual case, one statement (a `;` only at its end), is told by its first letter (INSERT, UPDATE, DELETE,
  // WITH … at once), else by its first word unless a comment comes first.
  const semicolon = sql.indexOf(';');
  if (semicolon < 0 || semicolon === sql.trimEnd().length - 1) {
    let at = 0;
    while (at < sql.length && sql.charCodeAt(at) <= 32) at++;
    if (!MAY_START.has(sql.charCodeAt(at) | 32)) return undefined;
    if (!COMMENT_FIRST.test(sql)) return HEAD.test(sql) ? controlIn(sql.slice(0, semicolon < 0 ? sql.length : semicolon)) : undefined;
  }
  // Several statements: none can be control unless some `;` (or the start) is followed by a control word,
  // perhaps after line comments; the scan below tells a real one (not in a literal) from the others.
  if (!sql.includes('/*') && !ANY_HEAD.test(sql)) return undefined;
  for (const statement of statementsOf(sql)) {
    const found = controlIn(statement);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** `statement` (without comments) as the handler wrote it, when it is transaction control. */
function controlIn(statement: string): string | undefined {
  const head = statement.trim();
  const control = OURS.test(head) || (CONTROL.test(head) && !ROLLBACK_TO.test(head));
  return control ? head.replace(/\s+/g, ' ').slice(0, 60) : undefined;
}

/** The statements of `sql`, with comments and quoted text replaced by a space. */
function statementsOf(sql: string): string[] {
  const statements: string[] = [];
  let current = '';
  let from = 0;
  let i = 0;
  const skip = (to: number): void => {
    current += `${sql.slice(from, i)} `;
    i = from = to;
  };
  while (i < sql.length) {
    const c = sql[i]!;
    const next = sql[i + 1];
    if (c === ';') {
      statements.push(current + sql.slice(from, i));
      current = '';
      from = ++i;
    } else if (c === '-' && next === '-') {
      const end = sql.indexOf('\n', i);
      skip(end < 0 ? sql.length : end);
    } else if (c === '/' && next === '*') {
      let depth = 0;
      let j = i;
      while (j < sql.length) {
        if (sql.startsWith('/*', j)) {
          depth++;
          j += 2;
        } else if (sql.startsWith('*/', j)) {
          j += 2;
          if (--depth === 0) break;
        } else j++;
      }
      skip(j);
    } else if (c === "'") {
      // An E'…' string takes backslash escapes; any string takes '' for a quote.
      const escapes = /[eE]/.test(sql[i - 1] ?? '') && !/[\w$]/.test(sql[i - 2] ?? '');
      let j = i + 1;
      while (j < sql.length) {
        if (escapes && sql[j] === '\\') j += 2;
        else if (sql[j] === "'" && sql[j + 1] === "'") j += 2;
        else if (sql[j] === "'") break;
        else j++;
      }
      skip(j + 1);
    } else if (c === '"') {
      let j = i + 1;
      while (j < sql.length && !(sql[j] === '"' && sql[j + 1] !== '"')) j += sql[j] === '"' ? 2 : 1;
      skip(j + 1);
    } else if (c === '$' && !/[\w$]/.test(sql[i - 1] ?? '')) {
      const tag = /^\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$/.exec(sql.slice(i, i + 64))?.[0];
      if (tag === undefined) i++;
      else {
        const end = sql.indexOf(tag, i + tag.length);
        skip(end < 0 ? sql.length : end + tag.length);
      }
    } else i++;
  }
  statements.push(current + sql.slice(from));
  return statements;
}

/**
 * What a seam keeps about one handler transaction: the transaction control it refused. For authors of a
 * `SqlSeam`: pass every statement the handler sends through `tx` to `refuse` before sending it, and reject that
 * statement with the error it returns; hand `take` to the store as `SeamTransaction.transactionControl`; and when
 * the transaction ends with something still not taken, roll back and reject with it.
 *
 * @example
 * const watch = new TransactionControlWatch();
 * const refused = watch.refuse(text);
 * if (refused) return Promise.reject(refused); // never sent
 */
export class TransactionControlWatch {
  #pending: TransactionControlError | undefined;

  /** The error to reject `sql` with, without sending it, when it is transaction control (and remembers it). */
  refuse(sql: unknown): TransactionControlError | undefined {
    if (typeof sql !== 'string') return undefined;
    const statement = transactionControlIn(sql);
    return statement === undefined ? undefined : this.record(new TransactionControlError(statement, 'none'));
  }

  /** Remembers `error` (the first one stays) and returns it. */
  record(error: TransactionControlError): TransactionControlError {
    this.#pending ??= error;
    return error;
  }

  /** The transaction control seen since the last call, once. */
  take(): TransactionControlError | undefined {
    const pending = this.#pending;
    this.#pending = undefined;
    return pending;
  }
}
