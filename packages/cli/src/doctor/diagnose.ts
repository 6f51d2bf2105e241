// `inboxkit doctor` as a library call: probe the services, then check every consumer's settings (with the
// limits the brokers reported filled in), and return one list of checks.

import type { CliServices } from '../cli-services.js';
import type { ConnectionSettings } from '../settings/connection-settings.js';
import { checkConfigInvariants } from './config-invariants.js';
import type { DoctorCheck } from './config-invariants.js';
import type { ConsumerSettings } from './consumer-settings.js';
import { probeServices } from './probe-services.js';
import type { ProbedLimits, ProbeOptions } from './probe-services.js';

/** Options of `diagnose()`. */
export interface DiagnoseOptions extends ProbeOptions {
  readonly connection: ConnectionSettings;
  readonly services: CliServices;
  /** The consumers to check (from `readConsumerSettings`). */
  readonly consumers: readonly ConsumerSettings[];
}

/** The result of `diagnose()`. */
export interface DoctorReport {
  readonly checks: readonly DoctorCheck[];
  /** True when no check failed (warnings and skips are fine). */
  readonly ok: boolean;
}

/**
 * Checks connectivity to each configured service and the configuration invariants of each consumer.
 * Limits read from a broker (SQS VisibilityTimeout and maxReceiveCount of `--source`) are used where the
 * consumer's settings did not give them.
 *
 * @example
 * const report = await diagnose({ connection, services: defaultCliServices(process.env), consumers, env: process.env });
 * if (!report.ok) for (const c of report.checks) if (c.status === 'fail') console.log(c.name, c.fix);
 */
export async function diagnose(options: DiagnoseOptions): Promise<DoctorReport> {
  const limits: ProbedLimits = {};
  const connectivity = await probeServices(options.connection, options.services, options, limits);
  const invariants = options.consumers.flatMap((c) =>
    checkConfigInvariants({
      ...c,
      sqsVisibilityTimeoutMs: c.sqsVisibilityTimeoutMs ?? limits.sqsVisibilityTimeoutMs,
      sqsMaxReceiveCount: c.sqsMaxReceiveCount ?? limits.sqsMaxReceiveCount,
    }),
  );
  const checks = [...connectivity, ...invariants];
  return { checks, ok: checks.every((c) => c.status !== 'fail') };
}
