// Which response headers a replay carries: the one rule, applied when a response is stored in Postgres and
// again when a response is read back from the fast path (an entry with any other header is not served).

/**
 * The headers of `headers` that replays carry: those named in `replayHeaders` (lower-case names; the
 * `replayHeaders` option, default content-type, content-language, location and etag). Never `set-cookie` unless
 * the application lists it.
 *
 * @example
 * replayedHeaders({ 'content-type': 'application/json', 'set-cookie': 's=1' }, new Set(['content-type']));
 * // { 'content-type': 'application/json' }
 */
export function replayedHeaders(
  headers: Readonly<Record<string, string>>,
  replayHeaders: ReadonlySet<string>,
): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) if (replayHeaders.has(name)) kept[name] = value;
  return kept;
}
