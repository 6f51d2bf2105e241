// The discovery helpers: parsing .services/env, typed settings, and the error a test gets for a missing service.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { describeService, endpointsOf, howToStart, readServicesEnv, tcpAnswers } from './discovery.js';
import { discoveredServices, requireService, uniqueTestName } from './services.js';

describe('service discovery helpers', () => {
  it('parses KEY=value lines, with quotes, export and comments', () => {
    const dir = mkdtempSync(join(tmpdir(), 'inboxkit-env-'));
    const file = join(dir, 'env');
    writeFileSync(
      file,
      [
        '# comment',
        'DATABASE_URL=postgres://postgres@127.0.0.1:54329/inboxkit',
        'export KAFKA_BROKERS="127.0.0.1:19092,127.0.0.1:19094"',
        "AMQP_URL='amqp://guest:guest@127.0.0.1:5679'",
        '',
      ].join('\n'),
    );
    expect(readServicesEnv(file)).toEqual({
      DATABASE_URL: 'postgres://postgres@127.0.0.1:54329/inboxkit',
      KAFKA_BROKERS: '127.0.0.1:19092,127.0.0.1:19094',
      AMQP_URL: 'amqp://guest:guest@127.0.0.1:5679',
    });
    expect(readServicesEnv(join(dir, 'missing'))).toEqual({});
  });

  it('describes each service from its connection string', () => {
    expect(describeService('postgres', 'postgres://app:secret@db.local/orders', 'env')).toEqual({
      source: 'env',
      url: 'postgres://app:secret@db.local/orders',
      host: 'db.local',
      port: 5432,
      database: 'orders',
      user: 'app',
    });
    expect(describeService('kafka', ' a:1, b:2 ', 'services').brokers).toEqual(['a:1', 'b:2']);
    expect(
      describeService('sqs', 'http://127.0.0.1:19324/', 'services', { SQS_REGION: 'eu-west-1' }),
    ).toMatchObject({ endpoint: 'http://127.0.0.1:19324', region: 'eu-west-1' });
    expect(endpointsOf('rabbitmq', 'amqp://guest:guest@localhost')).toEqual([
      { host: 'localhost', port: 5672 },
    ]);
  });

  it('says how to start a missing service', () => {
    const message = howToStart('kafka', 'no KAFKA_BROKERS in .services/env');
    expect(message).toContain('npm run services:up');
    expect(message).toContain('KAFKA_BROKERS');
  });

  it('reports a closed port as not answering', async () => {
    expect(await tcpAnswers('127.0.0.1', 1, 500)).toBe(false);
  });

  it('provides the services found by the global setup, and fails for a missing one', () => {
    const services = discoveredServices();
    for (const name of ['postgres', 'kafka', 'rabbitmq', 'sqs', 'redis'] as const) {
      if (services[name]) expect(requireService(name).source).toBeTruthy();
      else expect(() => requireService(name)).toThrow(/npm run services:up/);
    }
  });

  it('makes names unique and safe for topics and queues', () => {
    const a = uniqueTestName('Orders Topic!');
    expect(a).toMatch(/^orders-topic-[a-z0-9]+-[0-9a-f]{8}$/);
    expect(uniqueTestName('Orders Topic!')).not.toBe(a);
    expect(uniqueTestName('x'.repeat(200)).length).toBeLessThanOrEqual(80);
  });
});
