// The error of a command line that cannot be run as written: the CLI prints it with the usage and exits 2.

import { InboxkitError } from '@inboxkit/core';

/** A bad flag, a missing value, an unknown command or transport. The message says what to change. */
export class UsageError extends InboxkitError {
  /** The command whose usage to print (`dlq replay`), or `undefined` for the top-level usage. */
  readonly command: string | undefined;

  constructor(message: string, command?: string) {
    super('USAGE', message, false);
    this.command = command;
  }
}
