// Turns anything thrown into the small, serialisable ErrorInfo stored in the inbox row and DLQ headers. What
// comes out is always recordable (recordable.ts): a handler's error text cannot make its own failure
// unrecordable, which would retry the message forever instead of counting the attempt.

import type { ErrorInfo } from './outcome.js';
import { clipText, recordableText } from './recordable.js';

const MAX_NAME = 200;
const MAX_MESSAGE = 2_000;
const MAX_CODE = 200;
const STACK_LINES = 10;
const MAX_STACK = 4_000;

/**
 * Name, message, code and the first 10 stack lines of `error` (at most 4,000 characters), each with lone
 * surrogates and NUL replaced by U+FFFD. Never throws, even for an error whose properties throw when read.
 */
export function toErrorInfo(error: unknown): ErrorInfo {
  try {
    return describe(error);
  } catch {
    return { name: 'Error', message: '(the error could not be read: reading its properties threw)' };
  }
}

function describe(error: unknown): ErrorInfo {
  if (error instanceof Error || (typeof error === 'object' && error !== null && 'message' in error)) {
    const e = error as { name?: unknown; message?: unknown; code?: unknown; stack?: unknown };
    const rawName = read(() => e.name);
    const name = typeof rawName === 'string' && rawName !== '' ? text(rawName, MAX_NAME) : 'Error';
    const rawMessage = read(() => e.message);
    const message = text(typeof rawMessage === 'string' ? rawMessage : safeString(rawMessage), MAX_MESSAGE);
    const rawCode = read(() => e.code);
    const code =
      typeof rawCode === 'string' || typeof rawCode === 'number'
        ? text(String(rawCode), MAX_CODE)
        : undefined;
    const rawStack = read(() => e.stack);
    const stack =
      typeof rawStack === 'string'
        ? text(rawStack.split('\n').slice(0, STACK_LINES).join('\n'), MAX_STACK)
        : undefined;
    return {
      name,
      message,
      ...(code !== undefined ? { code } : {}),
      ...(stack !== undefined ? { stack } : {}),
    };
  }
  return { name: typeof error, message: text(safeString(error), MAX_MESSAGE) };
}

/** A property read that may throw (a getter, a proxy): `undefined` then. */
function read(get: () => unknown): unknown {
  try {
    return get();
  } catch {
    return undefined;
  }
}

function text(value: string, max: number): string {
  return recordableText(clipText(value, max));
}

function safeString(value: unknown): string {
  try {
    return typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value));
  } catch {
    try {
      return String(value);
    } catch {
      return '(unprintable)';
    }
  }
}
