// The webhook endpoint: it checks the provider's signature and puts the raw body on SQS, nothing else. It
// parses nothing and writes no database, so it answers in milliseconds and the provider never times out on
// it; everything that can fail happens later, in the consumer, with retries and a DLQ.

import { SendMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The signature header the (fictional) provider sends: `sha256=<hex HMAC of the raw body>`. */
export const SIGNATURE_HEADER = 'x-provider-signature';

/** Signs a body the way the provider does (for tests and the example's own sender). */
export function signWebhook(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

function validSignature(secret: string, body: string, header: string | undefined): boolean {
  if (header === undefined) return false;
  const expected = Buffer.from(signWebhook(secret, body));
  const given = Buffer.from(header);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/** Options of `startWebhookIngress`. */
export interface WebhookIngressOptions {
  readonly client: Pick<SQSClient, 'send'>;
  readonly queueUrl: string;
  /** The provider's signing secret. */
  readonly secret: string;
  /** Default is 0: an ephemeral port on 127.0.0.1. */
  readonly port?: number;
}

/** A running ingress. */
export interface WebhookIngress {
  /** e.g. `http://127.0.0.1:41234/webhooks` */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * `POST /webhooks`: 401 on a bad signature; otherwise the raw body is sent to SQS as it came (no attributes:
 * the consumer finds the event id in the body) and the answer is 202. A provider that gets no 2xx retries the
 * same event later: that is one source of the duplicates the consumer absorbs.
 */
export async function startWebhookIngress(options: WebhookIngressOptions): Promise<WebhookIngress> {
  const server = createServer((req, res) => {
    void (async () => {
      if (req.method !== 'POST' || req.url !== '/webhooks') {
        res.writeHead(404).end();
        return;
      }
      let body = '';
      for await (const chunk of req) body += String(chunk);
      if (!validSignature(options.secret, body, req.headers[SIGNATURE_HEADER] as string | undefined)) {
        res.writeHead(401).end('bad signature');
        return;
      }
      await options.client.send(new SendMessageCommand({ QueueUrl: options.queueUrl, MessageBody: body }));
      res.writeHead(202).end();
    })().catch(() => {
      // SQS refused or failed: a 5xx makes the provider retry later; nothing was lost.
      if (!res.headersSent) res.writeHead(503).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/webhooks`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
