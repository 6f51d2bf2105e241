// The process entry of the `inboxkit` bin: real streams and environment, Ctrl-C turned into a graceful stop
// (a second Ctrl-C exits at once — still safe, since a replay publishes before it removes).

import { runCli } from './run-cli.js';
import { secretScrubber } from './settings/secret-scrubber.js';

/**
 * Runs the command line against the process and resolves to the exit code (the bin sets `process.exitCode`).
 *
 * @example
 * process.exitCode = await main(process.argv.slice(2));
 */
export async function main(argv: readonly string[]): Promise<number> {
  const controller = new AbortController();
  const onSigint = (): void => {
    if (controller.signal.aborted) process.exit(130);
    process.stderr.write(
      '\ninterrupted: finishing the message in hand (Ctrl-C again to exit now; rerunning is safe)\n',
    );
    controller.abort();
  };
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigint);
  try {
    return await runCli(argv, {
      stdout: process.stdout,
      stderr: process.stderr,
      env: process.env,
      signal: controller.signal,
      cwd: process.cwd(),
    });
  } catch (error) {
    const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
    process.stderr.write(`inboxkit: unexpected error: ${secretScrubber(argv, process.env).scrub(text)}\n`);
    return 1;
  } finally {
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigint);
  }
}
