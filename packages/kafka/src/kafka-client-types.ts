// The slice of the kafkajs client API this package calls, declared structurally: any client with these
// methods fits (kafkajs 2.x, and clients that copy its API such as @confluentinc/kafka-javascript's KafkaJS
// layer), and nothing else of kafkajs is imported at run time.

/** Record headers as kafkajs returns and accepts them. */
export interface KafkaHeaders {
  [name: string]: Buffer | string | (Buffer | string)[] | undefined;
}

/** One fetched record. */
export interface KafkaMessageLike {
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** Milliseconds since the epoch, as a decimal string (CreateTime or LogAppendTime). */
  readonly timestamp: string;
  readonly offset: string;
  readonly headers?: KafkaHeaders;
}

/** One fetched batch of one partition. */
export interface KafkaBatchLike {
  readonly topic: string;
  readonly partition: number;
  readonly highWatermark: string;
  readonly messages: readonly KafkaMessageLike[];
  lastOffset(): string;
}

/** Offsets of one topic, for `commitOffsetsIfNecessary`. */
export interface KafkaTopicOffsets {
  readonly topic: string;
  readonly partitions: { readonly partition: number; readonly offset: string }[];
}

/** What kafkajs passes to `eachBatch`. */
export interface KafkaEachBatchPayload {
  readonly batch: KafkaBatchLike;
  resolveOffset(offset: string): void;
  heartbeat(): Promise<void>;
  /** With offsets: commits exactly these, even while the consumer is stopping (unlike `consumer.commitOffsets`). */
  commitOffsetsIfNecessary(offsets?: { topics: KafkaTopicOffsets[] }): Promise<void>;
  isRunning(): boolean;
  isStale(): boolean;
}

/** The consumer options the transport passes to `run`. */
export interface KafkaRunConfig {
  autoCommit?: boolean;
  eachBatchAutoResolve?: boolean;
  partitionsConsumedConcurrently?: number;
  eachBatch?: (payload: KafkaEachBatchPayload) => Promise<void>;
}

export interface KafkaTopicPartitions {
  topic: string;
  partitions?: number[];
}

/** What kafkajs passes to `consumer.group_join` listeners. */
export interface KafkaGroupJoinEvent {
  readonly payload: { readonly memberAssignment: Readonly<Record<string, readonly number[]>> };
}

/** What kafkajs passes to `consumer.crash` listeners. */
export interface KafkaCrashEvent {
  readonly payload: { readonly error: Error; readonly restart: boolean };
}

/** A kafkajs `Consumer`, created and configured (group id, timeouts) by the application. */
export interface KafkaConsumerLike {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  subscribe(subscription: { topics: string[]; fromBeginning?: boolean }): Promise<void>;
  run(config?: KafkaRunConfig): Promise<void>;
  stop(): Promise<void>;
  commitOffsets(offsets: { topic: string; partition: number; offset: string }[]): Promise<void>;
  seek(position: { topic: string; partition: number; offset: string }): void;
  pause(topics: KafkaTopicPartitions[]): void;
  resume(topics: KafkaTopicPartitions[]): void;
  on(eventName: 'consumer.group_join', listener: (event: KafkaGroupJoinEvent) => void): () => void;
  on(eventName: 'consumer.crash', listener: (event: KafkaCrashEvent) => void): () => void;
}

/** One record to produce. */
export interface KafkaOutgoingRecord {
  key?: Buffer | string | null;
  value: Buffer | string | null;
  headers?: KafkaHeaders;
  timestamp?: string;
}

/** A kafkajs `Producer`. */
export interface KafkaProducerLike {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  sendBatch(batch: {
    acks?: number;
    timeout?: number;
    topicMessages?: { topic: string; messages: KafkaOutgoingRecord[] }[];
  }): Promise<unknown>;
}

/** A kafkajs `Admin`. */
export interface KafkaAdminLike {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  fetchTopicOffsets(
    topic: string,
  ): Promise<{ partition: number; offset: string; high: string; low: string }[]>;
  fetchOffsets(options: {
    groupId: string;
    topics?: string[];
  }): Promise<{ topic: string; partitions: { partition: number; offset: string }[] }[]>;
  deleteGroups(groupIds: string[]): Promise<unknown>;
}

/** The kafkajs `Kafka` client: a factory of producers, consumers and admins sharing one configuration. */
export interface KafkaClientLike {
  producer(config?: {
    idempotent?: boolean;
    maxInFlightRequests?: number;
    allowAutoTopicCreation?: boolean;
  }): KafkaProducerLike;
  consumer(config: {
    groupId: string;
    sessionTimeout?: number;
    heartbeatInterval?: number;
    rebalanceTimeout?: number;
    maxWaitTimeInMs?: number;
    allowAutoTopicCreation?: boolean;
  }): KafkaConsumerLike;
  admin(): KafkaAdminLike;
}
