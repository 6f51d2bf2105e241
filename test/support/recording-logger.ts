// A logger for tests that read what was warned: it keeps each warning (its object and message) and drops the
// other levels. Shared by the start-up retry tests of the transports and the fast-path tests.

import type { Logger } from '@inboxkit/core';

/** One warning as the logger received it (`msg` is '' when none was given). */
export interface RecordedWarning {
  readonly obj: object;
  readonly msg: string;
}

/** A logger that records its warnings in `warnings`, in order. */
export function recordingLogger(): { logger: Logger; warnings: RecordedWarning[] } {
  const warnings: RecordedWarning[] = [];
  const noop = (): void => undefined;
  return {
    warnings,
    logger: {
      debug: noop,
      info: noop,
      error: noop,
      warn: (obj, msg) => void warnings.push({ obj, msg: msg ?? '' }),
    },
  };
}
