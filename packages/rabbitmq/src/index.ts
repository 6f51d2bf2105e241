// @inboxkit/rabbitmq: amqplib transport for inboxkit: ack after commit, delays and DLQ that lose nothing.
export {};
