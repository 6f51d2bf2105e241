// @inboxkit/cli: The inboxkit command: migrate, status, prune, dlq list|replay, doctor.
export {};
