// Reads the log of `npm ci --loglevel=warn` and fails (exit 1) on any warning, except npm's EBADENGINE warning
// for a dependency listed in engine-exceptions.json with the reason it is harmless on this Node. Plain
// JavaScript: it runs right after the install, on whatever Node npm ran on.
//
//   node scripts/runtimes/check-install-log.mjs npm-ci.log
import { readFileSync } from 'node:fs';

const log = process.argv[2];
if (!log) {
  console.error('usage: check-install-log.mjs NPM_CI_LOG');
  process.exit(2);
}
const allowed = JSON.parse(readFileSync(new URL('./engine-exceptions.json', import.meta.url), 'utf8'));
delete allowed['//'];

const warnings = readFileSync(log, 'utf8')
  .split('\n')
  .filter((line) => /^npm (warn|WARN)/.test(line));
const refused = [];
const excused = new Set();
// An EBADENGINE warning spans lines: "Unsupported engine {", "  package: 'name@version',", "required", "current", "}".
let block;
for (const line of warnings) {
  const text = line.replace(/^npm (warn|WARN) ?/, '');
  if (text.startsWith('EBADENGINE')) {
    const body = text.slice('EBADENGINE'.length).trim();
    if (body.startsWith('Unsupported engine')) block = { lines: [line], name: undefined };
    if (block === undefined) {
      refused.push(line);
      continue;
    }
    if (!block.lines.includes(line)) block.lines.push(line);
    const pkg = /^package: '(.+)@[^@']*',?$/.exec(body);
    if (pkg) block.name = pkg[1];
    if (body === '}') {
      if (block.name !== undefined && Object.hasOwn(allowed, block.name)) excused.add(block.name);
      else refused.push(...block.lines);
      block = undefined;
    }
    continue;
  }
  refused.push(line);
}
if (block !== undefined) refused.push(...block.lines);

for (const name of excused) console.log(`[install] EBADENGINE of ${name} allowed on Node ${process.version}: ${allowed[name]}`);
if (refused.length > 0) {
  console.log(refused.join('\n'));
  console.log(
    `[install] npm printed the warnings above on Node ${process.version}: pin, replace or allow/deny (allowScripts) the dependency, ` +
      'or, for an engine warning that is harmless, list the package with its reason in scripts/runtimes/engine-exceptions.json',
  );
  process.exit(1);
}
