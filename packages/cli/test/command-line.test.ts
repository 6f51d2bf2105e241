// The command line: every mistake is a usage error (exit 2) that says what to write instead, and values
// parse the way the docs say.

import { describe, expect, it } from 'vitest';

import { parseCommandLine } from '../src/command-line.js';
import { runCli } from '../src/run-cli.js';
import { UsageError } from '../src/usage-error.js';
import { captureIo } from './support/capture-io.js';

const NOW = Date.parse('2030-06-01T12:00:00Z');
const parse = (argv: string[], env: Record<string, string> = {}) => parseCommandLine(argv, env, NOW);

describe('runCli usage errors', () => {
  const cases: [string, string[], RegExp][] = [
    ['an unknown command', ['replay'], /unknown command "replay"/],
    ['an unknown dlq subcommand', ['dlq', 'purge'], /dlq purge.*dlq list.*dlq replay/],
    ['a missing dlq subcommand', ['dlq'], /needs a subcommand/],
    [
      'an unknown transport',
      ['dlq', 'replay', '--transport', 'pulsar', '--from', 'x'],
      /unknown transport "pulsar"/,
    ],
    ['a missing transport', ['dlq', 'list', '--from', 'x'], /needs --transport kafka\|rabbitmq\|sqs/],
    ['a missing --from', ['dlq', 'replay', '--transport', 'sqs'], /needs --from DLQ/],
    ['an unknown flag', ['status', '--consumr', 'x'], /unknown flag --consumr/],
    ['a flag of another command', ['status', '--dry-run'], /unknown flag --dry-run for `inboxkit status`/],
    ['a flag without its value', ['dlq', 'replay', '--transport', 'sqs', '--from'], /--from/],
    [
      'a bad --rate',
      ['dlq', 'replay', '--transport', 'sqs', '--from', 'q', '--rate', 'fast'],
      /--rate expects messages per second/,
    ],
    [
      'a zero --rate',
      ['dlq', 'replay', '--transport', 'sqs', '--from', 'q', '--rate', '0'],
      /--rate expects/,
    ],
    ['a bad --limit', ['dlq', 'replay', '--transport', 'sqs', '--from', 'q', '--limit', '-3'], /--limit/],
    [
      'a bad --since',
      ['dlq', 'replay', '--transport', 'sqs', '--from', 'q', '--since', 'yesterday'],
      /--since expects an ISO 8601 time/,
    ],
    ['a stray argument', ['status', 'orders'], /unexpected argument "orders"/],
    [
      '--group on a queue transport',
      ['dlq', 'list', '--transport', 'sqs', '--from', 'q', '--group', 'g'],
      /--group applies to --transport kafka only/,
    ],
    ['a bad doctor duration', ['doctor', '--dedupe-window', 'long'], /--dedupe-window expects a duration/],
    ['doctor --source without --transport', ['doctor', '--source', 'orders'], /need --transport/],
  ];
  for (const [what, argv, message] of cases) {
    it(`exits 2 with a clear message and the usage for ${what}`, async () => {
      const out = captureIo();
      const code = await runCli(argv, out.io);
      expect(code).toBe(2);
      expect(out.stderr()).toMatch(message);
      expect(out.stderr()).toMatch(/Usage: inboxkit/);
      expect(out.stdout()).toBe('');
    });
  }

  it('prints help and exits 0 for --help, help and help <command>', async () => {
    for (const argv of [['--help'], ['help'], [], ['help', 'dlq', 'replay'], ['dlq', 'replay', '--help']]) {
      const out = captureIo();
      expect(await runCli(argv, out.io)).toBe(0);
      expect(out.stdout()).toMatch(/Usage: inboxkit/);
    }
  });

  it('explains every dlq command for dlq --help, dlq -h and help dlq', async () => {
    for (const argv of [
      ['dlq', '--help'],
      ['dlq', '-h'],
      ['help', 'dlq'],
    ]) {
      const out = captureIo();
      expect(await runCli(argv, out.io), argv.join(' ')).toBe(0);
      expect(out.stdout()).toContain('Usage: inboxkit dlq list');
      expect(out.stdout()).toContain('Usage: inboxkit dlq replay');
      expect(out.stdout()).toContain('Usage: inboxkit dlq edit');
      expect(out.stdout()).toContain('Connection (flag, else environment variable)');
    }
  });
});

