// The redelivery contract test for users' own handlers: deliver the same message the ways at-least-once
// brokers do (twice in a row, many times at once, and around a crash) and count, through the user's own
// query, that its effect exists exactly once each time.

import { AssertionError } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

import type { IdempotentConsumer, InboundMessage, Outcome, SourceCoordinates } from '@inboxkit/core';

import { crashableConsumer } from './crashable-consumer.js';
import { describeOutcome } from './describe-outcome.js';

/** The ways the contract test delivers one message. */
export type IdempotencyScenario = 'sequential' | 'parallel' | 'crash-before-commit' | 'crash-before-ack';

/** Every scenario, in the order they run. */
export const IDEMPOTENCY_SCENARIOS: readonly IdempotencyScenario[] = [
  'sequential',
  'parallel',
  'crash-before-commit',
  'crash-before-ack',
];

const DESCRIPTIONS: Record<IdempotencyScenario, string> = {
  sequential: 'the same message delivered twice in sequence',
  parallel: 'the same message delivered {n} times in parallel',
  'crash-before-commit': 'a crash after the handler, before the commit, then a redelivery',
  'crash-before-ack': 'a crash after the commit, before the ack, then a redelivery',
};

/** Which delivery the message factory is asked for. */
export interface DeliveryInfo {
  readonly scenario: IdempotencyScenario;
  /** The message id of this scenario (the given id plus a per-run suffix). */
  readonly id: string;
  /** 1-based number of the delivery within the scenario. */
  readonly delivery: number;
  /** The broker's count of this copy: 1, or more on a redelivery of the same copy. */
  readonly deliveryCount: number;
}

/** The message to deliver: the parts a transport would fill. */
export interface IdempotencyTestMessage {
  /** The message id. Default is `message`. Each scenario appends its own suffix so its inbox row is fresh. */
  readonly id?: string;
  readonly body: string | Uint8Array | null;
  readonly headers?: Readonly<Record<string, string>>;
  readonly timestamp?: Date;
  readonly source?: SourceCoordinates;
}

/** Options of `assertIdempotentHandler`. */
export interface AssertIdempotentHandlerOptions {
  /**
   * Counts the effects of one message in your database (rows written, calls recorded). Receives the
   * scenario's message id. Each scenario must add exactly one effect to what was counted before it.
   */
  readonly countEffects: (context: {
    readonly id: string;
    readonly scenario: IdempotencyScenario;
  }) => number | Promise<number>;
  /**
   * Called before each scenario. Pass it when your effects are keyed by the payload (an upsert by order id), so
   * a scenario's effect would otherwise merge into the previous one's. Default: none.
   */
  readonly reset?: () => void | Promise<void>;
  /** Deliveries in the parallel scenario. Default is 10. */
  readonly parallel?: number;
  /** The scenarios to run. Default is all four. */
  readonly scenarios?: readonly IdempotencyScenario[];
  /** Longest time one scenario may take, retries and their delays included. Default is 30,000 ms. */
  readonly timeoutMs?: number;
}

/** What one scenario did and counted. */
export interface IdempotencyScenarioReport {
  readonly scenario: IdempotencyScenario;
  readonly description: string;
  readonly id: string;
  readonly deliveries: number;
  /** One line per delivery: the outcome, `crash (…)` for a crashed one, or the error `handle()` rejected with. */
  readonly outcomes: readonly string[];
  readonly effectsBefore: number;
  readonly effectsAfter: number;
  /** `effectsAfter - effectsBefore`: must be 1. */
  readonly effects: number;
  readonly passed: boolean;
  /** Why the scenario failed, when it did. */
  readonly problem?: string;
}

/** The result of `assertIdempotentHandler`. */
export interface IdempotencyReport {
  readonly consumer: string;
  readonly scenarios: readonly IdempotencyScenarioReport[];
  readonly passed: boolean;
}

/** Thrown when a scenario did not end with exactly one effect. `report` has every scenario's details. */
export class IdempotencyAssertionError extends AssertionError {
  readonly report: IdempotencyReport;

