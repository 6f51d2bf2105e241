// Turning a raw body into a validated payload: the default UTF-8 JSON decoder and the schema adapter for
// Standard Schema validators and zod-style `safeParse`.

import type { PayloadSchema } from './consumer-types.js';
import { DecodeError, SchemaValidationError } from './errors.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The default decoder: UTF-8 (a BOM is dropped) then JSON. An empty or null body, invalid UTF-8 or invalid
 * JSON throws a `DecodeError`.
 */
export function decodeJson(body: Uint8Array | string | null): unknown {
  return decodeJsonBody(body).value;
}

/** The default decoder's text (the body as UTF-8, BOM dropped) and its JSON value; throws a `DecodeError`. */
export function decodeJsonBody(body: Uint8Array | string | null): { readonly text: string; readonly value: unknown } {
  if (body === null || body === undefined) throw new DecodeError('the message has no body');
  let text: string;
  if (typeof body === 'string') text = body.charCodeAt(0) === 0xfeff ? body.slice(1) : body;
  else {
    try {
      text = utf8.decode(body);
    } catch (error) {
      throw new DecodeError('the body is not valid UTF-8', { cause: error });
    }
  }
  if (text.trim() === '') throw new DecodeError('the body is empty');
  try {
    return { text, value: JSON.parse(text) };
  } catch (error) {
    throw new DecodeError(`the body is not JSON: ${(error as Error).message}`, { cause: error });
  }
}

/** Validates `value`; resolves to the schema's output or throws a `SchemaValidationError`. */
export async function validatePayload<P>(schema: PayloadSchema<P>, value: unknown): Promise<P> {
  if ('~standard' in schema) {
    const result = await schema['~standard'].validate(value);
    if (result.issues !== undefined) throw new SchemaValidationError(describeIssues(result.issues), result.issues);
    return result.value;
  }
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issues = (result.error as { issues?: unknown })?.issues;
  const list = Array.isArray(issues) ? (issues as unknown[]) : [result.error];
  throw new SchemaValidationError(describeIssues(list), list, { cause: result.error });
}

function describeIssues(issues: readonly unknown[]): string {
  const first = issues.slice(0, 3).map((issue) => {
    if (typeof issue !== 'object' || issue === null) return String(issue);
    const { message, path } = issue as { message?: unknown; path?: unknown };
    const where = Array.isArray(path) && path.length > 0 ? `${path.map((p) => (typeof p === 'object' && p !== null && 'key' in p ? String((p as { key: unknown }).key) : String(p))).join('.')}: ` : '';
    return `${where}${typeof message === 'string' ? message : 'invalid'}`;
  });
  const more = issues.length > 3 ? ` (+${issues.length - 3} more)` : '';
  return `the payload does not match the schema: ${first.join('; ')}${more}`;
}
