// What a demo run found, as data: main.ts prints it, the tests assert on it.

import type { OutcomeStatus } from '@inboxkit/core';

import type { DeliveryCounts, TransportName } from './demo-transport.js';

/** One dead letter as read back from the DLQ. */
export interface DeadLetterRow {
  readonly id: string | undefined;
  readonly reason: string;
  readonly attempts: number;
  /** The error message in the dead letter's headers. */
  readonly error: string;
}

/** The outcome of one replayed delivery. */
export interface ReplayedOutcome {
  readonly id: string;
  readonly status: OutcomeStatus;
  /** The duplicate's, retry's or dead letter's reason. */
  readonly reason: string | undefined;
  /** For `processed`: the attempt (1 after a replay reopened the dead letter). */
  readonly attempt: number | undefined;
}

/** One replay run through the CLI's replay engine. */
export interface ReplayRun {
  readonly replayId: string;
  /** Dead letters published back to the source and removed from the DLQ. */
  readonly replayed: number;
  readonly failed: number;
  /** Dead letters the filter left in the DLQ. */
  readonly notSelected: number;
  readonly outcomes: readonly ReplayedOutcome[];
}

/** The exactly-once check of one payment, from the payments table and the provider's log. */
export interface PaymentCheck {
  readonly paymentId: string;
  /** Rows in the payments table. */
  readonly rows: number;
  /** Calls the provider received for it. */
  readonly providerCalls: number;
  /** Distinct idempotency keys those calls carried: 1 when the key was the same on every attempt. */
  readonly keys: number;
  /** Charges the provider actually made. */
  readonly charges: number;
  /** Rows and charges there must be: 1, or 0 for a declined card. */
  readonly expected: 0 | 1;
  readonly ok: boolean;
  readonly note: string;
}

export interface DemoResult {
  readonly transport: TransportName;
  /** True when every payment was charged exactly as expected. */
  readonly ok: boolean;
  /** Before the fix and the replay. */
  readonly arrived: DeliveryCounts & { readonly published: number; readonly payments: number };
  readonly outcomes: Readonly<Record<OutcomeStatus, number>>;
  readonly duplicatesSuppressed: number;
  /** `reason: error message` of each retry, and how often. */
  readonly retries: Readonly<Record<string, number>>;
  readonly deadLetters: readonly DeadLetterRow[];
  readonly replays: readonly ReplayRun[];
  /** Dead letters still in the DLQ at the end. */
  readonly deadLettersLeft: number;
  readonly payments: readonly PaymentCheck[];
  /** Inbox rows of the consumer by status at the end. */
  readonly inbox: Readonly<Record<string, number>>;
  readonly timings: { readonly databaseMs: number; readonly totalMs: number };
}
