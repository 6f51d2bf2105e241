// Type-aware lint. The rules that matter most for a consumer library: an un-awaited ack or commit is the
// classic bug, so floating and misused promises are errors.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const FAST_PATHS = {
  regex: '(^|/)kysely/fast/|^\\./fast/',
  message:
    'The fast paths are reached only through kysely-seam.ts: import what you need from outside kysely/fast (docs/core.md, "Seams").',
};
const KYSELY_SEAM = {
  regex: '^(\\.\\./)+kysely/',
  message:
    'The store takes a seam: it never imports the Kysely seam (build it in ../kysely, join them in postgres/index.ts; docs/core.md, "Seams").',
};

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      '.services/**',
      'packages/data/test/prisma/generated/**',
      'examples/data-layers/prisma/generated/**',
      '**/*.js',
      '**/*.cjs',
      '**/*.mjs',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/restrict-template-expressions': 'off',
      '@typescript-eslint/only-throw-error': 'off',
      '@typescript-eslint/prefer-promise-reject-errors': 'off',
    },
  },
  // Seams (docs/core.md, "Seams"). The Kysely seam's fast paths (packages/core/src/kysely/fast) are reached only
  // through kysely-seam.ts, so deleting that folder (and that one import) leaves every other file compiling,
  // @inboxkit/data's included. The store and partition maintenance (packages/core/src/postgres) take a seam and
  // never import the Kysely seam; only the entry point, postgres/index.ts, joins the two.
  {
    files: ['**/*.ts'],
    ignores: ['packages/core/src/kysely/kysely-seam.ts', 'packages/core/src/kysely/fast/**'],
    rules: { 'no-restricted-imports': ['error', { patterns: [FAST_PATHS] }] },
  },
  {
    files: ['packages/core/src/postgres/**/*.ts'],
    ignores: ['packages/core/src/postgres/index.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [FAST_PATHS, KYSELY_SEAM] }] },
  },
);
