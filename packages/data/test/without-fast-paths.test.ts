// @inboxkit/data needs none of the Kysely seam's fast paths: with packages/core/src/kysely/fast deleted (and its
// one import in kysely-seam.ts replaced by "no fast path"), core's and data's sources still typecheck. Before
// the SQL-literal helper moved out of that folder (to core's postgres/sql-literal.ts), postgres/index.ts
// re-exported it from there and this failed: "Cannot find module '../kysely/fast/sql-literal.js'".
import { describe, expect, it } from 'vitest';
import { checkWithoutFastPaths } from '../../../scripts/check-without-fast-paths.js';

describe('@inboxkit/data without the fast-path folder', () => {
  it('compiles, with core, once packages/core/src/kysely/fast is deleted', () => {
    const result = checkWithoutFastPaths();
    expect(result.output).toBe('');
    expect(result.ok).toBe(true);
  }, 300_000);
});
