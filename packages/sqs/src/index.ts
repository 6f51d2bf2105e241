// @inboxkit/sqs: SQS transport for inboxkit: delete only after commit, visibility heartbeats, FIFO order.
export {};
