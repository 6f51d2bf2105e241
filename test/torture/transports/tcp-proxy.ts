// A loopback TCP proxy the SQS consumers talk through, so the harness can take "the broker" away from them:
// `outage(ms)` resets every open connection and refuses new ones for a while, then accepts again. ElasticMQ
// keeps its queues in memory, so restarting it would delete the run's messages and test the emulator, not the
// transport; an outage at the connection level is what a broker restart looks like from the client side.

import net from 'node:net';

export class TcpProxy {
  readonly #target: { host: string; port: number };
  readonly #sockets = new Set<net.Socket>();
  #server: net.Server | undefined;
  #port = 0;

  constructor(target: { host: string; port: number }) {
    this.#target = target;
  }

  get port(): number {
    return this.#port;
  }

  async listen(port = 0): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.#target.port, this.#target.host);
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          this.#sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.#server = server;
    this.#port = (server.address() as net.AddressInfo).port;
  }

  /** Resets every connection and refuses new ones for `ms`, then listens again on the same port. */
  async outage(ms: number): Promise<void> {
    await this.close();
    await new Promise((r) => setTimeout(r, ms));
    await this.listen(this.#port);
  }

  async close(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets) s.resetAndDestroy();
    this.#sockets.clear();
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
