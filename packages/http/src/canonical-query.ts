// The query string as part of "the same request": parameters in any order, spelled with `+` or `%20`, with or
// without a trailing `?`, are one query; other values are another request.

/**
 * The query of a request target (`/pay?a=1`, or just `?a=1`) in one canonical spelling: parameters decoded as
 * `application/x-www-form-urlencoded` (`+` is a space), sorted by name (the order of repeated names kept: `a=1&a=2`
 * is not `a=2&a=1`), re-encoded. `''` when there is none (`/pay`, `/pay?`).
 *
 * @example
 * canonicalQuery('/pay?b=x+y&a=1'); // 'a=1&b=x%20y'
 */
export function canonicalQuery(target: string): string {
  const start = target.indexOf('?');
  if (start < 0) return '';
  const hash = target.indexOf('#', start + 1);
  const query = target.slice(start + 1, hash < 0 ? undefined : hash);
  const pairs = [...new URLSearchParams(query)];
  // Array.prototype.sort is stable: repeated names keep their order.
  pairs.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
}
