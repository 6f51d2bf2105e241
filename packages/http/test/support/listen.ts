// Starts a node:http server on 127.0.0.1 with a free port and returns its base URL.

import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export async function listen(
  listener: RequestListener | Server,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = typeof listener === 'function' ? createServer(listener) : listener;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
