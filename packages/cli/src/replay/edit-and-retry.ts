// Edit and retry (issue 28): replays one dead letter with a corrected payload under its own message id, as an
// explicit, audited act. The payload is checked first (JSON, then the consumer's schema when one is given) and
// refused with the schema's own message before anything is written or published. Then, with the DLQ copy in
// hand, the inbox row's fingerprint is amended (who, when, old and new fingerprints, the operator's reason:
// `InboxStore.amendDeadLetter`), and only then is the corrected copy published with a replay marker and the
// DLQ copy removed — the path of every replay (`replayDeadLetters`). The consumer's claim then reopens the row
// once for that payload; the old payload, or any other one sent without this act, is still `payload-mismatch`.
// The amended fingerprint is the consumer's own for the corrected payload: with its `fingerprint` option when
// the request carries it (a consumer that leaves `sentAt` out would otherwise see another fingerprint than the
// amended one, and dead-letter the replay as `payload-mismatch` again).

import { checkFingerprintResolver, decodeJsonBody, fingerprintJson, fingerprintPayload, validatePayload } from '@inboxkit/core';
import type { FingerprintInput, FingerprintResolver, InboxRow, InboxStore, PayloadSchema } from '@inboxkit/core';

import type { CliServices } from '../cli-services.js';
import type { TransportName } from '../command-line.js';
import type { InboxLookup } from '../inbox/inbox-lookup.js';
import type { ConnectionSettings } from '../settings/connection-settings.js';
import type { Clock } from './clock.js';
import type { ReplayEntryResult } from './replay-dead-letters.js';
import { replayFromDlq } from './replay-from-dlq.js';
import { silentNumberChanges } from './silent-number-changes.js';

function bodyText(body: Uint8Array | string | null): string {
  if (body === null) return '';
  return typeof body === 'string' ? body : Buffer.from(body).toString('utf8');
}

/** One edit and retry, as an operator asked for it. */
export interface EditAndRetryRequest {
  readonly transport: TransportName;
  /** The DLQ: Kafka topic, RabbitMQ queue, SQS queue URL or name. */
  readonly from: string;
  /** Kafka: the consumer group that tracks what was removed from the DLQ topic. */
  readonly group?: string | undefined;
  /** Publish here instead of the recorded source. */
  readonly to?: string | undefined;
  readonly consumer: string;
  readonly messageId: string;
  /** The corrected payload: the body to publish, JSON text (the consumer's default decoder). */
  readonly payload: string;
  /** Why, in the operator's words; required. */
  readonly reason: string;
  readonly requestedBy: string;
  /** The replay id the corrected copy carries; the amendment is audited under it. */
  readonly replayId: string;
  /** The consumer's payload schema; without it the payload is checked as JSON only. */
  readonly schema?: PayloadSchema<unknown> | undefined;
  /**
   * The consumer's `fingerprint` option, when it has one: the edit is fingerprinted with it (a function gets the
   * id, the corrected payload and the DLQ copy's headers). Without it, the whole payload, as a consumer without
   * the option does. Default: none.
   */
  readonly fingerprint?: FingerprintResolver<FingerprintInput> | undefined;
}

/** What an edit and retry needs around the request. */
export interface EditAndRetryContext {
  readonly services: CliServices;
  readonly connection: ConnectionSettings;
  /** The inbox: its row is read and amended here. */
  readonly store: Pick<InboxStore, 'findRows' | 'amendDeadLetter'>;
  /** Reads the inbox for the replay's prediction. */
  readonly inbox: InboxLookup | undefined;
  readonly clock: Clock;
}

/**
 * The result: `replayed` (the row amended — or already holding the corrected fingerprint from an earlier edit
 * whose publish failed — and the corrected copy published and removed from the DLQ), `refused` (nothing was
 * written or published; `why` says what to change), or `failed` (the copy was not published or not removed:
 * `entry.detail`; the amendment, if made, stays audited and the same edit can be run again).
 */
export type EditAndRetryResult =
  | {
      readonly kind: 'replayed' | 'failed';
      readonly replayId: string;
      readonly fromFingerprint: string | null;
      readonly toFingerprint: string;
      /** False when the row already held the corrected fingerprint (an earlier, audited edit). */
      readonly amended: boolean;
      readonly entry: ReplayEntryResult;
    }
  | { readonly kind: 'refused'; readonly why: string };

/**
 * Checks the corrected payload as the consumer will: its fingerprint, or why it is refused. `identity` is the
 * consumer's `fingerprint` option with the input its function form gets (the id, the DLQ copy's headers);
 * without it the whole payload is fingerprinted (a consumer without the option).
 */
export async function checkEditedPayload(
  payload: string,
  schema: PayloadSchema<unknown> | undefined,
  identity?: {
    readonly fingerprint: FingerprintResolver<FingerprintInput>;
    readonly id: string;
    readonly headers: Readonly<Record<string, string>>;
  },
): Promise<{ readonly fingerprint: string } | { readonly refused: string }> {
  let decoded: { readonly text: string; readonly value: unknown };
  try {
    decoded = decodeJsonBody(payload);
  } catch (error) {
    return { refused: (error as Error).message };
  }
  if (schema !== undefined) {
    try {
      await validatePayload(schema, decoded.value);
    } catch (error) {
      return { refused: (error as Error).message };
    }
  }
  if (identity === undefined) return { fingerprint: fingerprintJson(decoded.text, decoded.value) };
  try {
    const resolver = checkFingerprintResolver(identity.fingerprint, 'fingerprint');
    const input: FingerprintInput = { id: identity.id, payload: decoded.value, headers: identity.headers };
    return { fingerprint: fingerprintPayload(resolver!.project(input, decoded.value)) };
  } catch (error) {
    return { refused: `the consumer's fingerprint option could not fingerprint it: ${(error as Error).message}` };
  }
}

