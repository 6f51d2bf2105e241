// The one safe replay path behind `inboxkit dlq replay` and the console's replay button: open the DLQ's
// transport (with a confirming publisher unless it is a dry run), run the replay engine with the inbox lookup,
// and let go of the transport whatever happens. Nothing else in the CLI publishes a dead letter back.

import type { CliServices, OpenedTransport } from '../cli-services.js';
import type { TransportName } from '../command-line.js';
import type { InboxLookup } from '../inbox/inbox-lookup.js';
import type { ConnectionSettings } from '../settings/connection-settings.js';
import type { Clock } from './clock.js';
import type { DeadLetterFilter } from './dead-letter-filter.js';
import { replayDeadLetters } from './replay-dead-letters.js';
import type { ReplayDeadLettersOptions, ReplayEntryResult, ReplaySummary } from './replay-dead-letters.js';

/** One replay (or dry run) of a DLQ, as an operator asked for it. */
export interface DlqReplayRequest {
  readonly transport: TransportName;
  /** The DLQ: Kafka topic, RabbitMQ queue, SQS queue URL or name. */
  readonly from: string;
  /** Kafka: the consumer group that tracks what was removed from the DLQ topic. */
  readonly group?: string | undefined;
  /** Publish here instead of each dead letter's recorded source (resolved by the transport). */
  readonly to?: string | undefined;
  readonly filter: DeadLetterFilter;
  readonly limit?: number | undefined;
  readonly ratePerSecond?: number | undefined;
  readonly dryRun: boolean;
  /** Replay parked dead letters too (see `isParked`). Default is `false`. */
  readonly includeParked?: boolean | undefined;
  /** The consumers' `fingerprint` options by consumer name, for the `payload-mismatch` prediction. Default none. */
  readonly fingerprints?: ReplayDeadLettersOptions['fingerprints'];
  readonly replayId: string;
  readonly requestedBy: string;
}

/** What `replayFromDlq` needs around the request. */
export interface ReplayFromDlqContext {
  readonly services: CliServices;
  readonly connection: ConnectionSettings;
  /** Reads the inbox for predictions; without it every prediction is `unknown`. */
  readonly inbox: InboxLookup | undefined;
  readonly clock: Clock;
  readonly signal?: AbortSignal | undefined;
  /** Called once the transport is open, before the first message (the CLI prints its header line here). */
  readonly onOpened?: ((transport: OpenedTransport, to: string | undefined) => void) | undefined;
  readonly onEntry?: ((result: ReplayEntryResult) => void) | undefined;
  /** See `ReplayDeadLettersOptions.beforePublish` (edit and retry). */
  readonly beforePublish?: ReplayDeadLettersOptions['beforePublish'];
}

/**
 * Opens the transport of `request.from`, replays (or dry-runs) the selected dead letters through
 * `replayDeadLetters` — publish with the broker's confirmation, then remove — and closes the transport.
 *
 * @example
 * const summary = await replayFromDlq(
 *   { transport: 'rabbitmq', from: 'orders.dlq', filter: { ids: ['o-1'] }, dryRun: true, replayId, requestedBy: 'alice' },
 *   { services: defaultCliServices(process.env), connection, inbox, clock: systemClock },
 * );
 */
export async function replayFromDlq(
  request: DlqReplayRequest,
  context: ReplayFromDlqContext,
): Promise<ReplaySummary> {
  const transport = await context.services.openTransport(request.transport, context.connection, {
    from: request.from,
    group: request.group,
    publish: !request.dryRun,
  });
  try {
    const to = request.to === undefined ? undefined : await transport.resolveDestination(request.to);
    context.onOpened?.(transport, to);
    return await replayDeadLetters({
      transport: request.transport,
      reader: transport.reader,
      publisher: transport.publisher,
      inbox: context.inbox,
      to,
      filter: request.filter,
      limit: request.limit,
      ratePerSecond: request.ratePerSecond,
      dryRun: request.dryRun,
      includeParked: request.includeParked,
      fingerprints: request.fingerprints,
      replayId: request.replayId,
      requestedBy: request.requestedBy,
      clock: context.clock,
      signal: context.signal,
      onEntry: context.onEntry,
      beforePublish: context.beforePublish,
    });
  } finally {
    await transport.close().catch(() => undefined);
  }
}
