// Renders outcomes in one line each, for the failure messages of the recorder, the learning transport and
// assertIdempotentHandler.

import type { Outcome } from '@inboxkit/core';

/** One outcome in one line: `m1 retry (attempt 2, handler-error, Error: boom)`. */
export function describeOutcome(event: {
  readonly id: string | undefined;
  readonly outcome: Outcome;
}): string {
  const o = event.outcome;
  const id = event.id === undefined ? '(no id)' : JSON.stringify(event.id);
  const error = (e: { name: string; message: string } | undefined): string =>
    e ? `, ${e.name}: ${e.message}` : '';
  switch (o.status) {
    case 'processed':
      return `${id} processed (attempt ${o.attempt})`;
    case 'duplicate':
      return `${id} duplicate (${o.reason})`;
    case 'retry':
      return `${id} retry (attempt ${o.attempt}, ${o.reason}, delay ${o.delayMs} ms${error(o.error)})`;
    case 'dead-letter':
      return `${id} dead-letter (${o.reason}, ${o.attempts} attempts${error(o.error)})`;
  }
}
