// A TCP proxy on a port of its own, closed until `open()`: a consumer pointed at it meets a broker that is down
// (connection refused), then one that comes up, without stopping the broker other tests share.

import net from 'node:net';

export interface TcpProxy {
  /** The port clients connect to; refused until `open()`. */
  readonly port: number;
  /** Starts listening and forwarding to the target. */
  open(): Promise<void>;
  /** Stops listening and drops every forwarded connection. */
  close(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A proxy to `host:port`, closed for now. */
export async function tcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const port = await freePort();
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  return {
    port,
    async open() {
      if (server) return;
      server = net.createServer((client) => {
        const upstream = net.connect(target.port, target.host);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => undefined);
        }
        client.pipe(upstream).pipe(client);
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      await new Promise<void>((resolve, reject) => {
        server!.once('error', reject);
        server!.listen(port, '127.0.0.1', resolve);
      });
    },
    async close() {
      const s = server;
      server = undefined;
      for (const socket of sockets) socket.destroy();
      if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
    },
  };
}
