// @inboxkit/testing: Learning transport, conformance suites and redelivery contract tests for inboxkit.
export {};
