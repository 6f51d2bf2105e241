// @inboxkit/outbox: Transactional outbox and relay for inboxkit: publish exactly the messages a transaction committed.
export {};