  constructor(report: IdempotencyReport) {
    super({
      message: formatIdempotencyReport(report),
      actual: Object.fromEntries(report.scenarios.map((s) => [s.scenario, s.effects])),
      expected: Object.fromEntries(report.scenarios.map((s) => [s.scenario, 1])),
      operator: 'assertIdempotentHandler',
    });
    this.name = 'IdempotencyAssertionError';
    this.report = report;
  }
}

/**
 * Proves that `consumer`'s handler applies `message` exactly once however it is delivered: twice in
 * sequence, `parallel` times at once, with a crash after the handler but before the commit, and with a crash
 * after the commit but before the ack (each crash followed by a redelivery). After each scenario it counts
 * effects with `countEffects()`; unless every scenario added exactly one, it throws an
 * `IdempotencyAssertionError` whose message lists each scenario's deliveries, outcomes and counts. Resolves
 * with the report otherwise. Works with any store; a retry outcome is redelivered after its delay, as a
 * broker would.
 *
 * `message` may be a function that builds each delivery: use it to check your own id mapping (an id taken
 * from a broker coordinate that changes on redelivery is caught here).
 *
 * @example
 * await assertIdempotentHandler(consumer, { id: 'order-1', body: JSON.stringify({ total: 5 }) }, {
 *   countEffects: ({ id }) => db.selectFrom('orders').where('message_id', '=', id).select(db.fn.countAll().as('n'))
 *     .executeTakeFirstOrThrow().then((r) => Number(r.n)),
 * });
 */