describe('parseCommandLine', () => {
  it('reads connection settings from flags, else from the environment, with defaults', () => {
    const env = {
      DATABASE_URL: 'postgres://u:p@db/app',
      KAFKA_BROKERS: 'k1:9092, k2:9092',
      AMQP_URL: 'amqp://r',
      SQS_ENDPOINT: 'http://sqs:9324',
    };
    const fromEnv = parse(['status'], env);
    expect(fromEnv).toMatchObject({
      connection: {
        databaseUrl: 'postgres://u:p@db/app',
        kafkaBrokers: ['k1:9092', 'k2:9092'],
        amqpUrl: 'amqp://r',
        sqsEndpoint: 'http://sqs:9324',
        schema: 'inboxkit',
        table: 'inbox',
        region: 'us-east-1',
      },
    });
    const fromFlags = parse(
      [
        'status',
        '--database-url',
        'postgres://other/db',
        '--schema',
        'app',
        '--table',
        'ibx',
        '--region',
        'eu-west-1',
      ],
      env,
    );
    expect(fromFlags).toMatchObject({
      connection: { databaseUrl: 'postgres://other/db', schema: 'app', table: 'ibx', region: 'eu-west-1' },
    });
  });

  it('parses a full replay command line', () => {
    const cmd = parse(
      [
        'dlq',
        'replay',
        '--transport',
        'kafka',
        '--from',
        'orders.dlq',
        '--to',
        'orders',
        '--consumer',
        'billing',
        '--reason',
        'max-attempts,permanent-error',
        '--reason',
        'schema-invalid',
        '--since',
        '6h',
        '--id',
        'a',
        '--id',
        'b,c',
        '--limit',
        '10',
        '--rate',
        '600/m',
        '--dry-run',
        '--json',
        '--group',
        'g1',
      ],
      { USER: 'alice' },
    );
    expect(cmd).toEqual({
      command: 'dlq replay',
      connection: expect.any(Object),
      json: true,
      transport: 'kafka',
      from: 'orders.dlq',
      group: 'g1',
      to: 'orders',
      filter: {
        consumer: 'billing',
        reasons: ['max-attempts', 'permanent-error', 'schema-invalid'],
        since: new Date(NOW - 6 * 3_600_000),
        ids: ['a', 'b', 'c'],
      },
      limit: 10,
      ratePerSecond: 10,
      dryRun: true,
      includeParked: false,
      requestedBy: 'alice',
    });
  });

  it('records who asked: --by, else $USER', () => {
    const base = ['dlq', 'replay', '--transport', 'sqs', '--from', 'q'];
    expect(parse([...base, '--by', 'ops-bot'], { USER: 'alice' })).toMatchObject({ requestedBy: 'ops-bot' });
    expect(parse(base, { USER: 'alice' })).toMatchObject({ requestedBy: 'alice' });
    expect(parse(base, {})).toMatchObject({ requestedBy: 'unknown' });
  });

  it('accepts --since as an ISO time', () => {
    expect(
      parse(['dlq', 'list', '--transport', 'sqs', '--from', 'q', '--since', '2030-05-31T00:00:00Z']),
    ).toMatchObject({
      filter: { since: new Date('2030-05-31T00:00:00Z') },
    });
  });

  it('throws UsageError naming the command', () => {
    expect(() => parse(['prune', '--batch-size', '0'])).toThrow(UsageError);
    try {
      parse(['prune', '--batch-size', '0']);
    } catch (error) {
      expect((error as UsageError).command).toBe('prune');
    }
  });
});
