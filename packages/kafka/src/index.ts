// @inboxkit/kafka: kafkajs transport for inboxkit: commit offsets only after durable work.
export {};
