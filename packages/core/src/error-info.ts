// Turns anything thrown into the small, serialisable ErrorInfo stored in the inbox row and DLQ headers.

import type { ErrorInfo } from './outcome.js';

const MAX_MESSAGE = 2_000;
const STACK_LINES = 10;

/** Name, message, code and the first 10 stack lines of `error`. Never throws. */
export function toErrorInfo(error: unknown): ErrorInfo {
  if (error instanceof Error || (typeof error === 'object' && error !== null && 'message' in error)) {
    const e = error as { name?: unknown; message?: unknown; code?: unknown; stack?: unknown };
    const name = typeof e.name === 'string' && e.name !== '' ? e.name : 'Error';
    const message = clip(typeof e.message === 'string' ? e.message : safeString(e.message));
    const code = typeof e.code === 'string' || typeof e.code === 'number' ? String(e.code) : undefined;
    const stack = typeof e.stack === 'string' ? e.stack.split('\n').slice(0, STACK_LINES).join('\n') : undefined;
    return { name, message, ...(code !== undefined ? { code } : {}), ...(stack !== undefined ? { stack } : {}) };
  }
  return { name: typeof error, message: clip(safeString(error)) };
}

function clip(text: string): string {
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE - 1)}…` : text;
}

function safeString(value: unknown): string {
  try {
    return typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value));
  } catch {
    return String(value);
  }
}
