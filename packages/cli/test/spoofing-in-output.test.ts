// Ids, consumer names, reasons and error messages are chosen by whoever publishes a message. None of them may
// hide, fake or reorder what the CLI prints, or drive the operator's terminal: status (real Postgres), dlq list,
// dlq replay (progress lines, progress bar, summary, dry run), doctor and the error path all print them escaped,
// and --json keeps them exact while escaping them.

import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { deadLetterHeaders } from '@inboxkit/core';
import type { DeadLetterEntry } from '@inboxkit/core';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { CliServices } from '../src/cli-services.js';
import { runCli } from '../src/run-cli.js';
import { captureIo } from './support/capture-io.js';
import { inboxDatabase } from './support/inbox-database.js';
import type { InboxDatabase } from './support/inbox-database.js';
import { MemoryDeadLetterQueue, MemoryPublisher } from './support/memory-ports.js';
import { requireService } from './support/services.js';

/** Each spoof and how the CLI must show it. */
const SPOOFS: readonly (readonly [raw: string, shown: string])[] = [
  ['   ', '"   "'],
  ['\u200b', '"\\u{200b}"'],
  ['ord\u200bers', '"ord\\u{200b}ers"'],
  ['abc\u202edcba', '"abc\\u{202e}dcba"'],
  ['\u2066x\u2069', '"\\u{2066}x\\u{2069}"'],
  ['a\u001b[2Jb', '"a\\u{1b}[2Jb"'],
  ['\u001b]0;pwned\u0007', '"\\u{1b}]0;pwned\\u{7}"'],
  ['x\u009b31my', '"x\\u{9b}31my"'],
  ['id\u00a0', '"id\\u{a0}"'],
  ['one\ntwo', '"one\\ntwo"'],
  ['\ufeffid', '"\\u{feff}id"'],
  ['id\u{e0001}', '"id\\u{e0001}"'],
  ['\u3164', '"\\u{3164}"'],
  ['"quoted"', '"\\"quoted\\""'],
];

/**
 * What must never reach the output raw: C0 controls but the line break, DEL and C1, no-break and other odd
 * spaces, soft hyphen, bidi marks/embeddings/overrides/isolates, zero-width characters, word joiner and
 * invisible operators, BOM, tags, Hangul filler. (The progress bar's own `\r` + erase-line is allowed.)
 */
const RAW_UNSAFE = new RegExp(
  // eslint-disable-next-line no-control-regex -- the control characters are what is looked for
  '[\\u0000-\\u0009\\u000b-\\u001f\\u007f-\\u009f\\u00a0\\u00ad\\u061c\\u180e\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\u3164\\ufeff\\u{e0000}-\\u{e007f}]',
  'u',
);

