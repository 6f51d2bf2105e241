// The path a key is scoped to when no router names the route (node:http): one spelling per path, so a retry
// that a client, proxy or library spells differently finds the same key.

/** RFC 3986 unreserved characters: percent-encoding them changes nothing. */
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

function normalizeSegment(segment: string): string {
  // Decode escapes of unreserved characters, upper-case the hex of the others (RFC 3986 §6.2.2.1–2).
  return segment.replace(/%([0-9a-fA-F]{2})/g, (_escape, hex: string) => {
    const c = String.fromCharCode(parseInt(hex, 16));
    return UNRESERVED.test(c) ? c : `%${hex.toUpperCase()}`;
  });
}

/**
 * The path of a request target in one canonical spelling: without query and fragment, from an absolute-form
 * target (`http://host/pay`) its path, empty segments dropped (so `//pay`, `/pay/` and `/pay//` are `/pay`), dot
 * segments resolved (`/a/../pay`, `/./pay`), escapes of unreserved characters decoded (`/p%61y` is `/pay`) and the
 * other escapes upper-cased (`%2f` is `%2F`; an encoded `/` stays encoded). Case is kept: a path is
 * case-sensitive unless the application says otherwise (then lower-case it in your own `route`).
 *
 * @example
 * requestPath('//Pay/./x/..?a=1'); // '/Pay'
 */
export function requestPath(url: string): string {
  if (url === '*') return url;
  let target = url;
  if (!target.startsWith('/')) {
    try {
      target = new URL(target).pathname;
    } catch {
      target = `/${target}`;
    }
  }
  const end = target.search(/[?#]/);
  const path = end < 0 ? target : target.slice(0, end);
  const out: string[] = [];
  for (const raw of path.split('/')) {
    const segment = normalizeSegment(raw);
    if (segment === '' || segment === '.') continue;
    if (segment === '..') out.pop();
    else out.push(segment);
  }
  return `/${out.join('/')}`;
}
