// A vitest reporter that ends the run with one plain line: `N passed, N failed` (then `, N skipped` when any
// test was skipped or left as todo, each of them named just above it unless `-t` filtered the run). CI reads
// that line. A test file that failed to load (an import error, a failing beforeAll) counts as one failure when
// none of its tests failed, and so does each unhandled error: a broken run never reads as `0 failed`.
//
// In `vitest run` the line is printed when the process exits, so that it closes the output even after the global
// setup's teardown has stopped the services it started; in watch mode, after each run.
import { relative } from 'node:path';
import type { Reporter, SerializedError, TestModule, Vitest } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  private vitest: Vitest | undefined;
  private closing: { skipped: string[]; passed: number; failed: number } | undefined;

  onInit(vitest: Vitest): void {
    this.vitest = vitest;
  }

  onTestRunEnd(
    testModules: ReadonlyArray<TestModule>,
    unhandledErrors: ReadonlyArray<SerializedError>,
  ): void {
    let passed = 0;
    let failed = 0;
    const skipped: string[] = [];
    for (const module of testModules) {
      let failedHere = 0;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed += 1;
        else if (state === 'failed') failedHere += 1;
        else skipped.push(`skipped: ${relative(process.cwd(), module.moduleId)} > ${test.fullName}`);
      }
      if (failedHere === 0 && module.state() === 'failed') failedHere = 1;
      failed += failedHere;
    }
    failed += unhandledErrors.length;
    if (this.vitest?.config.watch) {
      this.print(skipped, passed, failed);
      return;
    }
    if (this.closing === undefined) {
      // stdout is synchronous on Linux (files, pipes and terminals), so an 'exit' handler may write to it. A run
      // that exits non-zero with no failed test (a failing teardown, no test file matched) counts one failure.
      process.once('exit', (code) => {
        const last = this.closing;
        if (!last) return;
        this.print(last.skipped, last.passed, code !== 0 && last.failed === 0 ? 1 : last.failed);
      });
    }
    this.closing = { skipped, passed, failed };
  }

  private print(skipped: string[], passed: number, failed: number): void {
    const line = `${passed} passed, ${failed} failed${skipped.length > 0 ? `, ${skipped.length} skipped` : ''}`;
    // Each skipped test is named, unless the run itself filtered tests by name (-t), which skips the others.
    const named = this.vitest?.config.testNamePattern ? [] : skipped;
    for (const text of [...named, line]) {
      if (this.vitest) this.vitest.logger.log(text);
      else console.log(text);
    }
  }
}
