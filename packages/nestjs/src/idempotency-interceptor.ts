// The interceptor behind @Idempotent(): runs the route's handler (pipes, route interceptors, the method) under
// runIdempotent() of @inboxkit/http and writes the protocol's answer itself, on Express or Fastify, so a
// replay is the stored response byte for byte.

import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  Inject,
  Injectable,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { HTTP_CODE_METADATA } from '@nestjs/common/constants.js';
import { from, lastValueFrom, type Observable } from 'rxjs';
import {
  matchedRoute,
  requestHeaders,
  requestPath,
  runIdempotent,
  type HttpResponse,
  type IdempotencyContext,
  type IdempotentRequest,
  type IdempotentResponseInit,
} from '@inboxkit/http';
import { Inboxkit } from './inboxkit.js';
import { IDEMPOTENT_ROUTE, type IdempotentOptions } from './idempotent-options.js';
import { isIdempotentReply } from './idempotent-reply.js';
import { ROUTE_CONTEXT, type IdempotentRouteContext } from './idempotent-route-context.js';

/** The slice of Fastify's reply the interceptor uses. */
interface FastifyReplyLike {
  readonly raw: ServerResponse;
  readonly sent: boolean;
  code(status: number): FastifyReplyLike;
  headers(values: Record<string, string>): FastifyReplyLike;
  send(body: Buffer): FastifyReplyLike;
}

/** The request fields the interceptor reads, on Express (`route`, `baseUrl`) and Fastify (`routeOptions`, `raw`). */
interface NestHttpRequest {
  readonly method: string;
  readonly url: string;
  readonly originalUrl?: string;
  readonly baseUrl?: string;
  readonly route?: { readonly path?: unknown };
  readonly routeOptions?: { readonly url?: string };
  readonly params?: Record<string, unknown>;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body?: unknown;
  readonly raw?: IncomingMessage;
  [ROUTE_CONTEXT]?: IdempotentRouteContext<unknown>;
}

function isFastifyReply(response: unknown): response is FastifyReplyLike {
  return (
    typeof (response as FastifyReplyLike).code === 'function' &&
    typeof (response as FastifyReplyLike).raw === 'object'
  );
}

/** The route pattern the framework matched (`/payments/:id`), or undefined. */
function routeTemplate(request: NestHttpRequest): string | undefined {
  if (request.routeOptions?.url !== undefined) return request.routeOptions.url;
  const path = request.route?.path;
  if (typeof path !== 'string') return undefined;
  const base = request.baseUrl ? requestPath(request.baseUrl) : '';
  return `${base === '/' ? '' : base}${path}`;
}

function queryOf(url: string): string {
  const start = url.indexOf('?');
  return start < 0 ? '' : url.slice(start + 1);
}

/** Writes the protocol's answer: exact headers and bytes (no framework serialisation, no ETag of its own). */
function write(response: unknown, value: HttpResponse): void {
  if (isFastifyReply(response)) {
    if (response.sent || response.raw.headersSent) return;
    response
      .code(value.status)
      .headers({ ...value.headers })
      .send(value.body);
    return;
  }
  const res = response as ServerResponse;
  if (res.headersSent) {
    // The handler wrote the response itself (through @Res()): what it sent is not what is stored.
    if (!res.writableEnded) res.destroy();
    return;
  }
  for (const [name, header] of Object.entries(value.headers)) res.setHeader(name, header);
  res.setHeader('content-length', String(value.body.length));
  res.statusCode = value.status;
  res.end(value.body);
}

/**
 * Runs an `@Idempotent()` route under the Idempotency-Key protocol. Provided by `InboxkitModule`; applied by
 * `@Idempotent()`, not used directly.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  readonly #inboxkit: Inboxkit;

  /** Throws a `ConfigurationError` when the module has no `idempotency` options: the application fails to start. */
  constructor(@Inject(Inboxkit) inboxkit: Inboxkit) {
    inboxkit.idempotencyKeys();
    this.#inboxkit = inboxkit;
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return from(this.#run(context, next));
  }

  async #run(context: ExecutionContext, next: CallHandler): Promise<undefined> {
    const handler = context.getHandler();
    const options = (Reflect.getMetadata(IDEMPOTENT_ROUTE, handler) ?? {}) as IdempotentOptions;
    const keys = this.#inboxkit.idempotencyKeys(options);
    const http = context.switchToHttp();
    const request = http.getRequest<NestHttpRequest>();
    const response = http.getResponse<unknown>();
    const method = request.method.toUpperCase();
    const declared = Reflect.getMetadata(HTTP_CODE_METADATA, handler) as number | undefined;
    const routeStatus = declared ?? (method === 'POST' ? 201 : 200);
    const template = routeTemplate(request);
    const fastify = isFastifyReply(response);
    const idempotentRequest: IdempotentRequest<unknown> = {
      method,
      route: template === undefined ? requestPath(request.url) : matchedRoute(template, request.params),
      routeTemplate: template,
      query: queryOf(request.originalUrl ?? request.url),
      headers:
        fastify && request.raw
          ? requestHeaders(request.raw, request.headers)
          : requestHeaders(request as never),
      body: request.body,
      responseStarted: () =>
        fastify ? response.sent || response.raw.headersSent : (response as ServerResponse).headersSent,
      native: request,
    };
    const toInit = (value: unknown): IdempotentResponseInit =>
      isIdempotentReply(value) ? value : { status: routeStatus, body: value };
    const result = await runIdempotent(
      keys,
      idempotentRequest,
      async (ictx: IdempotencyContext<unknown, unknown>) => {
        let stored: IdempotentResponseInit | undefined;
        request[ROUTE_CONTEXT] = {
          key: ictx.key,
          attempt: ictx.attempt,
          signal: ictx.signal,
          transaction: async <T>(fn: (tx: unknown) => Promise<T>): Promise<T> => {
            let value: T | undefined;
            stored = await ictx.transaction(async (tx) => {
              value = await fn(tx);
              return toInit(value);
            });
            return value as T;
          },
          phase: (name, fn) => ictx.phase(name, fn),
        };
        const value = await lastValueFrom(next.handle(), { defaultValue: undefined });
        // After transaction() the stored response is the one sent: what the handler returned is that same value.
        return stored ?? toInit(value);
      },
      options.required === undefined ? {} : { required: options.required },
    );
    write(response, result);
    return undefined;
  }
}
