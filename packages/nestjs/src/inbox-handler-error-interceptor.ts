// The global interceptor InboxkitModule registers (APP_INTERCEPTOR): inside a handler run by the inboxkit
// transport strategy, it carries the handler's original error past Nest's RPC exception layer, so the
// consumer classifies the real error (PermanentError, RetryableError, a validation failure). Everywhere
// else it does nothing.

import { Injectable, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import { catchError, throwError, type Observable } from 'rxjs';
import { handlerFailure, isInboxContextMark } from './inbox-handler-failure.js';

/**
 * Passes a failed inboxkit message handler's error to the consumer unchanged. Registered globally by
 * `InboxkitModule`; in a hybrid application connect the microservice with `{ inheritAppConfig: true }` so it
 * applies there too.
 */
@Injectable()
export class InboxHandlerErrorInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'rpc') return next.handle();
    const inbox = context.switchToRpc().getContext<unknown>();
    if (!isInboxContextMark(inbox)) return next.handle();
    return next
      .handle()
      .pipe(catchError((error: unknown) => throwError(() => inbox.passThrough(handlerFailure(error)))));
  }
}
