// --kafka-client: the CLI talks to Kafka through kafkajs or @platformatic/kafka, chosen by flag or
// INBOXKIT_KAFKA_CLIENT, kafkajs first when none is chosen, and a clear error naming the package when the
// client is not installed. The DLQ commands on each client run in dlq-replay-kafka.test.ts.

import { ConfigurationError } from '@inboxkit/core';
import { describe, expect, it } from 'vitest';

import { parseCommandLine } from '../src/command-line.js';
import { runCli } from '../src/run-cli.js';
import { KAFKA_CLIENTS } from '../src/settings/connection-settings.js';
import { kafkaClientFor, loadKafkaClient, nodeRunsPlatformatic } from '../src/transports/open-kafka.js';
import { captureIo } from './support/capture-io.js';
import { requireService } from './support/services.js';

/** A loader that finds only the packages in `installed`, and records what it was asked for. */
function loader(installed: readonly string[]): { load: (name: string) => Promise<unknown>; asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    load: async (name) => {
      asked.push(name);
      if (installed.includes(name)) return import(name);
      throw Object.assign(new Error(`Cannot find package '${name}' imported from /app/cli.js`), {
        code: 'ERR_MODULE_NOT_FOUND',
      });
    },
  };
}

async function cli(argv: string[], env: Record<string, string> = {}) {
  const io = captureIo({ env });
  const code = await runCli(argv, io.io);
  return { code, stdout: io.stdout(), stderr: io.stderr() };
}

describe('choosing the Kafka client of the CLI', () => {
  it('uses kafkajs when both are installed and none is chosen, @platformatic/kafka when only it is', async () => {
    const both = loader(['kafkajs', '@platformatic/kafka']);
    expect((await loadKafkaClient(undefined, both.load)).name).toBe('kafkajs');
    expect(both.asked).toEqual(['kafkajs']);
    const onlyPlatformatic = loader(['@platformatic/kafka']);
    expect((await loadKafkaClient(undefined, onlyPlatformatic.load)).name).toBe('platformatic');
    expect(onlyPlatformatic.asked).toEqual(['kafkajs', '@platformatic/kafka']);
  });

  it('uses the client chosen even when kafkajs is installed', async () => {
    const both = loader(['kafkajs', '@platformatic/kafka']);
    const kafka = await kafkaClientFor(
      { kafkaBrokers: ['localhost:1'], kafkaClient: 'platformatic' } as never,
      both.load,
    );
    expect(kafka.clientName).toBe('platformatic');
    expect(both.asked).toEqual(['@platformatic/kafka']);
    await kafka.close();
  });

  it('names the package to install when the client is missing', async () => {
    const none = loader([]);
    await expect(loadKafkaClient(undefined, none.load)).rejects.toThrow(ConfigurationError);
    await expect(loadKafkaClient(undefined, none.load)).rejects.toThrow(
      /no Kafka client installed: npm install kafkajs, or npm install @platformatic\/kafka/,
    );
    await expect(loadKafkaClient('platformatic', loader(['kafkajs']).load)).rejects.toThrow(
      /--kafka-client platformatic needs the package @platformatic\/kafka: npm install @platformatic\/kafka/,
    );
    await expect(loadKafkaClient('kafkajs', loader(['@platformatic/kafka']).load)).rejects.toThrow(
      /--kafka-client kafkajs needs the package kafkajs: npm install kafkajs/,
    );
  });

  it('knows which Node runs @platformatic/kafka (>= 22.22)', () => {
    expect(['20.19.0', '22.21.9', '21.7.0'].map((v) => nodeRunsPlatformatic(v))).toEqual([
      false,
      false,
      false,
    ]);
    expect(['22.22.0', '23.0.0', '24.6.0', '24.0.1', '26.1.0'].map((v) => nodeRunsPlatformatic(v))).toEqual([
      true,
      true,
      true,
      true,
      true,
    ]);
  });

  it('passes the choice to every command that opens Kafka, the console included; the flag wins over the env', () => {
    const env = { INBOXKIT_KAFKA_CLIENT: 'kafkajs' };
    for (const argv of [
      ['console', '--dlq', 'kafka:orders.dlq'],
      ['dlq', 'list', '--transport', 'kafka', '--from', 'orders.dlq'],
      ['dlq', 'replay', '--transport', 'kafka', '--from', 'orders.dlq'],
      ['doctor'],
    ]) {
      const flagged = parseCommandLine([...argv, '--kafka-client', 'platformatic'], env, 0);
      expect(flagged.command, argv.join(' ')).not.toBe('help');
      expect(
        (flagged as { connection: { kafkaClient?: string } }).connection.kafkaClient,
        argv.join(' '),
      ).toBe('platformatic');
      const fromEnv = parseCommandLine(argv, env, 0) as { connection: { kafkaClient?: string } };
      expect(fromEnv.connection.kafkaClient, argv.join(' ')).toBe('kafkajs');
    }
  });

  it('refuses an unknown client by flag or environment, as a usage error', async () => {
    const byFlag = await cli([
      'dlq',
      'list',
      '--transport',
      'kafka',
      '--from',
      't',
      '--kafka-client',
      'rdkafka',
    ]);
    expect(byFlag.code).toBe(2);
    expect(byFlag.stderr).toMatch(
      /unknown Kafka client "rdkafka": use --kafka-client kafkajs or platformatic/,
    );
    const byEnv = await cli(['dlq', 'list', '--transport', 'kafka', '--from', 't'], {
      INBOXKIT_KAFKA_CLIENT: 'confluent',
    });
    expect(byEnv.code).toBe(2);
    expect(byEnv.stderr).toMatch(/unknown Kafka client "confluent"/);
  });

  it.each(KAFKA_CLIENTS)('doctor reaches the real Kafka through %s', async (client) => {
    const { stdout } = await cli(['doctor', '--kafka-brokers', requireService('KAFKA_BROKERS'), '--json'], {
      INBOXKIT_KAFKA_CLIENT: client,
    });
    const report = JSON.parse(stdout) as { checks: { name: string; status: string; detail: string }[] };
    const kafka = report.checks.find((c) => c.name === 'kafka');
    expect(kafka).toMatchObject({
      status: 'ok',
      detail: expect.stringMatching(new RegExp(`broker\\(s\\) \\(${client}\\)$`)),
    });
  });
});
