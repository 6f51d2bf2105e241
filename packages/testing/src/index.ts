// @inboxkit/testing: the learning transport, the transport conformance suite, the redelivery contract test
// for users' handlers, an outcome recorder and unique names. Everything here proves idempotency instead of
// asserting it.
export * from './transport-harness.js';
export * from './transport-conformance.js';
export * from './transport-conformance-checks.js';
export * from './transport-conformance-fixture.js';
export * from './learning-broker.js';
export * from './learning-transport.js';
export { LearningSettlement } from './learning-settlement.js';
export * from './learning-transport-harness.js';
export * from './learning-dead-letter-reader.js';
export * from './crash-signal.js';
export * from './crashable-consumer.js';
export * from './assert-idempotent-handler.js';
export * from './outcome-recorder.js';
export * from './describe-outcome.js';
export * from './unique-name.js';
export * from './store-conformance.js';
