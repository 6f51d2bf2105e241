// docs/getting-started.md shows these files verbatim: if one changes, change the page (and the other way round).

import { readFileSync } from 'node:fs';

import { describe, expect, it } from 'vitest';

const read = (path: string): string => readFileSync(new URL(path, import.meta.url), 'utf8').trimEnd();
const page = read('../../../docs/getting-started.md');

describe('docs/getting-started.md', () => {
  for (const file of ['../src/billing-consumer.ts', '../src/main.ts', './billing-consumer.test.ts']) {
    it(`shows ${file.replace(/^\.\.?\//, '')} as it is`, () => {
      expect(page).toContain(`\`\`\`ts\n${read(file)}\n\`\`\``);
    });
  }
});
