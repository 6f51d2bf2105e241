// NATS headers <-> inboxkit's string headers. NATS header names are case-sensitive on the wire; inboxkit hands
// lower-cased names to core (InboundMessage.headers) and writes its own names lower-case, as on every broker.

import { headers as natsHeaders } from '@nats-io/transport-node';
import type { MsgHdrs } from '@nats-io/transport-node';

/** JetStream's de-duplication header: `js.publish(…, { msgID })` writes it, and inboxkit reads the id from it. */
export const NATS_MSG_ID_HEADER = 'Nats-Msg-Id';

/**
 * The headers of a NATS message as a plain record: names lower-cased, the first value of a repeated header.
 * An absent header block gives `{}`.
 */
export function readHeaders(h: MsgHdrs | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (h === undefined) return out;
  for (const name of h.keys()) {
    const lower = name.toLowerCase();
    if (out[lower] !== undefined) continue;
    out[lower] = h.get(name);
  }
  return out;
}

/**
 * A NATS header block holding `values`. NATS headers are MIME-like: a value must not hold CR or LF (they
 * would end the header), so these are replaced by spaces; everything else is kept.
 */
export function writeHeaders(values: Readonly<Record<string, string>>): MsgHdrs {
  const h = natsHeaders();
  for (const [name, value] of Object.entries(values)) h.set(name, value.replace(/[\r\n]+/g, ' '));
  return h;
}

/** True for JetStream's "stream not found" / "consumer not found" answers (HTTP-like status 404). */
export function isNotFound(error: unknown): boolean {
  const e = error as { status?: unknown; name?: unknown } | null;
  return (
    typeof e === 'object' &&
    e !== null &&
    (e.status === 404 || (typeof e.name === 'string' && e.name.endsWith('NotFoundError')))
  );
}
