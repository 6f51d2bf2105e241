// A fake fetch for the queue's unit tests: answers from a script of responses per call (or a function), and
// records every request with its Idempotency-Key and body, so a test counts sends per key.

export interface SentRequest {
  readonly url: string;
  readonly method: string;
  readonly key: string | null;
  readonly body: string | null;
  readonly headers: Headers;
}

export type Answer = Response | Error | ((request: SentRequest) => Response | Promise<Response>);

export interface FakeServer {
  readonly fetch: typeof fetch;
  readonly sent: SentRequest[];
  /** Sends to this key so far. */
  sendsOf(key: string): number;
}

/** `answers` are used in order, the last one for every call after. */
export function fakeServer(...answers: Answer[]): FakeServer {
  const sent: SentRequest[] = [];
  const fake = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const headers = new Headers(init.headers);
    const request: SentRequest = {
      url: input instanceof Request ? input.url : String(input),
      method: init.method ?? 'GET',
      key: headers.get('idempotency-key'),
      body: typeof init.body === 'string' ? init.body : null,
      headers,
    };
    const answer = answers[Math.min(sent.length, answers.length - 1)]!;
    sent.push(request);
    if (answer instanceof Error) throw answer;
    if (answer instanceof Response) return answer.clone();
    return answer(request);
  };
  return { fetch: fake, sent, sendsOf: (key) => sent.filter((r) => r.key === key).length };
}

export const json = (status: number, body: unknown, headers: Record<string, string> = {}): Response =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

/** A clock the test moves. */
export function fakeClock(start = 1_700_000_000_000): { now: () => number; advance(ms: number): void } {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}
