// Checks of message ids and consumer names before they reach the inbox key.

/**
 * Control characters, lone surrogates and noncharacters (U+FFFE, U+FFFF, U+FDD0–U+FDEF …, which SQS and XML
 * refuse): ids must be printable text.
 */
const NOT_PRINTABLE = /[\p{Cc}\p{Cs}\p{Noncharacter_Code_Point}]/u;

/**
 * Characters that show nothing: whitespace (space, no-break and ideographic spaces, line and paragraph
 * separators …) and default-ignorable code points (zero-width space, joiners, the BOM, soft hyphen, variation
 * selectors, the bidi controls U+200E/U+200F, U+202A–U+202E, U+2066–U+2069, U+061C, Hangul fillers …).
 */
const INVISIBLE = /[\p{White_Space}\p{Default_Ignorable_Code_Point}]/gu;

/** At most this many code points are named in the reason of an invisible id. */
const NAMED_CODE_POINTS = 8;

/**
 * True when `text` is not empty and every character of it shows nothing (`INVISIBLE`): two such ids look the
 * same (blank) in every log, listing and terminal, so they cannot identify an intent to a person.
 */
export function isInvisible(text: string): boolean {
  return text.length > 0 && text.replace(INVISIBLE, '') === '';
}

/** `U+200B U+200B …`: the code points of `text`, for a reason that shows what the invisible id was. */
function codePoints(text: string): string {
  const points = [...text].map((c) => `U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`);
  return points.length > NAMED_CODE_POINTS ? `${points.slice(0, NAMED_CODE_POINTS).join(' ')} … (${points.length} in all)` : points.join(' ');
}

/**
 * The inbox key (consumer, message id) must fit a Postgres btree entry (about 2,700 bytes); this bound keeps a
 * valid id from ever failing the insert.
 */
export const MAX_KEY_BYTES = 2_400;

/** Why an id was refused, or `undefined` when it is usable. */
export type MessageIdProblem = 'missing-id' | 'invalid-id';

/**
 * Checks one id: present, non-empty, at most `maxLength` characters (UTF-16 units), printable, and not made only
 * of characters that show nothing (whitespace, zero-width and bidi-control characters).
 */
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
  if (isInvisible(id)) {
    return {
      problem: 'invalid-id',
      detail: `the message id is made only of characters that show nothing (whitespace, zero-width or bidi controls): ${codePoints(id)}`,
    };
  }
  if (Buffer.byteLength(id, 'utf8') + consumerBytes > MAX_KEY_BYTES) {
    return { problem: 'invalid-id', detail: `the message id is over ${MAX_KEY_BYTES - consumerBytes} bytes of UTF-8` };
  }
  return undefined;
}

/** True when `name` is 1–200 printable characters, not surrounded by spaces and not made only of invisible ones. */
export function isValidConsumerName(name: unknown): name is string {
  return (
    typeof name === 'string' &&
    name.length > 0 &&
    name.length <= 200 &&
    !NOT_PRINTABLE.test(name) &&
    name.trim() === name &&
    !isInvisible(name)
  );
}
