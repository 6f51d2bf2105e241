// Headers ↔ SQS message attributes. SQS allows at most 10 attributes per message, non-empty values and a
// restricted name alphabet, so headers that do not fit travel packed in one JSON attribute and are unpacked on
// receipt: every inboxkit reader sees the same lower-cased string headers whatever the writer had to do.

import type { MessageAttributeValue } from '@aws-sdk/client-sqs';
import { HEADERS } from '@inboxkit/core';

/** Attribute names the SQS transport adds to the core header names. */
export const SQS_ATTRIBUTES = {
  /** JSON object of the headers that did not fit in their own attributes (more than 10, or invalid names). */
  packedHeaders: 'x-inboxkit-headers',
  /** JSON object of the full `deadLetterHeaders()` record, on every dead letter. */
  deadLetter: 'x-inboxkit-dead-letter',
  /** The source message's FIFO MessageGroupId, kept in the dead-letter record so a replay keeps its group. */
  sourceMessageGroupId: 'x-inboxkit-source-message-group-id',
  /**
   * The producer's timestamp (`OutgoingMessage.timestamp`) in epoch milliseconds: SentTimestamp is assigned by
   * SQS on every send, so a resend needs this to keep its time. Read before SentTimestamp when it is valid.
   */
  timestamp: 'x-inboxkit-timestamp',
} as const;

/** SQS's limit of message attributes per message. */
export const MAX_MESSAGE_ATTRIBUTES = 10;

/**
 * Characters SQS refuses in a message or attribute value: it takes only #x9, #xA, #xD, #x20–#xD7FF,
 * #xE000–#xFFFD and #x10000–#x10FFFF. So no other control character, no lone surrogate, no U+FFFE/U+FFFF.
 */
const NOT_SQS_TEXT =
  // eslint-disable-next-line no-control-regex -- the control characters are what SQS refuses
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * `value` with every character SQS refuses replaced by U+FFFD, so an attribute that carries error text or a
 * header someone else chose (a dead letter's record) is never the reason a send is refused.
 */
export function sqsText(value: string): string {
  return value.replace(NOT_SQS_TEXT, '\uFFFD');
}

const NAME = /^[A-Za-z0-9_.-]{1,256}$/;

function isValidAttributeName(name: string): boolean {
  if (!NAME.test(name) || name.includes('..') || name.startsWith('.') || name.endsWith('.')) return false;
  const lower = name.toLowerCase();
  return !lower.startsWith('aws.') && !lower.startsWith('amazon.');
}

/**
 * Encodes headers as SQS message attributes. `message-id` and the names in `priority` get their own
 * attributes first; when more than 10 would be needed (or a name or value is not allowed by SQS), the rest is
 * packed as JSON in `x-inboxkit-headers`. Characters SQS refuses become U+FFFD (`sqsText`).
 */
export function encodeMessageAttributes(
  headers: Readonly<Record<string, string>>,
  priority: readonly string[] = [],
): Record<string, MessageAttributeValue> {
  const direct: [string, string][] = [];
  const packed: Record<string, string> = {};
  const seen = new Set<string>();
  const order = [HEADERS.messageId, ...priority];
  const entries = Object.entries(headers);
  const ranked = [
    ...order.flatMap((name) => entries.filter(([k]) => k.toLowerCase() === name)),
    ...entries.filter(([k]) => !order.includes(k.toLowerCase())),
  ];
  for (const [name, value] of ranked) {
    const key = name.toLowerCase();
    if (seen.has(key)) continue;
    seen.add(key);
    if (isValidAttributeName(name) && value !== '') direct.push([name, value]);
    else packed[key] = value;
  }
  const needsPack = Object.keys(packed).length > 0 || direct.length > MAX_MESSAGE_ATTRIBUTES;
  const keep = needsPack ? direct.slice(0, MAX_MESSAGE_ATTRIBUTES - 1) : direct;
  for (const [name, value] of needsPack ? direct.slice(MAX_MESSAGE_ATTRIBUTES - 1) : [])
    packed[name.toLowerCase()] = value;
  const attributes: Record<string, MessageAttributeValue> = {};
  for (const [name, value] of keep) attributes[name] = { DataType: 'String', StringValue: sqsText(value) };
  if (needsPack)
    attributes[SQS_ATTRIBUTES.packedHeaders] = {
      DataType: 'String',
      StringValue: sqsText(JSON.stringify(packed)),
    };
  return attributes;
}

function parseStringRecord(json: string | undefined): Record<string, string> | undefined {
  if (json === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(json);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(value)) if (typeof v === 'string') out[k.toLowerCase()] = v;
    return out;
  } catch {
    return undefined;
  }
}

/**
 * Decodes SQS message attributes into headers: lower-cased names, string values (binary values as base64),
 * with `x-inboxkit-headers` unpacked. An attribute of its own wins over a packed header of the same name.
 */
export function decodeMessageAttributes(
  attributes: Readonly<Record<string, MessageAttributeValue>> | undefined,
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, attr] of Object.entries(attributes ?? {})) {
    const value =
      attr.StringValue ??
      (attr.BinaryValue !== undefined ? Buffer.from(attr.BinaryValue).toString('base64') : undefined);
    if (value !== undefined) headers[name.toLowerCase()] = value;
  }
  const packed = parseStringRecord(headers[SQS_ATTRIBUTES.packedHeaders]);
  if (packed !== undefined) {
    delete headers[SQS_ATTRIBUTES.packedHeaders];
    for (const [k, v] of Object.entries(packed)) if (!(k in headers)) headers[k] = v;
  }
  return headers;
}

/**
 * Expands the JSON dead-letter record (`x-inboxkit-dead-letter`) into ordinary headers, so that core's
 * `parseDeadLetterHeaders` reads an SQS dead letter like any other. The record wins over a carried original
 * header of the same name: it describes this dead-lettering.
 */
export function expandDeadLetterHeaders(headers: Readonly<Record<string, string>>): Record<string, string> {
  const record = parseStringRecord(headers[SQS_ATTRIBUTES.deadLetter]);
  const out: Record<string, string> = { ...headers };
  if (record === undefined) return out;
  delete out[SQS_ATTRIBUTES.deadLetter];
  return { ...out, ...record };
}
