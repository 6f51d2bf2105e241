// The slice of @platformatic/kafka (2.12+) the adapter calls, declared structurally so that nothing of it is
// imported at run time: the application passes the module itself to `platformaticKafka()`.

/** A record as a @platformatic/kafka `MessagesStream` yields it (default Buffer deserializers). */
export interface PlatformaticMessage {
  readonly topic: string;
  readonly partition: number;
  readonly offset: bigint;
  readonly timestamp: bigint;
  readonly leaderEpoch: number;
  readonly key: Buffer | null | undefined;
  readonly value: Buffer | null | undefined;
  readonly headers: Map<Buffer | string, Buffer | string>;
  /** Every header, duplicates included (2.12+). */
  readonly headerEntries?: [Buffer | string, Buffer | string][];
}

/** A @platformatic/kafka `MessagesStream`. */
export interface PlatformaticMessagesStream extends AsyncIterable<unknown> {
  close(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/** What the adapter passes to `Consumer.consume()`. */
export interface PlatformaticConsumeOptions {
  topics: string[];
  mode: 'committed';
  fallbackMode: 'earliest' | 'latest';
  autocommit: false;
  maxWaitTime?: number;
}

/** A @platformatic/kafka `Consumer`. */
export interface PlatformaticConsumer {
  readonly groupId: string;
  consume(options: PlatformaticConsumeOptions): Promise<PlatformaticMessagesStream>;
  commit(options: {
    offsets: { topic: string; partition: number; offset: bigint; leaderEpoch: number }[];
  }): Promise<void>;
  leaveGroup(force?: boolean): Promise<void>;
  close(force?: boolean): Promise<void>;
  on(event: string, listener: (payload: never) => void): unknown;
  removeListener(event: string, listener: (payload: never) => void): unknown;
}

/** What the adapter passes to `Producer.send()`. */
export interface PlatformaticSendOptions {
  messages: {
    topic: string;
    key?: Buffer;
    value?: Buffer;
    headers?: Map<Buffer, Buffer>;
    timestamp?: bigint;
  }[];
  acks?: number;
}

/** A @platformatic/kafka `Producer`. */
export interface PlatformaticProducer {
  send(options: PlatformaticSendOptions): Promise<unknown>;
  close(force?: boolean): Promise<void>;
}

/** A @platformatic/kafka `Admin`. */
export interface PlatformaticAdmin {
  metadata(options: { topics: string[] }): Promise<{
    topics: Map<string, { partitionsCount: number }>;
  }>;
  listOffsets(options: {
    topics: { name: string; partitions: { partitionIndex: number; timestamp: bigint }[] }[];
  }): Promise<{ name: string; partitions: { partitionIndex: number; offset: bigint }[] }[]>;
  listConsumerGroupOffsets(options: { groups: string[] }): Promise<
    {
      groupId: string;
      topics: { name: string; partitions: { partitionIndex: number; committedOffset: bigint }[] }[];
    }[]
  >;
  deleteGroups(options: { groups: string[] }): Promise<unknown>;
  close(): Promise<void>;
}

/** The options every client of the adapter is created with (any other option of `Base` passes through). */
export interface PlatformaticBaseOptions {
  clientId: string;
  bootstrapBrokers: string[];
  [option: string]: unknown;
}

/** The @platformatic/kafka module (`import * as platformatic from '@platformatic/kafka'`), or its three classes. */
export interface PlatformaticKafkaModule {
  readonly Consumer: new (
    options: PlatformaticBaseOptions & {
      groupId: string;
      autocommit: false;
      sessionTimeout?: number;
      heartbeatInterval?: number;
      rebalanceTimeout?: number;
      maxWaitTime?: number;
    },
  ) => PlatformaticConsumer;
  readonly Producer: new (
    options: PlatformaticBaseOptions & { idempotent?: boolean; autocreateTopics?: boolean },
  ) => PlatformaticProducer;
  readonly Admin: new (options: PlatformaticBaseOptions) => PlatformaticAdmin;
}
