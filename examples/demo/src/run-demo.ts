// The demo's story, on any transport: publish the stream with its double clicks, crashes and poison
// messages; read what arrived, the outcomes and the DLQ; deploy the fix; replay the DLQ through the CLI's
// replay engine, twice; and check, from the payments table and the provider's log, that every payment was
// charged exactly once. Returns everything it found; prints as it goes when given `out`.

import { parseDeadLetterHeaders } from '@inboxkit/core';
import type { DeadLetterEntry, DeadLetterQueueReader, OutcomeEvent, OutcomeStatus } from '@inboxkit/core';
import { inspectorInboxLookup, replayDeadLetters } from '@inboxkit/cli';
import type { DeadLetterFilter } from '@inboxkit/cli';
import { OutcomeRecorder } from '@inboxkit/testing';

import { openEmbeddedDatabase, openServerDatabase } from './demo-database.js';
import type { DemoDb } from './demo-database.js';
import type { DeadLetterRow, DemoResult, PaymentCheck, ReplayRun } from './demo-result.js';
import type { DemoTransport, TransportName } from './demo-transport.js';
import { FakePaymentProvider } from './payment-provider.js';
import { CONSUMER_NAME, paymentsConsumer } from './payments.js';
import { batchReader, recordingReader } from './replay-batches.js';
import * as report from './report.js';
import { checkServices, ServiceUnavailableError } from './service-settings.js';
import type { ServiceSettings } from './service-settings.js';
import { STORY, storyMessages, withTrouble } from './story.js';
import { painter } from './table.js';
import { KafkaDemoTransport } from './transports/kafka-demo-transport.js';
import { LearningDemoTransport } from './transports/learning-demo-transport.js';
import { RabbitmqDemoTransport } from './transports/rabbitmq-demo-transport.js';
import { NatsDemoTransport } from './transports/nats-demo-transport.js';
import { SqsDemoTransport } from './transports/sqs-demo-transport.js';

/** Options of `runDemo`. */
export interface RunDemoOptions {
  /** Default is `learning`: no server at all. */
  readonly transport?: TransportName;
  /** Where the real services are (for kafka, rabbitmq, sqs). */
  readonly services?: ServiceSettings;
  /** Receives the report, line by line. Default: nothing is printed. */
  readonly out?: (line: string) => void;
  /** Colour the report. Default is false. */
  readonly colour?: boolean;
  /** How long to wait for each phase to settle. Default is 60,000 ms. */
  readonly timeoutMs?: number;
}

/** The dead letters the story must produce: two copies of the old app's payment, one declined card. */
const EXPECTED_DEAD_LETTERS = 3;
/** The reasons a fix makes replayable; the others stay in the DLQ. */
const REPLAYED_REASONS = ['schema-invalid'];

async function openTransport(name: TransportName, services: ServiceSettings): Promise<DemoTransport> {
  switch (name) {
    case 'learning':
      return new LearningDemoTransport();
    case 'kafka':
      return KafkaDemoTransport.open(services.kafkaBrokers ?? []);
    case 'rabbitmq':
      return RabbitmqDemoTransport.open(services.amqpUrl!);
    case 'sqs':
      return SqsDemoTransport.open(services.sqs!);
    case 'nats':
      return NatsDemoTransport.open(services.natsUrl!);
  }
}

async function readDeadLetters(reader: DeadLetterQueueReader): Promise<DeadLetterRow[]> {
  const rows: DeadLetterRow[] = [];
  try {
    for await (const entry of reader.browse({ limit: 100 })) {
      const record = parseDeadLetterHeaders(entry.headers);
      rows.push({
        id: entry.id,
        reason: record?.reason ?? '(not an inboxkit dead letter)',
        attempts: record?.attempts ?? 0,
        // The schema error's own preamble says nothing the reason does not; keep the issues.
        error: (record?.error?.message ?? '').replace(/^the payload does not match the schema: /, ''),
      });
    }
  } finally {
    await reader.close();
  }
  return rows.sort((a, b) => (a.id ?? '').localeCompare(b.id ?? ''));
}