function rowRefusal(row: InboxRow | undefined, consumer: string, id: string): string | undefined {
  if (row === undefined) return `no inbox row for ${id} in consumer ${consumer}: there is nothing to amend`;
  if (row.status === 'dead_lettered') return undefined;
  if (row.status === 'completed')
    return `${id} is completed in consumer ${consumer}: it was applied already; forget it first to apply it again`;
  return `${id} is ${row.status} in consumer ${consumer}: only a dead-lettered message can be edited`;
}

/**
 * Edits one dead letter's payload and replays it once (see the module comment). Never publishes a payload that
 * fails its check, never publishes without the amendment (or an earlier one to the same payload) in the audit,
 * and refuses a payload whose numbers differ from the DLQ copy's only where a double cannot tell them apart
 * (`silentNumberChanges`: an id beyond 2^53 rounded by a re-serialisation).
 *
 * @example
 * const result = await editAndRetry(
 *   { transport: 'rabbitmq', from: 'orders.dlq', consumer: 'orders', messageId: 'o-1',
 *     payload: '{"orderId":"o-1","amountCents":500}', reason: 'amount was negative', requestedBy: 'alice',
 *     replayId: randomUUID(), schema: Order },
 *   { services, connection, store, inbox, clock: systemClock },
 * );
 */
export async function editAndRetry(
  request: EditAndRetryRequest,
  context: EditAndRetryContext,
): Promise<EditAndRetryResult> {
  if (request.reason.trim() === '')
    return { kind: 'refused', why: 'give a reason: an edit is an audited act' };
  const checked = await checkEditedPayload(request.payload, request.schema);
  if ('refused' in checked)
    return { kind: 'refused', why: `the edited payload is refused: ${checked.refused}` };
  const amend = context.store.amendDeadLetter?.bind(context.store);
  if (amend === undefined) return { kind: 'refused', why: 'this inbox store cannot amend a dead letter' };
  const [row] = await context.store.findRows(request.consumer, [request.messageId]);
  const refusal = rowRefusal(row, request.consumer, request.messageId);
  if (refusal !== undefined || row === undefined) return { kind: 'refused', why: refusal ?? '' };
  const fromFingerprint = row.fingerprint;
  let toFingerprint = checked.fingerprint;
  let amended = false;
  let refusedInHand: string | undefined;

  const summary = await replayFromDlq(
    {
      transport: request.transport,
      from: request.from,
      group: request.group,
      to: request.to,
      filter: { consumer: request.consumer, ids: [request.messageId] },
      limit: 1,
      dryRun: false,
      includeParked: true,
      replayId: request.replayId,
      requestedBy: request.requestedBy,
    },
    {
      services: context.services,
      connection: context.connection,
      inbox: context.inbox,
      clock: context.clock,
      // With the DLQ copy in hand: amend (audited), then the corrected body is published.
      beforePublish: async (entry) => {
        const silent = silentNumberChanges(bodyText(entry.body), request.payload);
        if (silent.length > 0) {
          refusedInHand = `the edited payload changes numbers that are equal to JavaScript, so no one changed them on purpose (a re-serialisation rounded them?): ${silent
            .slice(0, 5)
            .map((c) => `${c.path}: ${c.from} became ${c.to}`)
            .join(', ')}; edit the dead letter's own text and keep those numbers as they were written`;
          return { refused: refusedInHand };
        }
        if (request.fingerprint !== undefined) {
          const identity = { fingerprint: request.fingerprint, id: request.messageId, headers: entry.headers };
          const own = await checkEditedPayload(request.payload, undefined, identity);
          if ('refused' in own) {
            refusedInHand = `the edited payload is refused: ${own.refused}`;
            return { refused: refusedInHand };
          }
          toFingerprint = own.fingerprint;
        }
        if (fromFingerprint !== toFingerprint) {
          const result = await amend({
            consumer: request.consumer,
            messageId: request.messageId,
            fromFingerprint,
            toFingerprint,
            replayId: request.replayId,
            requestedBy: request.requestedBy,
            reason: request.reason,
          });
          if (result.kind !== 'amended') {
            refusedInHand =
              result.kind === 'fingerprint-changed'
                ? `the inbox row changed meanwhile (another operator's edit?): it now holds ${result.row.fingerprint ?? 'no fingerprint'}; look again`
                : (rowRefusal(
                    result.kind === 'no-row' ? undefined : result.row,
                    request.consumer,
                    request.messageId,
                  ) ?? result.kind);
            return { refused: refusedInHand };
          }
          amended = true;
        }
        return { body: request.payload };
      },
    },
  );
  const entry = summary.entries[0];
  if (entry === undefined) {
    return {
      kind: 'refused',
      why: `${request.messageId} of consumer ${request.consumer} is not in the DLQ ${request.from} (replayed or removed already?): nothing was changed`,
    };
  }
  if (refusedInHand !== undefined) return { kind: 'refused', why: `${refusedInHand}: nothing was published` };
  return {
    kind: entry.action === 'replayed' ? 'replayed' : 'failed',
    replayId: request.replayId,
    fromFingerprint,
    toFingerprint,
    amended,
    entry,
  };
}
