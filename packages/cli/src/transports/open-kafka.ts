// The CLI's Kafka connection: a client from --kafka-brokers through the library --kafka-client names (kafkajs
// or @platformatic/kafka, loaded on demand), the DLQ reader and publisher of @inboxkit/kafka on it.

import { ConfigurationError } from '@inboxkit/core';
import type { DeadLetterEntry, DeadLetterQueueReader } from '@inboxkit/core';
import { kafkaDeadLetterQueue, kafkaPublisher, platformaticKafka } from '@inboxkit/kafka';
import type { KafkaClientLike, PlatformaticKafkaModule } from '@inboxkit/kafka';

import type { OpenedTransport, OpenTransportOptions } from '../cli-services.js';
import type { ConnectionSettings, KafkaClientName } from '../settings/connection-settings.js';

/** The replay group of a DLQ topic when `--group` is not given (the Kafka reader's own default). */
export function defaultReplayGroup(topic: string): string {
  return `inboxkit-dlq-replay.${topic}`;
}

/** The npm package of each Kafka client. */
const PACKAGE_OF: Readonly<Record<KafkaClientName, string>> = {
  kafkajs: 'kafkajs',
  platformatic: '@platformatic/kafka',
};

/** Loads a package by name (a seam for tests; the default is a dynamic `import`). */
export type ImportPackage = (name: string) => Promise<unknown>;

const importPackage: ImportPackage = (name) => import(name);

function isMissing(error: unknown, name: string): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  return (
    (e?.code === 'ERR_MODULE_NOT_FOUND' || e?.code === 'MODULE_NOT_FOUND') &&
    typeof e.message === 'string' &&
    e.message.includes(`'${name}`)
  );
}

/**
 * Whether Node `version` runs @platformatic/kafka (it needs >= 22.22: on older Nodes it loads, then fails at
 * its first request).
 */
export function nodeRunsPlatformatic(version: string = process.versions.node): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major > 22 || (major === 22 && minor >= 22);
}

/**
 * Which Kafka client the CLI uses and its module: the one `settings.kafkaClient` names, else kafkajs when it
 * is installed, else @platformatic/kafka. Throws a `ConfigurationError` naming the package to install when the
 * client named (or any client, when none is named) is not installed.
 */
export async function loadKafkaClient(
  requested: KafkaClientName | undefined,
  load: ImportPackage = importPackage,
): Promise<{ readonly name: KafkaClientName; readonly module: unknown }> {
  const candidates: readonly KafkaClientName[] =
    requested !== undefined ? [requested] : ['kafkajs', 'platformatic'];
  for (const name of candidates) {
    const pkg = PACKAGE_OF[name];
    try {
      return { name, module: await load(pkg) };
    } catch (error) {
      if (!isMissing(error, pkg)) {
        throw new ConfigurationError(
          `the Kafka client ${pkg} is installed but does not load: ${(error as Error)?.message ?? String(error)}` +
            (name === 'platformatic' ? ' (@platformatic/kafka needs Node >= 22.22 or >= 24.6)' : ''),
        );
      }
    }
  }
  throw new ConfigurationError(
    requested !== undefined
      ? `--kafka-client ${requested} needs the package ${PACKAGE_OF[requested]}: npm install ${PACKAGE_OF[requested]}`
      : 'no Kafka client installed: npm install kafkajs, or npm install @platformatic/kafka (Node >= 22.22), ' +
          'or choose one with --kafka-client',
  );
}

/**
 * The CLI's Kafka: the `KafkaClientLike` of @inboxkit/kafka, plus the cluster questions `doctor` and the DLQ
 * commands ask, on either client.
 */
export interface CliKafka {
  /** The client library in use. */
  readonly clientName: KafkaClientName;
  /** What @inboxkit/kafka's reader and publisher take. */
  readonly client: KafkaClientLike;
  /** Number of brokers in the cluster (connects: fails when Kafka is unreachable). */
  brokerCount(): Promise<number>;
  /** Names of the cluster's topics. */
  listTopics(): Promise<string[]>;
  /** Closes the connection `brokerCount` and `listTopics` opened. */
  close(): Promise<void>;
}

interface KafkajsAdmin {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  describeCluster(): Promise<{ brokers: unknown[] }>;
  listTopics(): Promise<string[]>;
}

interface KafkajsModule {
  Kafka: new (config: Record<string, unknown>) => KafkaClientLike;
  logLevel: { NOTHING: number };
}

interface PlatformaticClusterAdmin {
  metadata(options: { topics: string[] }): Promise<{ brokers: Map<number, unknown> }>;
  listTopics(): Promise<string[]>;
  close(): Promise<void>;
}

