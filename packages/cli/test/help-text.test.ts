// The help a newcomer reads is the truth: each command's help names exactly the flags that command accepts,
// the overview names every command and --version, and --version prints the published package's version.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { COMMANDS, commandOptions } from '../src/command-line.js';
import { CLI_VERSION } from '../src/run-cli.js';
import { usage } from '../src/usage.js';

const flagsIn = (text: string) => new Set([...text.matchAll(/--([a-z][a-z-]*)/g)].map((m) => m[1] ?? ''));

describe('inboxkit help', () => {
  for (const command of COMMANDS) {
    it(`${command} --help names exactly the flags ${command} accepts`, () => {
      const accepted = commandOptions(command).filter((flag) => flag !== 'help');
      const documented = flagsIn(usage(command));
      expect(accepted.filter((flag) => !documented.has(flag))).toEqual([]);
      expect([...documented].filter((flag) => !accepted.includes(flag))).toEqual([]);
    });
  }

  it('the overview names every command and --version', () => {
    const overview = usage();
    for (const command of COMMANDS) expect(overview).toMatch(new RegExp(`^  ${command} `, 'm'));
    expect(overview).toContain('--version');
  });

  it('--version prints the version of the package', () => {
    const json = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    expect(CLI_VERSION).toBe(json.version);
  });
});
