// Checks of message ids and consumer names before they reach the inbox key.

/** Control characters and lone surrogates: ids must be printable text. */
const NOT_PRINTABLE = /[\p{Cc}\p{Cs}]/u;

/**
 * The inbox key (consumer, message id) must fit a Postgres btree entry (about 2,700 bytes); this bound keeps a
 * valid id from ever failing the insert.
 */
export const MAX_KEY_BYTES = 2_400;

/** Why an id was refused, or `undefined` when it is usable. */
export type MessageIdProblem = 'missing-id' | 'invalid-id';

/** Checks one id: present, non-empty, at most `maxLength` characters (UTF-16 units), printable. */
export function checkMessageId(
  id: string | undefined,
  maxLength: number,
  consumerBytes: number,
): { readonly problem: MessageIdProblem; readonly detail: string } | undefined {
  if (id === undefined || id === null) return { problem: 'missing-id', detail: 'the message has no id' };
  if (typeof id !== 'string') return { problem: 'invalid-id', detail: `the message id is a ${typeof id}, not a string` };
  if (id.length === 0) return { problem: 'invalid-id', detail: 'the message id is empty' };
  if (id.length > maxLength) {
    return { problem: 'invalid-id', detail: `the message id has ${id.length} characters, over the limit of ${maxLength}` };
  }
  if (NOT_PRINTABLE.test(id)) return { problem: 'invalid-id', detail: 'the message id contains non-printable characters' };
  if (Buffer.byteLength(id, 'utf8') + consumerBytes > MAX_KEY_BYTES) {
    return { problem: 'invalid-id', detail: `the message id is over ${MAX_KEY_BYTES - consumerBytes} bytes of UTF-8` };
  }
  return undefined;
}

/** True when `name` is 1–200 printable characters. */
export function isValidConsumerName(name: unknown): name is string {
  return typeof name === 'string' && name.length > 0 && name.length <= 200 && !NOT_PRINTABLE.test(name) && name.trim() === name;
}
