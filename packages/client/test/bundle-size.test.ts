// The size budget, in CI through `npm test`: the tree-shaken browser bundle of the whole queue is at most 5 kB
// min+gzip (scripts/bundle-size.ts measures it with esbuild, as an app's bundler would see it).

import { describe, expect, it } from 'vitest';
import { BUDGET_BYTES, measureBundle } from '../scripts/bundle-size.js';

describe('the browser bundle', () => {
  it('is at most 5 kB min+gzip, IndexedDB storage, Web Locks and Background Sync included', async () => {
    const { minified, gzipped } = await measureBundle();
    console.log(`@inboxkit/client: ${minified} B minified, ${gzipped} B min+gzip (budget ${BUDGET_BYTES} B)`);
    expect(minified).toBeGreaterThan(1000); // the bundle holds the queue, not an empty shell
    expect(gzipped).toBeLessThanOrEqual(BUDGET_BYTES);
  });
});
