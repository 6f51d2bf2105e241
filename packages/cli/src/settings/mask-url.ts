// The CLI's first masking helpers, kept for programs that import them: `maskUrl` is `maskConnectionString`
// (every form, not only URLs) and `maskSecretsIn` a one-off `SecretScrubber`.

import { connectionStringSecrets, isUrlForm, maskConnectionString } from './mask-connection-string.js';
import { SecretScrubber } from './secret-scrubber.js';

/**
 * Returns `url` with its secrets replaced by `***`. Same as `maskConnectionString`, which also masks libpq
 * key/value strings; prefer that name in new code.
 *
 * @example
 * maskUrl('postgres://app:s3cret@db:5432/app') // 'postgres://app:***@db:5432/app'
 */
export function maskUrl(url: string): string {
  return maskConnectionString(url);
}

/**
 * Replaces every occurrence of the given secrets (connection strings: their secrets; other strings: as a
 * whole) and every credential-shaped value in `text` with `***`, for error messages that may quote a
 * connection string.
 *
 * @example
 * maskSecretsIn(`cannot connect to ${url}`, [url]);
 */
export function maskSecretsIn(text: string, secrets: readonly string[]): string {
  const scrubber = new SecretScrubber();
  for (const secret of secrets) {
    // A connection string gives up its secrets; any other string is a secret as a whole.
    if (isUrlForm(secret) || connectionStringSecrets(secret).length > 0) scrubber.addConnectionString(secret);
    else scrubber.add(secret);
  }
  return scrubber.scrub(text);
}
