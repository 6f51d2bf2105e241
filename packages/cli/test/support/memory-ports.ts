// In-process implementations of the ports the replay engine talks to: a DLQ reader, a publisher and an
// inbox that decides like core does (DESIGN §3, §6). They let the engine's own logic be tested in detail;
// the real brokers and the real core are exercised in the integration tests.

import { deadLetterHeaders, parseReplayMarker } from '@inboxkit/core';
import type {
  InboxRow,
  DeadLetterEntry,
  DeadLetterQueueReader,
  OutgoingMessage,
  Publisher,
  TakenDeadLetter,
} from '@inboxkit/core';

import type { InboxLookup, InboxRowStatus } from '../../src/inbox/inbox-lookup.js';

/** Builds a DLQ entry the way a transport writes one. */
export function deadLetter(
  id: string | undefined,
  options: {
    consumer?: string;
    reason?: string;
    destination?: string;
    transport?: string;
    deadLetteredAt?: Date;
    headers?: Record<string, string>;
    body?: string;
    position?: string;
  } = {},
): DeadLetterEntry {
  const headers = {
    ...options.headers,
    ...deadLetterHeaders({
      originalId: id,
      consumer: options.consumer ?? 'orders',
      reason: options.reason ?? 'max-attempts',
      attempts: 5,
      error: { name: 'Error', message: 'boom' },
      firstFailureAt: undefined,
      lastFailureAt: undefined,
      deadLetteredAt: options.deadLetteredAt ?? new Date('2020-01-01T00:00:00Z'),
      source: { transport: options.transport ?? 'kafka', destination: options.destination ?? 'orders-topic' },
    }),
  };
  return {
    id,
    body: options.body ?? JSON.stringify({ id }),
    headers,
    position: options.position ?? `dlq:${id ?? 'none'}`,
  };
}

/**
 * A DLQ in memory. `kind: 'log'` behaves like a Kafka topic (released entries stay where they are and are not
 * handed out again in the same pass); `kind: 'queue'` like SQS/RabbitMQ (released entries go to the back of
 * the queue and come round again).
 */
export class MemoryDeadLetterQueue implements DeadLetterQueueReader {
  readonly nonDestructiveBrowse: boolean;
  readonly entries: DeadLetterEntry[];
  readonly #kind: 'log' | 'queue';
  removeFailures = new Set<string>();
  taken = 0;
  released = 0;

  constructor(entries: DeadLetterEntry[], kind: 'log' | 'queue' = 'log') {
    this.entries = [...entries];
    this.#kind = kind;
    this.nonDestructiveBrowse = kind === 'log';
  }

  ids(): (string | undefined)[] {
    return this.entries.map((e) => e.id);
  }

  async *browse(options: { readonly limit: number }): AsyncIterable<DeadLetterEntry> {
    for (const entry of this.entries.slice(0, options.limit)) yield { ...entry };
  }

  async *take(options: { readonly limit: number }): AsyncIterable<TakenDeadLetter> {
    if (this.#kind === 'log') {
      const snapshot = [...this.entries];
      let n = 0;
      for (const entry of snapshot) {
        if (n++ >= options.limit) return;
        yield this.#taken(entry, () => undefined);
      }
      return;
    }
    for (let n = 0; n < options.limit; n += 1) {
      const entry = this.entries.shift();
      if (entry === undefined) return;
      this.taken += 1;
      let settled = false;
      try {
        yield this.#taken(
          entry,
          () => {
            this.entries.push(entry);
          },
          () => {
            settled = true;
          },
        );
      } finally {
        if (!settled) this.entries.push(entry); // broken off before settling: the broker redelivers it
      }
    }
  }

  #taken(
    entry: DeadLetterEntry,
    putBack: () => void,
    onSettle: () => void = () => undefined,
  ): TakenDeadLetter {
    return {
      ...entry,
      remove: async () => {
        if (entry.id !== undefined && this.removeFailures.has(entry.id)) {
          onSettle();
          putBack();
          throw new Error('DLQ unavailable');
        }
        onSettle();
        const i = this.entries.indexOf(entry);
        if (i >= 0) this.entries.splice(i, 1);
      },
      release: async () => {
        onSettle();
        this.released += 1;
        putBack();
      },
    };
  }

  async close(): Promise<void> {}
}

/** A publisher that appends to in-memory destinations; `failOn` ids are refused. */
export class MemoryPublisher implements Publisher {
  readonly published: OutgoingMessage[] = [];
  readonly failOn = new Set<string>();
  /** Called after each confirmed publish (tests use it to "kill" the run half-way). */
  afterPublish: (message: OutgoingMessage) => void = () => undefined;

  async publish(messages: readonly OutgoingMessage[]): Promise<void> {
    for (const m of messages) {
      if (this.failOn.has(m.id)) throw new Error(`broker refused ${m.id}`);
      this.published.push(m);
      this.afterPublish(m);
    }
  }

