// sendResponse, the adapters' last step for node:http and Express, through a real server: a write that Node
// refuses is answered 500 (or the connection cut once the head is out) and logged, never thrown.

import { createServer, type ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import type { Logger } from '@inboxkit/core';
import { sendResponse, type ResponseWriter } from '../src/send-response.js';
import { listen } from './support/listen.js';

const value = { status: 201, headers: { 'content-type': 'text/plain' }, body: Buffer.from('created') };
let close: (() => Promise<void>) | undefined;

afterEach(async () => {
  await close?.();
  close = undefined;
});

function recordingLogger(): Logger & { errors: string[] } {
  const errors: string[] = [];
  const none = (): void => {};
  return { debug: none, info: none, warn: none, error: (_obj, msg) => errors.push(msg ?? ''), errors };
}

async function serve(write: ResponseWriter, logger: Logger): Promise<string> {
  const server = await listen(
    createServer((_req, res: ServerResponse) => sendResponse(res, value, write, logger)),
  );
  close = () => server.close();
  return server.url;
}

describe('sendResponse', () => {
  it('answers 500 naming the failure when the write throws before the head is out', async () => {
    const logger = recordingLogger();
    const url = await serve((res) => {
      res.setHeader('x-partial', 'set before the failure');
      throw new Error('refused by Node');
    }, logger);
    const answer = await fetch(url);
    expect(answer.status).toBe(500);
    expect(answer.headers.get('x-partial')).toBeNull();
    expect(await answer.json()).toMatchObject({ title: 'Response not sent' });
    expect(logger.errors).toEqual(['idempotency keys: the response could not be written']);
  });

  it('cuts the connection when the write throws after the head is out', async () => {
    const logger = recordingLogger();
    const url = await serve((res) => {
      res.writeHead(201);
      res.write('part');
      throw new Error('refused by Node');
    }, logger);
    await expect(fetch(url).then((r) => r.text())).rejects.toThrow();
    expect(logger.errors).toEqual(['idempotency keys: the response could not be written']);
  });
});
