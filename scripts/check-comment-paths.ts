// Comments that name a file of this repository name one that exists: every TypeScript, SQL or shell file name
// (bare, or with its folders) in a comment of the packages' sources, tests, scripts and examples must be a file
// of the repository (a bare name anywhere; a path from the file's folder, its package, its package's src or the
// root). Lower-case names only (`inbox-sql.ts`), or any name with a folder: so `Node.js` and `postgres.js` are
// not file names here, and NOT_FILES lists the few that are something else. Prints each stale reference and exits 1 when there is
// any. Run by `npm run lint`; `--root <dir>` checks another tree.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { basename, dirname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Names in comments that are not files of this repository: an example of a user's file, properties in code. */
const NOT_FILES = new Set(['migrations/V7__reconciliation.sql', 'statement.sql', 's.sql']);

const REFERENCE = /(?<![\w./-])(?:[\w.-]+\/)*[\w-]+(?:\.[\w-]+)*\.(?:ts|sql|sh)\b/g;
const COMMENT = /(?:^\s*(?:\/\/|\/\*+|\*|#)|\s\/\/|\/\*)(.*)$/;

/** The stale references: `file:line: name`. */
export function staleCommentPaths(root: string): string[] {
  const listed = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], {
    cwd: root,
    encoding: 'utf8',
  })
    .split('\n')
    .filter((path) => path !== '' && existsSync(join(root, path)));
  const names = new Set(listed.map((path) => basename(path)));
  const paths = new Set(listed);
  const sources = listed.filter(
    (path) =>
      /^(packages|scripts|test|examples|bench)\//.test(path) && /\.(ts|tsx|js|mjs|cjs|sh)$/.test(path),
  );
  const stale: string[] = [];
  for (const file of sources) {
    const parts = file.split('/');
    const bases = [dirname(file), ''];
    if ((parts[0] === 'packages' || parts[0] === 'examples') && parts.length > 2)
      bases.push(join(parts[0], parts[1]!), join(parts[0], parts[1]!, 'src'));
    readFileSync(join(root, file), 'utf8')
      .split('\n')
      .forEach((line, index) => {
        const comment = COMMENT.exec(line)?.[1];
        if (comment === undefined) return;
        for (const reference of comment.match(REFERENCE) ?? []) {
          if (NOT_FILES.has(reference)) continue;
          if (!reference.includes('/')) {
            if (
              /^[a-z0-9]+([-_][a-z0-9]+)*(\.[a-z0-9-]+)*\.(ts|sql|sh)$/.test(reference) &&
              !names.has(reference)
            )
              stale.push(`${file}:${index + 1}: ${reference}`);
            continue;
          }
          const found =
            bases.some((base) => paths.has(normalize(join(base, reference)))) ||
            listed.some((path) => path.endsWith(`/${reference}`));
          if (!found) stale.push(`${file}:${index + 1}: ${reference}`);
        }
      });
  }
  return stale;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf('--root');
  const root =
    at > 0 ? resolve(process.argv[at + 1]!) : resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const stale = staleCommentPaths(root);
  if (stale.length === 0) console.log('[comment paths] every file a comment names exists');
  else {
    console.error(
      `[comment paths] ${stale.length} comment(s) name a file that does not exist (fix the text):`,
    );
    for (const line of stale) console.error(`  ${line}`);
    process.exitCode = 1;
  }
}