  async close(): Promise<void> {}
}

interface Row {
  status: InboxRowStatus;
  attempts: number;
  replays: string[];
  fingerprint: string | null;
}

/** A full core InboxRow for an in-memory row. */
function toInboxRow(consumer: string, messageId: string, row: Row): InboxRow {
  const now = new Date('2030-01-01T00:00:00Z');
  return {
    consumer,
    messageId,
    status: row.status,
    fingerprint: row.fingerprint,
    attempts: row.attempts,
    startedAttempts: 0,
    leaseToken: null,
    lockedUntil: null,
    availableAt: now,
    receivedAt: now,
    messageTimestamp: null,
    completedAt: row.status === 'completed' ? now : null,
    expiresAt: new Date(now.getTime() + 7 * 86_400_000),
    lastError: null,
    deadLetterReason: row.status === 'dead_lettered' ? 'max-attempts' : null,
    deadLetteredAt: row.status === 'dead_lettered' ? now : null,
    replayCount: row.replays.length,
    lastReplayId: row.replays.at(-1) ?? null,
    firstFailureAt: null,
    lastFailureAt: null,
    claimedFrom: null,
  };
}

/**
 * An inbox that decides like core: no row → process; completed → duplicate; dead_lettered + replay marker →
 * reopen once per replay id and process. Counts effects per id so tests can assert "applied once".
 */
export class MemoryInbox implements InboxLookup {
  readonly rows = new Map<string, Row>();
  readonly effects = new Map<string, number>();
  readonly outcomes: { id: string; outcome: 'processed' | 'duplicate' | 'ignored' | 'dead-lettered' }[] = [];
  /** Ids whose handler fails: a replay reopens the row, the attempt fails, the row is dead-lettered again. */
  readonly failing = new Set<string>();
  /** The last replay audit outcome per `consumer\u0000id`, as the consumer writes it. */
  readonly audit = new Map<string, string>();

  set(consumer: string, id: string, status: InboxRowStatus, fingerprint: string | null = null): void {
    this.rows.set(`${consumer}\u0000${id}`, {
      status,
      attempts: status === 'completed' ? 1 : 5,
      replays: [],
      fingerprint,
    });
  }

  status(consumer: string, id: string): InboxRowStatus | undefined {
    return this.rows.get(`${consumer}\u0000${id}`)?.status;
  }

  async find(consumer: string, ids: readonly string[]): Promise<ReadonlyMap<string, InboxRow>> {
    const out = new Map<string, InboxRow>();
    for (const id of ids) {
      const row = this.rows.get(`${consumer}\u0000${id}`);
      if (row) out.set(id, toInboxRow(consumer, id, row));
    }
    return out;
  }

  async lastReplayOutcomes(consumer: string, ids: readonly string[]): Promise<ReadonlyMap<string, string>> {
    const out = new Map<string, string>();
    for (const id of ids) {
      const outcome = this.audit.get(`${consumer}\u0000${id}`);
      if (outcome !== undefined) out.set(id, outcome);
    }
    return out;
  }

  /** Delivers one published message to `consumer`. */
  deliver(
    consumer: string,
    message: OutgoingMessage,
  ): 'processed' | 'duplicate' | 'ignored' | 'dead-lettered' {
    const key = `${consumer}\u0000${message.id}`;
    const row = this.rows.get(key);
    const marker = parseReplayMarker(message.headers ?? {});
    let outcome: 'processed' | 'duplicate' | 'ignored' | 'dead-lettered';
    if (row === undefined) {
      this.rows.set(key, { status: 'completed', attempts: 1, replays: [], fingerprint: null });
      outcome = 'processed';
    } else if (row.status === 'completed') {
      outcome = 'duplicate';
    } else if (
      row.status === 'dead_lettered' &&
      marker !== undefined &&
      !row.replays.includes(marker.replayId)
    ) {
      row.replays.push(marker.replayId);
      row.status = this.failing.has(message.id) ? 'dead_lettered' : 'completed';
      row.attempts = 1;
      outcome = row.status === 'completed' ? 'processed' : 'dead-lettered';
    } else {
      outcome = 'ignored';
    }
    if (outcome === 'processed') this.effects.set(message.id, (this.effects.get(message.id) ?? 0) + 1);
    this.outcomes.push({ id: message.id, outcome });
    return outcome;
  }
}

/** A clock that only moves when slept on; records every sleep. */
export class FakeClock {
  #now: number;
  readonly sleeps: number[] = [];

  constructor(start = Date.parse('2030-01-02T00:00:00Z')) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  async sleep(ms: number): Promise<void> {
    this.sleeps.push(ms);
    if (ms > 0) this.#now += ms;
  }
}
