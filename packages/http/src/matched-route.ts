// The scope of a key behind a router: the route the framework matched (its pattern), not the path as the client
// spelled it, plus the values of its path parameters, so `/payments/42/refund` and `/payments/42/refund/` share a
// key while `/payments/43/refund` has its own.

/**
 * The route string for a matched route: `pattern` (one trailing `/` dropped, so a prefix root registered both
 * ways is one route), followed by its parameters sorted by name when it has any
 * (`/payments/:id/refund id=42`). Parameter values are percent-encoded; an array value (a splat) is joined by `/`.
 *
 * @example
 * matchedRoute('/payments/:id/refund', { id: '42' }); // '/payments/:id/refund id=42'
 */
export function matchedRoute(
  pattern: string,
  params: Readonly<Record<string, unknown>> | undefined = undefined,
): string {
  const route = pattern.length > 1 && pattern.endsWith('/') ? pattern.slice(0, -1) : pattern;
  const entries = Object.entries(params ?? {})
    .filter(([, value]) => value !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (entries.length === 0) return route;
  const encode = (value: unknown): string =>
    Array.isArray(value) ? value.map(encode).join('/') : encodeURIComponent(String(value));
  return `${route} ${entries.map(([name, value]) => `${encodeURIComponent(name)}=${encode(value)}`).join('&')}`;
}
