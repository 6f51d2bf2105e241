// Which browser contexts may talk to the console. A page of another origin — another site, or another port of
// this machine (the same *site* as the console: ports do not count) — can make the browser send requests to
// the console with `<img>`, `<script>`, a form or `fetch`, and send the operator's cached basic-auth credential
// with them. Browsers say where a request comes from (`Sec-Fetch-Site`, and `Origin` on most of them), so the
// console refuses every request that is not its own page's or typed by the operator, whatever the method.
// Clients that are not browsers (curl, scripts) send neither header and pass.

import type { IncomingHttpHeaders } from 'node:http';

/**
 * Why a request must be refused as coming from another origin, or `undefined` when it may go on. Accepted:
 * no `Sec-Fetch-Site` (not a browser, or an old one), `same-origin`, `none` (typed in the address bar, a
 * bookmark); and a top-level navigation to the page itself (`GET /`) from anywhere, which reads nothing and
 * changes nothing (a link from a wiki). An `Origin`, when sent, must be the console's own.
 *
 * @example
 * crossOriginRefusal('GET', '/api/overview', { host: '127.0.0.1:7070', 'sec-fetch-site': 'same-site' });
 * // 'requests from another site or origin (sec-fetch-site: same-site) are not accepted'
 */
export function crossOriginRefusal(
  method: string,
  path: string,
  headers: IncomingHttpHeaders,
): string | undefined {
  const site = single(headers['sec-fetch-site'])?.toLowerCase();
  const navigatesToPage =
    method === 'GET' &&
    path === '/' &&
    single(headers['sec-fetch-mode']) === 'navigate' &&
    single(headers['sec-fetch-dest']) === 'document';
  if (site !== undefined && site !== 'same-origin' && site !== 'none' && !navigatesToPage) {
    return `requests from another site or origin (sec-fetch-site: ${site}) are not accepted`;
  }
  const origin = single(headers.origin);
  if (origin !== undefined && origin !== `http://${headers.host ?? ''}` && !navigatesToPage) {
    return `requests from ${origin} are not accepted`;
  }
  return undefined;
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
