// Inboxkit.health() through @nestjs/terminus: `up` when the store answers and every transport strategy is
// running, `down` with what is wrong otherwise, so a readiness probe takes an instance whose consumers stopped
// (or whose database is gone) out of rotation.

import { Inject, Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import type { HealthIndicatorResult } from '@nestjs/terminus';
import { Inboxkit } from '../inboxkit.js';
import type { TransportStatus } from '../inboxkit.js';

/** What the indicator reports beside its status: the store's answer and each transport's state. */
export interface InboxkitHealthDetails extends Record<string, unknown> {
  readonly store: 'reachable' | 'unreachable';
  /** The store's error message when it did not answer. */
  readonly error?: string;
  readonly transports: readonly TransportStatus[];
}

/**
 * A `@nestjs/terminus` health indicator for the inbox: `up` when `SELECT 1` through the store's seam succeeds and
 * every `InboxkitTransport` registered with the module is `running`; `down` otherwise, with the store's error and
 * each transport's state (never the payloads or ids of messages). Needs `TerminusModule` imported beside
 * `InboxkitModule`; provide it in the module that has your health controller. Never throws: terminus turns a
 * `down` into a 503.
 *
 * @example
 * // the health controller
 * @Controller('health')
 * class HealthController {
 *   constructor(private readonly health: HealthCheckService, private readonly inbox: InboxkitHealthIndicator) {}
 *   @Get() @HealthCheck()
 *   check() { return this.health.check([() => this.inbox.isHealthy()]); }
 * }
 * // the application module: imports: [TerminusModule, InboxkitModule.forRoot(…)], providers: [InboxkitHealthIndicator]
 */
@Injectable()
export class InboxkitHealthIndicator {
  constructor(
    @Inject(Inboxkit) private readonly inboxkit: Inboxkit,
    @Inject(HealthIndicatorService) private readonly indicators: HealthIndicatorService,
  ) {}

  /** The inbox's health under `key` (default `inboxkit`). */
  async isHealthy<const Key extends string = 'inboxkit'>(
    key: Key = 'inboxkit' as Key,
  ): Promise<HealthIndicatorResult<Key>> {
    const session = this.indicators.check(key);
    const health = await this.inboxkit.health();
    const details: InboxkitHealthDetails = {
      store: health.store.reachable ? 'reachable' : 'unreachable',
      ...(health.store.error === undefined ? {} : { error: health.store.error }),
      transports: health.transports,
    };
    return health.healthy ? session.up(details) : session.down(details);
  }
}