function expectSafe(output: string): void {
  // eslint-disable-next-line no-control-regex -- the progress bar's own erase-line
  const stripped = output.replace(/\r\u001b\[2K/g, '');
  const bad = RAW_UNSAFE.exec(stripped);
  expect(bad, bad === null ? '' : `raw U+${bad[0].codePointAt(0)!.toString(16)} at ${bad.index}`).toBeNull();
}

function entry(id: string, consumer: string, reason: string, error: string, i: number): DeadLetterEntry {
  return {
    id,
    body: JSON.stringify({ i }),
    position: `dlq:${i}`,
    headers: deadLetterHeaders({
      originalId: id,
      consumer,
      reason,
      attempts: 5,
      error: { name: `Error${consumer}`, message: error },
      firstFailureAt: undefined,
      lastFailureAt: undefined,
      deadLetteredAt: new Date('2030-01-01T00:00:00Z'),
      source: { transport: 'sqs', destination: `queue-${i}` },
    }),
  };
}

let database: InboxDatabase;

async function run(
  argv: string[],
  options: { services?: CliServices; tty?: boolean; cwd?: string } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const io = captureIo({ tty: options.tty ?? false });
  const code = await runCli(argv, { ...io.io, cwd: options.cwd }, { services: options.services });
  return { code, stdout: io.stdout(), stderr: io.stderr() };
}

function dlqServices(entries: DeadLetterEntry[], publisher = new MemoryPublisher()): CliServices {
  return {
    openDatabase: async () => {
      throw new Error('not used');
    },
    openTransport: async () => ({
      reader: new MemoryDeadLetterQueue(entries, 'queue'),
      publisher,
      resolveDestination: async (to) => to,
      close: async () => undefined,
    }),
  };
}

beforeAll(async () => {
  database = await inboxDatabase();
  const t = sql.table(`${database.schema}.inbox`);
  const details = sql.table(`${database.schema}.inbox_details`);
  for (const [i, [raw]] of SPOOFS.entries()) {
    // A spoofed id in processing (the oldest of its consumer is printed), a spoofed consumer, a spoofed reason.
    await sql`insert into ${t} (consumer, message_id, status, attempts, expires_at, changed_at)
      values (${`c-${i}`}, ${raw}, 'processing', 1, now() + interval '7 days', now() - interval '1 hour')`.execute(database.db);
    await sql`insert into ${details} (consumer, message_id, received_at, lease_token, locked_until)
      values (${`c-${i}`}, ${raw}, now() - interval '1 hour', gen_random_uuid(), now() + interval '1 minute')`.execute(database.db);
    await sql`insert into ${t} (consumer, message_id, status, attempts, expires_at, changed_at)
      values (${raw}, ${`m-${i}`}, 'dead_lettered', 5, now() + interval '7 days', now())`.execute(database.db);
    await sql`insert into ${details} (consumer, message_id, received_at, dead_letter_reason, dead_lettered_at)
      values (${raw}, ${`m-${i}`}, now(), ${raw}, now())`.execute(database.db);
  }
});
afterAll(async () => {
  await database?.dispose();
});

describe('inboxkit status', () => {
  it('shows spoofed ids, consumers and reasons escaped, and --json keeps them exact', async () => {
    const args = ['status', '--database-url', requireService('DATABASE_URL'), '--schema', database.schema];
    const text = await run(args);
    expect(text.code).toBe(0);
    expectSafe(text.stdout + text.stderr);
    for (const [, shown] of SPOOFS) {
      expect(text.stdout).toContain(`oldest processing: ${shown}, received`);
      expect(text.stdout).toContain(`\n${shown}:\n`);
      expect(text.stdout).toContain(`dead letters by reason: ${shown} 1`);
    }

    const json = await run([...args, '--json']);
    expectSafe(json.stdout);
    const report = JSON.parse(json.stdout) as {
      consumers: { consumer: string; oldestProcessing?: { messageId: string } }[];
    };
    for (const [raw] of SPOOFS) {
      expect(report.consumers.map((c) => c.consumer)).toContain(raw);
      expect(report.consumers.map((c) => c.oldestProcessing?.messageId)).toContain(raw);
    }
  });

  it('names a spoofed --consumer escaped when it has no rows', async () => {
    const { stdout } = await run([
      'status',
      '--database-url',
      requireService('DATABASE_URL'),
      '--schema',
      database.schema,
      '--consumer',
      'nobody\u202e',
    ]);
    expect(stdout).toContain('No rows for consumer "nobody\\u{202e}".');
    expectSafe(stdout);
  });
});

describe('inboxkit dlq list', () => {
  it('shows spoofed ids, consumers, reasons and errors escaped; --json keeps them exact', async () => {
    const entries = SPOOFS.map(([raw], i) => entry(raw, raw, raw, `failed on ${raw}`, i));
    const argv = ['dlq', 'list', '--transport', 'sqs', '--from', 'dlq\u200b'];
    const text = await run(argv, { services: dlqServices(entries) });
    expect(text.code).toBe(0);
    expectSafe(text.stdout + text.stderr);
    expect(text.stdout).toContain('sqs DLQ "dlq\\u{200b}"');
    for (const [, shown] of SPOOFS) expect(text.stdout).toContain(`  ${shown}  `);

    const json = await run([...argv, '--json'], { services: dlqServices(entries) });
    expectSafe(json.stdout);
    const listing = JSON.parse(json.stdout) as { entries: { id: string; reason: string; error: string }[] };
    expect(listing.entries.map((e) => e.id)).toEqual(SPOOFS.map(([raw]) => raw));
    expect(listing.entries.map((e) => e.reason)).toEqual(SPOOFS.map(([raw]) => raw));
  });
});

describe('inboxkit dlq replay', () => {
  const argv = ['dlq', 'replay', '--transport', 'sqs', '--from', 'orders-dlq', '--by', 'eve\u202e'];

  it('dry run: per-message table and progress lines show every spoof escaped', async () => {
    const entries = SPOOFS.map(([raw], i) => entry(raw, raw, raw, 'x', i));
    const { code, stdout, stderr } = await run([...argv, '--dry-run'], { services: dlqServices(entries) });
    expect(code).toBe(0);
    expectSafe(stdout + stderr);
    expect(stderr).toContain('by "eve\\u{202e}"');
    for (const [i, [, shown]] of SPOOFS.entries()) {
      expect(stderr).toMatch(
        new RegExp(
          `\\[${i + 1}\\] would-replay ${escapeRegExp(shown)} consumer=${escapeRegExp(shown)} reason=${escapeRegExp(shown)} `,
        ),
      );
      expect(stdout).toContain(`${shown}  `);
    }
  });

  it('a real run on a terminal: the progress bar, the failures table and the summary show every spoof escaped', async () => {
    const entries = SPOOFS.map(([raw], i) => entry(raw, raw, raw, 'x', i));
    const publisher = new MemoryPublisher();
    for (const [raw] of SPOOFS) publisher.failOn.add(raw);
    const { code, stdout, stderr } = await run(argv, {
      services: dlqServices(entries, publisher),
      tty: true,
    });
    expect(code).toBe(1);
    expectSafe(stdout + stderr);
    expect(stderr).toContain('\r\u001b[2K['); // the bar was drawn
    for (const [, shown] of SPOOFS) {
      expect(stderr).toContain(`/s  ${shown}`);
      expect(stdout).toContain(`${shown}  `);
    }
    expect(stdout).toContain('by "eve\\u{202e}"');
  });
});

describe('inboxkit doctor and errors', () => {
  it('doctor escapes consumer names from the config file and error text from a service', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'inboxkit-spoof-'));
    await writeFile(
      join(dir, 'inboxkit.json'),
      JSON.stringify({
        consumers: SPOOFS.map(([raw]) => ({ name: raw, maxAttempts: 10, dedupeWindow: '5m' })),
      }),
    );
    const services: CliServices = {
      openDatabase: async () => {
        throw new Error('relation "\u001b[2Jinbox\u202e" does not exist');
      },
      openTransport: async () => {
        throw new Error('not used');
      },
    };
    const { code, stdout } = await run(
      ['doctor', '--config', 'inboxkit.json', '--database-url', 'postgres://db/app'],
      { services, cwd: dir },
    );
    expect(code).toBe(1);
    expectSafe(stdout);
    expect(stdout).toContain('relation "\\u{1b}[2Jinbox\\u{202e}" does not exist');
    expect(stdout).toContain('"abc\\u{202e}dcba": dedupe window vs retry horizon');
    expect(stdout).toContain('"   ": dedupe window vs retry horizon');
  });

  it('an error message with control characters is printed escaped, its line breaks kept', async () => {
    const services: CliServices = {
      openDatabase: async () => {
        throw new Error('first line\nsecond \u001b[31mred\u001b[0m \u202eline', {
          cause: new Error('cause \u0007\u200b'),
        });
      },
      openTransport: async () => {
        throw new Error('not used');
      },
    };
    const { code, stderr } = await run(['status', '--database-url', 'postgres://db/app'], { services });
    expect(code).toBe(1);
    expectSafe(stderr);
    expect(stderr).toContain('first line\nsecond \\u{1b}[31mred\\u{1b}[0m \\u{202e}line');
    expect(stderr).toContain('caused by: cause \\u{7}\\u{200b}');
  });

  it('status of a real database prints the table name given with --schema escaped', async () => {
    const { stderr } = await run([
      'status',
      '--database-url',
      requireService('DATABASE_URL'),
      '--schema',
      'no_such\u202e',
    ]);
    expectSafe(stderr);
    expect(stderr).toContain('\\u{202e}');
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
