// Who may talk to the console: loopback detection, the credential check and the Host-header rule.

import { describe, expect, it } from 'vitest';

import { acceptableHost, checkAuthorization, isLoopback } from '../../src/console/console-auth.js';

const TOKEN = 'a-credential-of-some-length';
const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('console access', () => {
  it('knows which addresses only this machine reaches', () => {
    for (const host of ['127.0.0.1', '127.3.4.5', '::1', '[::1]', 'localhost', '::ffff:127.0.0.1'])
      expect(isLoopback(host), host).toBe(true);
    for (const host of [
      '0.0.0.0',
      '::',
      '10.0.0.1',
      '192.168.1.5',
      'example.com',
      '128.0.0.1',
      'localhost.example.com',
    ])
      expect(isLoopback(host), host).toBe(false);
  });

  it('accepts the credential as a basic-auth password (any user) or a Bearer token, and nothing else', () => {
    expect(checkAuthorization(basic('alice', TOKEN), TOKEN)).toEqual({ ok: true, user: 'alice' });
    expect(checkAuthorization(basic('', TOKEN), TOKEN)).toEqual({ ok: true, user: undefined });
    expect(checkAuthorization(`Bearer ${TOKEN}`, TOKEN)).toEqual({ ok: true, user: undefined });
    expect(checkAuthorization(`bearer ${TOKEN}`, TOKEN).ok).toBe(true);
    for (const header of [
      undefined,
      '',
      'Bearer',
      `Bearer ${TOKEN} `.trim() + 'x',
      basic('alice', `${TOKEN}x`),
      basic(TOKEN, ''),
      `Token ${TOKEN}`,
      'Basic !!!',
      `Basic ${Buffer.from(TOKEN).toString('base64')}`,
    ]) {
      expect(checkAuthorization(header, TOKEN).ok, String(header)).toBe(false);
    }
    expect(checkAuthorization(undefined, undefined)).toEqual({ ok: true, user: undefined });
  });

  it('on a loopback bind answers only to its own host names and port', () => {
    expect(acceptableHost('127.0.0.1:7070', '127.0.0.1', 7070)).toBe(true);
    expect(acceptableHost('localhost:7070', '127.0.0.1', 7070)).toBe(true);
    expect(acceptableHost('[::1]:7070', '127.0.0.1', 7070)).toBe(true);
    expect(acceptableHost('LOCALHOST:7070', '127.0.0.1', 7070)).toBe(true);
    expect(acceptableHost('evil.example:7070', '127.0.0.1', 7070)).toBe(false);
    expect(acceptableHost('127.0.0.1:7071', '127.0.0.1', 7070)).toBe(false);
    expect(acceptableHost('127.0.0.1', '127.0.0.1', 7070)).toBe(false);
    expect(acceptableHost(undefined, '127.0.0.1', 7070)).toBe(false);
    // Bound beyond loopback, the credential is the guard: any host name.
    expect(acceptableHost('console.internal:7070', '0.0.0.0', 7070)).toBe(true);
  });
});