/** A Kafka client for the settings, on the client library they choose (see `loadKafkaClient`). */
export async function kafkaClientFor(
  settings: ConnectionSettings,
  load: ImportPackage = importPackage,
): Promise<CliKafka> {
  if (settings.kafkaBrokers === undefined || settings.kafkaBrokers.length === 0) {
    throw new ConfigurationError('no Kafka configured: pass --kafka-brokers host:port or set KAFKA_BROKERS');
  }
  const brokers = [...settings.kafkaBrokers];
  const { name, module } = await loadKafkaClient(settings.kafkaClient, load);
  if (name === 'platformatic' && !nodeRunsPlatformatic()) {
    throw new ConfigurationError(
      `@platformatic/kafka needs Node >= 22.22 (this is ${process.version}): run on a newer Node` +
        (settings.kafkaClient === undefined ? ', or npm install kafkajs' : ', or use --kafka-client kafkajs'),
    );
  }
  if (name === 'kafkajs') {
    const kafkajs = ((module as { default?: KafkajsModule }).default ?? module) as KafkajsModule;
    const kafka = new kafkajs.Kafka({
      clientId: 'inboxkit-cli',
      brokers,
      logLevel: kafkajs.logLevel.NOTHING,
      connectionTimeout: 5_000,
      retry: { retries: 3 },
    });
    let admin: KafkajsAdmin | undefined;
    const connected = async (): Promise<KafkajsAdmin> => {
      if (admin === undefined) {
        // kafkajs' admin answers more than KafkaAdminLike declares.
        const a = kafka.admin() as unknown as KafkajsAdmin;
        await a.connect();
        admin = a;
      }
      return admin;
    };
    return {
      clientName: name,
      client: kafka,
      brokerCount: async () => (await (await connected()).describeCluster()).brokers.length,
      listTopics: async () => (await connected()).listTopics(),
      close: async () => {
        await admin?.disconnect();
        admin = undefined;
      },
    };
  }
  const platformatic = module as PlatformaticKafkaModule;
  const base = { clientId: 'inboxkit-cli', bootstrapBrokers: brokers, connectTimeout: 5_000, retries: 3 };
  let admin: PlatformaticClusterAdmin | undefined;
  // @platformatic/kafka's Admin answers more than PlatformaticAdmin declares.
  const opened = (): PlatformaticClusterAdmin =>
    (admin ??= new platformatic.Admin(base) as unknown as PlatformaticClusterAdmin);
  return {
    clientName: name,
    client: platformaticKafka(platformatic, base),
    brokerCount: async () => (await opened().metadata({ topics: [] })).brokers.size,
    listTopics: async () => opened().listTopics(),
    close: async () => {
      await admin?.close();
      admin = undefined;
    },
  };
}

/** The replay group's committed offset per partition (the next offset `take` reads). */
async function committedOffsets(
  kafka: CliKafka,
  topic: string,
  groupId: string,
): Promise<Map<number, bigint>> {
  const topics = await kafka.listTopics();
  if (!topics.includes(topic)) {
    throw new ConfigurationError(`Kafka topic ${JSON.stringify(topic)} does not exist: check --from`);
  }
  const admin = kafka.client.admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchOffsets({ groupId, topics: [topic] });
    const out = new Map<number, bigint>();
    for (const p of offsets.find((t) => t.topic === topic)?.partitions ?? []) {
      if (/^\d+$/.test(p.offset)) out.set(p.partition, BigInt(p.offset));
    }
    return out;
  } finally {
    await admin.disconnect();
  }
}

/**
 * Browsing a Kafka DLQ reads the topic from its start, but `take` starts at the replay group's committed
 * offset: dead letters before it were already replayed and removed. Listing and dry runs skip them, so they
 * show what a replay would take.
 */
function skipRemoved(
  reader: DeadLetterQueueReader,
  committed: ReadonlyMap<number, bigint>,
): DeadLetterQueueReader {
  return {
    nonDestructiveBrowse: reader.nonDestructiveBrowse,
    async *browse({ limit }) {
      // The limit counts what is shown, not what was skipped.
      let shown = 0;
      for await (const entry of reader.browse({ limit: Number.MAX_SAFE_INTEGER })) {
        if (isRemoved(entry, committed)) continue;
        yield entry;
        if (++shown >= limit) return;
      }
    },
    take: (options) => reader.take(options),
    close: () => reader.close(),
  };
}

function isRemoved(entry: DeadLetterEntry, committed: ReadonlyMap<number, bigint>): boolean {
  const match = /:(\d+):(\d+)$/.exec(entry.position);
  if (match === null) return false;
  const at = committed.get(Number(match[1]));
  return at !== undefined && BigInt(match[2]!) < at;
}

/** Opens the Kafka DLQ topic `options.from` and, for a replay, a publisher. */
export async function openKafka(
  settings: ConnectionSettings,
  options: OpenTransportOptions,
): Promise<OpenedTransport> {
  const kafka = await kafkaClientFor(settings);
  const groupId = options.group ?? defaultReplayGroup(options.from);
  let committed: Map<number, bigint>;
  try {
    committed = await committedOffsets(kafka, options.from, groupId);
  } finally {
    await kafka.close().catch(() => undefined);
  }
  const client = kafka.client;
  const reader = skipRemoved(
    kafkaDeadLetterQueue({ kafka: client, topic: options.from, groupId }),
    committed,
  );
  const publisher = options.publish ? kafkaPublisher({ kafka: client }) : undefined;
  return {
    reader,
    publisher,
    resolveDestination: async (to) => to,
    close: async () => {
      await publisher?.close().catch(() => undefined);
      await reader.close().catch(() => undefined);
    },
  };
}
