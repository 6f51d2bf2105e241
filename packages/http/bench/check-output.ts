// Checks that http-bench.ts's output reads the way the repo's bench runner reads it (bench/parse-output.ts):
// three rate rows with p50/p99 and the two ratios. Exits 1 otherwise.
//
//   node --conditions=@inboxkit/source --import tsx packages/http/bench/http-bench.ts --quick \
//     | node --conditions=@inboxkit/source --import tsx packages/http/bench/check-output.ts

import { text } from 'node:stream/consumers';

import { rateRows, ratioLines } from '../../../bench/parse-output.js';

const output = await text(process.stdin);
const rows = rateRows(output);
const ratios = ratioLines(output);
console.log(JSON.stringify({ rows, ratios }, null, 2));
const problems: string[] = [];
for (const label of ['plain', 'first request', 'replay']) {
  const row = rows.find((r) => r.label === label);
  if (row === undefined || !(row.perSecond > 0) || row.p50 === undefined || row.p99 === undefined)
    problems.push(`no complete rate row "${label}"`);
}
if (rows.length !== 3) problems.push(`expected 3 rate rows, got ${rows.length}`);
for (const label of ['ratio first request/plain', 'ratio replay/plain']) {
  const ratio = ratios.find((r) => r.label === label);
  if (ratio === undefined || !(ratio.value > 0)) problems.push(`no ratio "${label}"`);
}
if (ratios.length !== 2) problems.push(`expected 2 ratios, got ${ratios.length}`);
if (problems.length > 0) {
  console.error(`bench output does not parse:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log('ok: the bench runner reads 3 rate rows and 2 ratios');
