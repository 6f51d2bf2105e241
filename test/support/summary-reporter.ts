// A vitest reporter that ends the run with one plain line: `N passed, N failed` (then `, N skipped` when any
// test was skipped or left as todo). CI reads that line. A test file that failed to load (an import error, a
// failing beforeAll) counts as one failure when none of its tests failed, and so does each unhandled error:
// a broken run never reads as `0 failed`.
import type { Reporter, SerializedError, TestModule, Vitest } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  private vitest: Vitest | undefined;

  onInit(vitest: Vitest): void {
    this.vitest = vitest;
  }

  onTestRunEnd(
    testModules: ReadonlyArray<TestModule>,
    unhandledErrors: ReadonlyArray<SerializedError>,
  ): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const module of testModules) {
      let failedHere = 0;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed += 1;
        else if (state === 'failed') failedHere += 1;
        else skipped += 1;
      }
      if (failedHere === 0 && module.state() === 'failed') failedHere = 1;
      failed += failedHere;
    }
    failed += unhandledErrors.length;
    const line = `${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`;
    if (this.vitest) this.vitest.logger.log(line);
    else console.log(line);
  }
}
