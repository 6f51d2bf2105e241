// Which id an SQS message is deduplicated by. The producer's id comes first (attribute, chosen body field,
// CloudEvents id); SQS's own MessageId is only an opt-in fallback because it is new on every send — a producer
// retry gets a new one — and on every redrive.

import { HEADERS } from '@inboxkit/core';

/** How `sqsConsumer` finds a message's id. */
export interface MessageIdResolution {
  readonly messageIdAttribute: string;
  readonly messageIdBodyField: string | undefined;
  readonly useSqsMessageIdAsId: boolean;
}

function parseObject(body: string | undefined): Record<string, unknown> | undefined {
  if (body === undefined || !body.trimStart().startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

function fieldAt(object: Record<string, unknown>, path: string): string | undefined {
  let value: unknown = object;
  for (const part of path.split('.')) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

/**
 * The message id, in order: the `messageIdAttribute` attribute; a binary-mode CloudEvents `ce-id` / `ce_id`
 * attribute; the `messageIdBodyField` of a JSON body (dot path); the `id` of a structured-mode CloudEvents JSON
 * body (one with `specversion`); SQS's `MessageId` when `useSqsMessageIdAsId`. `undefined` when none applies:
 * core then dead-letters the message as `missing-id`.
 */
export function resolveMessageId(
  headers: Readonly<Record<string, string>>,
  body: string | undefined,
  sqsMessageId: string | undefined,
  resolution: MessageIdResolution,
): string | undefined {
  const fromAttribute =
    headers[resolution.messageIdAttribute.toLowerCase()] ??
    headers[HEADERS.cloudEventsId] ??
    headers[HEADERS.cloudEventsIdKafka];
  if (fromAttribute !== undefined) return fromAttribute;
  const object = parseObject(body);
  if (object !== undefined) {
    if (resolution.messageIdBodyField !== undefined) {
      const field = fieldAt(object, resolution.messageIdBodyField);
      if (field !== undefined) return field;
    }
    if (typeof object.specversion === 'string' && typeof object.id === 'string') return object.id;
  }
  return resolution.useSqsMessageIdAsId ? sqsMessageId : undefined;
}