export async function assertIdempotentHandler<P, Tx>(
  consumer: IdempotentConsumer<P, Tx>,
  message: IdempotencyTestMessage | ((delivery: DeliveryInfo) => IdempotencyTestMessage),
  options: AssertIdempotentHandlerOptions,
): Promise<IdempotencyReport> {
  const parallel = options.parallel ?? 10;
  if (!(Number.isInteger(parallel) && parallel >= 2)) throw new RangeError('parallel must be an integer ≥ 2');
  const scenarios = options.scenarios ?? IDEMPOTENCY_SCENARIOS;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const crashable = crashableConsumer(consumer);
  const run = randomBytes(4).toString('hex');
  const baseId = typeof message === 'function' ? 'message' : (message.id ?? 'message');

  const reports: IdempotencyScenarioReport[] = [];
  for (const scenario of scenarios) {
    await options.reset?.();
    const id = `${baseId}:${scenario}:${run}`;
    const deadline = Date.now() + timeoutMs;
    const lines: string[] = [];
    let deliveries = 0;
    let problem: string | undefined;

    const build = (deliveryCount: number): InboundMessage => {
      deliveries += 1;
      const info: DeliveryInfo = { scenario, id, delivery: deliveries, deliveryCount };
      return toInbound(typeof message === 'function' ? message(info) : { ...message, id }, deliveryCount);
    };
    const record = (outcome: Outcome, inbound: InboundMessage): Outcome => {
      lines.push(describeOutcome({ id: outcome.messageId ?? inbound.id, outcome }));
      return outcome;
    };
    const deliver = async (deliveryCount: number): Promise<Outcome> => {
      const inbound = build(deliveryCount);
      return record(await crashable.handle(inbound), inbound);
    };
    /** Delivers, and redelivers after each retry's delay, until the outcome is final or time is up. */
    const settle = async (first: Outcome | undefined, deliveryCount: number): Promise<Outcome> => {
      let outcome = first ?? (await deliver(deliveryCount));
      let count = deliveryCount;
      while (outcome.status === 'retry' && Date.now() + outcome.delayMs < deadline) {
        await sleep(outcome.delayMs);
        count += 1;
        outcome = await deliver(count);
      }
      return outcome;
    };

    const effectsBefore = await options.countEffects({ id, scenario });
    try {
      switch (scenario) {
        case 'sequential':
          // Two copies from the producer: each is a first delivery for the broker.
          await settle(undefined, 1);
          await settle(undefined, 1);
          break;
        case 'parallel': {
          const outcomes = await Promise.all(Array.from({ length: parallel }, () => deliver(1)));
          for (const outcome of outcomes) if (outcome.status === 'retry') await settle(outcome, 1);
          break;
        }
        case 'crash-before-commit': {
          let count = 1;
          for (;;) {
            const inbound = build(count);
            const attempt = await crashable.handleCrashingAfterHandler(inbound);
            if (attempt.crashed) {
              lines.push(`crash after the handler returned, before the commit (${inbound.id ?? 'no id'})`);
              break;
            }
            record(attempt.outcome, inbound);
            if (attempt.outcome.status !== 'retry' || Date.now() + attempt.outcome.delayMs >= deadline) {
              problem = 'the crash could not be injected: the handler never returned normally';
              break;
            }
            await sleep(attempt.outcome.delayMs);
            count += 1;
          }
          if (problem === undefined) await settle(undefined, count + 1);
          break;
        }
        case 'crash-before-ack': {
          await settle(undefined, 1);
          lines.push('crash after the commit, before the ack');
          await settle(undefined, 2);
          break;
        }
      }
    } catch (error) {
      problem = `handle() rejected: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
      lines.push(problem);
    }
    const effectsAfter = await options.countEffects({ id, scenario });
    const effects = effectsAfter - effectsBefore;
    if (problem === undefined && effects !== 1) problem = `expected exactly 1 effect, counted ${effects}`;
    reports.push({
      scenario,
      description: DESCRIPTIONS[scenario].replace('{n}', String(parallel)),
      id,
      deliveries,
      outcomes: lines,
      effectsBefore,
      effectsAfter,
      effects,
      passed: problem === undefined,
      ...(problem !== undefined ? { problem } : {}),
    });
  }
  const report: IdempotencyReport = {
    consumer: consumer.name,
    scenarios: reports,
    passed: reports.every((r) => r.passed),
  };
  if (!report.passed) throw new IdempotencyAssertionError(report);
  return report;
}

/** The report as text: one block per scenario, failures first. */
export function formatIdempotencyReport(report: IdempotencyReport): string {
  const failed = report.scenarios.filter((s) => !s.passed);
  const head = report.passed
    ? `assertIdempotentHandler: consumer "${report.consumer}" applied the message exactly once in all ${report.scenarios.length} scenarios.`
    : `assertIdempotentHandler: consumer "${report.consumer}" broke exactly-once in ${failed.length} of ${report.scenarios.length} scenarios.`;
  const blocks = [...failed, ...report.scenarios.filter((s) => s.passed)].map((s) =>
    [
      `${s.passed ? '✓' : '✗'} ${s.scenario}: ${s.description}`,
      ...(s.problem !== undefined ? [`    problem: ${s.problem}`] : []),
      `    message id: ${s.id}`,
      `    deliveries: ${s.deliveries}`,
      `    outcomes:${s.outcomes.length === 0 ? ' (none)' : ''}`,
      ...s.outcomes.map((o, i) => `      ${i + 1}. ${o}`),
      `    effects counted: ${s.effectsBefore} before, ${s.effectsAfter} after (${s.effects} new, expected 1)`,
      ...(s.passed ? [] : [`    hint: ${hint(s)}`]),
    ].join('\n'),
  );
  return [head, ...blocks].join('\n');
}

function hint(s: IdempotencyScenarioReport): string {
  if (s.problem?.startsWith('handle() rejected') === true)
    return 'handle() must resolve to an outcome; a rejection is a bug in the consumer or its store';
  if (s.effects <= 0)
    return 'the message was never applied: read the outcomes above (a dead letter, retries that ran out of time)';
  if (s.scenario === 'crash-before-commit') {
    return 'an effect written outside context.tx (another connection, an in-memory list, an HTTP call) survived the rollback and the redelivery applied it again: write it through context.tx, or make it idempotent with context.downstreamKey';
  }
  return 'the deliveries were not recognised as one message: check that its id is the same on every delivery (not a broker coordinate) and that the consumer claims it in an inbox';
}

function toInbound(message: IdempotencyTestMessage, deliveryCount: number): InboundMessage {
  return {
    id: message.id,
    body: message.body,
    headers: { ...message.headers, ...(message.id !== undefined ? { 'message-id': message.id } : {}) },
    ...(message.timestamp ? { timestamp: message.timestamp } : {}),
    deliveryCount,
    source: message.source ?? { transport: 'memory', destination: 'assert-idempotent-handler' },
  };
}
