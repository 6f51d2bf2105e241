// testcontainers for the test services, used by discovery (test/support/find-services.ts) only when a Docker
// (or Podman) engine answers. Each service is one starter below; a container that fails to start leaves its
// service to the next source.
import http from 'node:http';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { ServiceName } from './discovery.js';

/** Does a Docker (or Podman) engine answer `/_ping` within a second or two? Never throws. */
export async function dockerEngine(): Promise<{ ok: boolean; where: string }> {
  const setting = process.env['INBOXKIT_TESTCONTAINERS'];
  if (setting === '0' || setting === 'false' || setting === 'never') {
    return { ok: false, where: 'disabled by INBOXKIT_TESTCONTAINERS' };
  }
  const candidates: { socketPath?: string; host?: string; port?: number; label: string }[] = [];
  const dockerHost = process.env['DOCKER_HOST'];
  if (dockerHost?.startsWith('unix://')) {
    candidates.push({ socketPath: dockerHost.slice('unix://'.length), label: dockerHost });
  } else if (dockerHost?.startsWith('tcp://')) {
    const url = new URL(dockerHost);
    candidates.push({ host: url.hostname, port: Number(url.port || 2375), label: dockerHost });
  } else {
    const runtimeDir = process.env['XDG_RUNTIME_DIR'];
    for (const path of [
      '/var/run/docker.sock',
      join(homedir(), '.docker/run/docker.sock'),
      ...(runtimeDir ? [join(runtimeDir, 'docker.sock'), join(runtimeDir, 'podman/podman.sock')] : []),
    ]) {
      if (existsSync(path)) candidates.push({ socketPath: path, label: `unix://${path}` });
    }
  }
  if (candidates.length === 0) return { ok: false, where: 'no Docker socket and no DOCKER_HOST' };
  for (const candidate of candidates) {
    const ok = await new Promise<boolean>((resolvePromise) => {
      const request = http.get(
        {
          ...(candidate.socketPath
            ? { socketPath: candidate.socketPath }
            : { host: candidate.host, port: candidate.port }),
          path: '/_ping',
          timeout: 1500,
        },
        (response) => {
          response.resume();
          resolvePromise(response.statusCode === 200);
        },
      );
      request.on('timeout', () => request.destroy(new Error('timeout')));
      request.on('error', () => resolvePromise(false));
    });
    if (ok) return { ok: true, where: candidate.label };
  }
  return { ok: false, where: `no engine answered at ${candidates.map((c) => c.label).join(', ')}` };
}

function freePort(): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === 'object') resolvePromise(address.port);
        else reject(new Error('no port'));
      });
    });
  });
}

export async function startContainers(names: ServiceName[]): Promise<{
  found: Map<ServiceName, string>;
  failed: Map<ServiceName, string>;
  stop: () => Promise<void>;
}> {
  const { GenericContainer, Wait } = await import('testcontainers');
  type Started = Awaited<ReturnType<InstanceType<typeof GenericContainer>['start']>>;
  const started: Started[] = [];
  const found = new Map<ServiceName, string>();
  const failed = new Map<ServiceName, string>();

  const starters: Record<ServiceName, () => Promise<string>> = {
    postgres: async () => {
      const container = await new GenericContainer('postgres:15')
        .withEnvironment({ POSTGRES_PASSWORD: 'postgres', POSTGRES_DB: 'inboxkit' })
        .withCommand(['postgres', '-c', 'max_connections=300'])
        .withExposedPorts(5432)
        .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2))
        .start();
      started.push(container);
      return `postgres://postgres:postgres@${container.getHost()}:${container.getMappedPort(5432)}/inboxkit`;
    },
    kafka: async () => {
      // The broker advertises the address clients use, so the host port is chosen up front.
      const port = await freePort();
      const container = await new GenericContainer('apache/kafka:3.9.1')
        .withEnvironment({
          KAFKA_NODE_ID: '1',
          KAFKA_PROCESS_ROLES: 'broker,controller',
          KAFKA_LISTENERS: 'PLAINTEXT://:9092,CONTROLLER://:9093',
          KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://127.0.0.1:${port}`,
          KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
          KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT',
          KAFKA_CONTROLLER_QUORUM_VOTERS: '1@localhost:9093',
          KAFKA_AUTO_CREATE_TOPICS_ENABLE: 'true',
          KAFKA_NUM_PARTITIONS: '3',
          KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
          KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
          KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
          KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
        })
        .withExposedPorts({ container: 9092, host: port })
        .withWaitStrategy(Wait.forLogMessage(/Kafka Server started/))
        .start();
      started.push(container);
      return `127.0.0.1:${port}`;
    },
    rabbitmq: async () => {
      const container = await new GenericContainer('rabbitmq:3.13-management')
        .withExposedPorts(5672)
        .withWaitStrategy(Wait.forLogMessage(/Server startup complete/))
        .start();
      started.push(container);
      return `amqp://guest:guest@${container.getHost()}:${container.getMappedPort(5672)}`;
    },
    sqs: async () => {
      const port = await freePort();
      const config = [
        'include classpath("application.conf")',
        `node-address { protocol = http, host = localhost, port = ${port}, context-path = "" }`,
        'rest-sqs { enabled = true, bind-port = 9324, bind-hostname = "0.0.0.0", sqs-limits = strict }',
        'rest-stats { enabled = false }',
        'aws { region = us-east-1, accountId = 000000000000 }',
      ].join('\n');
      const container = await new GenericContainer('softwaremill/elasticmq-native')
        .withCopyContentToContainer([{ content: config, target: '/opt/elasticmq.conf' }])
        .withExposedPorts({ container: 9324, host: port })
        .withWaitStrategy(Wait.forLogMessage(/started in/))
        .start();
      started.push(container);
      return `http://${container.getHost()}:${port}`;
    },
    redis: async () => {
      const container = await new GenericContainer('redis:7')
        .withExposedPorts(6379)
        .withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/))
        .start();
      started.push(container);
      return `redis://${container.getHost()}:${container.getMappedPort(6379)}`;
    },
    nats: async () => {
      const container = await new GenericContainer('nats:2.12')
        .withCommand(['-js'])
        .withExposedPorts(4222)
        .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
        .start();
      started.push(container);
      return `nats://${container.getHost()}:${container.getMappedPort(4222)}`;
    },
  };

  await Promise.all(
    names.map(async (name) => {
      try {
        found.set(name, await starters[name]());
      } catch (error) {
        failed.set(name, error instanceof Error ? error.message : String(error));
      }
    }),
  );
  return {
    found,
    failed,
    stop: async () => {
      await Promise.allSettled(started.map((container) => container.stop()));
    },
  };
}
