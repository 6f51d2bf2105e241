// Polls broker state that has no event to await (queue depths), with a deadline and a message saying what
// was last seen. Outcomes are awaited through the OutcomeRecorder instead.

/** Resolves once `check` returns true; rejects after `timeoutMs` with `describe()`'s last answer. */
export async function eventually(
  check: () => Promise<boolean>,
  describe: () => Promise<string>,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`not reached within ${timeoutMs} ms: ${await describe()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