/** Runs the whole story once. Rejects with a `ServiceUnavailableError` when a real service is not there. */
export async function runDemo(options: RunDemoOptions = {}): Promise<DemoResult> {
  const started = performance.now();
  const transportName = options.transport ?? 'learning';
  const services = options.services ?? {};
  const timeoutMs = options.timeoutMs ?? 60_000;
  const p = painter(options.colour ?? false);
  const print = (lines: readonly string[]): void => {
    for (const line of lines) options.out?.(line);
  };

  await checkServices(transportName, services);
  let database: DemoDb;
  try {
    database =
      transportName === 'learning'
        ? await openEmbeddedDatabase()
        : await openServerDatabase(services.databaseUrl!);
  } catch (error) {
    if (transportName === 'learning') throw error;
    throw new ServiceUnavailableError(
      `cannot open Postgres at ${services.databaseUrl}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  let transport: DemoTransport | undefined;
  try {
    transport = await openTransport(transportName, services);
    print(report.headerSection(p, transport.label, database.label, database.startMs));
    return await tellTheStory(transport, database, { print, p, timeoutMs, started });
  } finally {
    await transport?.close().catch(() => undefined);
    await database.close().catch(() => undefined);
  }
}

interface Stage {
  readonly print: (lines: readonly string[]) => void;
  readonly p: ReturnType<typeof painter>;
  readonly timeoutMs: number;
  readonly started: number;
}

async function tellTheStory(transport: DemoTransport, database: DemoDb, stage: Stage): Promise<DemoResult> {
  const { print, p, timeoutMs } = stage;
  const provider = new FakePaymentProvider();
  // Each phase gets its own recorder, so a phase's outcomes are exactly what it caused.
  let recorder = new OutcomeRecorder();
  const onOutcome = (event: OutcomeEvent): void => recorder.hook(event);
  const deploy = async (version: 'v1' | 'v2'): Promise<void> => {
    const consumer = paymentsConsumer({ store: database.store, provider, version, onOutcome });
    await transport.startConsumer(consumer);
  };

  // ── 1. the stream ──────────────────────────────────────────────────────────────────────────────────────
  const messages = storyMessages(STORY);
  for (const id of withTrouble('provider-503')) provider.failNextCalls(id, 1);
  for (const id of withTrouble('crash-after-commit')) transport.injectCrash('after-commit-before-ack', id);
  for (const id of withTrouble('crash-before-commit'))
    transport.injectCrash('after-handler-before-commit', id);
  await deploy('v1');
  await transport.publish(messages);
  await transport.settle(EXPECTED_DEAD_LETTERS, timeoutMs);

  const counts = transport.deliveryCounts();
  const arrived = { ...counts, published: messages.length, payments: STORY.length };
  const events = recorder.events;
  const outcomes = recorder.counts();
  const duplicatesSuppressed = events.filter((e) => e.outcome.status === 'duplicate').length;
  const retries: Record<string, number> = {};
  for (const e of events) {
    if (e.outcome.status !== 'retry') continue;
    const what = `${e.id}: ${e.outcome.error?.message ?? e.outcome.reason}`;
    retries[what] = (retries[what] ?? 0) + 1;
  }
  const deadLetters = await readDeadLetters(transport.deadLetterReader());
  print(report.streamIntro(p, STORY, messages.length));
  print(report.arrivedSection(p, arrived, STORY));
  print(report.outcomesSection(p, outcomes, duplicatesSuppressed, retries, deadLetters));
  print(report.deadLetterSection(p, deadLetters));

  // ── 2. fix, replay, replay the same batch again ─────────────────────────────────────────────────────────
  await transport.stopConsumer();
  await deploy('v2');
  print(
    report.replayIntro(
      p,
      deadLetters.filter((d) => !REPLAYED_REASONS.includes(d.reason)),
    ),
  );
  const filter: DeadLetterFilter = { consumer: CONSUMER_NAME, reasons: REPLAYED_REASONS };
  const taken: DeadLetterEntry[] = [];
  const first = await replay(
    transport,
    recordingReader(transport.deadLetterReader(), taken),
    'replay-1',
    filter,
  );
  print(
    report.replaySection(
      p,
      first,
      `${first.replayed} dead letters replayed, ${first.notSelected} left in the DLQ`,
    ),
  );
  const second = await replay(transport, batchReader(taken), 'replay-2', filter);
  print(
    report.replaySection(
      p,
      second,
      `the same ${second.replayed} again, as if replay-1 had died before removing them from the DLQ`,
    ),
  );
  await transport.stopConsumer();

  // ── 3. the check ──────────────────────────────────────────────────────────────────────────────────────────
  const rows = await database.paymentRows();
  const calls = provider.calls;
  const payments: PaymentCheck[] = STORY.map((payment) => {
    const mine = calls.filter((c) => c.paymentId === payment.paymentId);
    const expected = payment.chargedInTheEnd ? 1 : 0;
    const check = {
      paymentId: payment.paymentId,
      rows: rows.get(payment.paymentId) ?? 0,
      providerCalls: mine.length,
      keys: new Set(mine.map((c) => c.idempotencyKey)).size,
      charges: provider.chargesFor(payment.paymentId),
      expected,
      note: payment.note,
    } as const;
    return { ...check, ok: check.rows === expected && check.charges === expected && check.keys <= 1 };
  });
  const strangers = [...rows.keys()].filter((id) => !STORY.some((s) => s.paymentId === id));
  const inbox: Record<string, number> = {};
  for (const row of await database.store.countByStatus({ consumer: CONSUMER_NAME }))
    inbox[row.status] = row.count;
  const deadLettersLeft = await transport.deadLetterCount();
  const ok = payments.every((c) => c.ok) && strangers.length === 0;
  print(report.checkSection(p, { payments, ok, inbox, deadLettersLeft }));
  const totalMs = performance.now() - stage.started;
  print(report.footer(p, totalMs));

  return {
    transport: transport.name,
    ok,
    arrived,
    outcomes,
    duplicatesSuppressed,
    retries,
    deadLetters,
    replays: [first, second],
    deadLettersLeft,
    payments,
    inbox,
    timings: { databaseMs: database.startMs, totalMs },
  };

  /** One run of the replay engine, then the outcomes of every delivery it caused. */
  async function replay(
    target: DemoTransport,
    reader: DeadLetterQueueReader,
    replayId: string,
    selection: DeadLetterFilter,
  ): Promise<ReplayRun> {
    recorder = new OutcomeRecorder();
    let summary;
    try {
      summary = await replayDeadLetters({
        transport: target.replayTransport,
        reader,
        publisher: target.publisher,
        inbox: inspectorInboxLookup(database.store),
        filter: selection,
        replayId,
        requestedBy: 'inboxkit-demo',
      });
    } finally {
      await reader.close();
    }
    const final: OutcomeStatus[] = ['processed', 'duplicate', 'dead-letter'];
    const settled = await recorder.waitForCount(summary.replayed, { status: final, timeoutMs });
    return {
      replayId,
      replayed: summary.replayed,
      failed: summary.failed,
      notSelected: summary.notSelected,
      outcomes: settled
        .filter((e) => e.message.replay?.replayId === replayId)
        .map((e) => ({
          id: e.id ?? '',
          status: e.outcome.status,
          reason: 'reason' in e.outcome ? e.outcome.reason : undefined,
          attempt: e.outcome.status === 'processed' ? e.outcome.attempt : undefined,
        })),
    };
  }
}
