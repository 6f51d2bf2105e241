// start() keeps trying to reach the broker, as a consumer that lost its connection after start does: a process
// started while the broker restarts (or before it is up) waits for it instead of exiting. Failures retrying
// cannot fix (credentials, permissions, a conflicting topology) reject at once; `startTimeoutMs` bounds the rest.
// The retry loop and the error helpers are core's (shared by the three transports, imported from
// @inboxkit/core where they are used); what is here is this transport's own reading of its client's errors.

