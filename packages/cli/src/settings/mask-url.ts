// Connection URLs carry passwords; the CLI prints them only through this.

/**
 * Returns `url` with its password (and any `password=`/`secret`-like query parameters) replaced by `***`.
 * Strings that are not URLs are returned with anything after `:` and before `@` masked.
 *
 * @example
 * maskUrl('postgres://app:s3cret@db:5432/app') // 'postgres://app:***@db:5432/app'
 */
export function maskUrl(url: string): string {
  try {
    const parsed = new URL(url);
    let masked = false;
    if (parsed.password !== '') {
      parsed.password = '***';
      masked = true;
    }
    for (const key of [...parsed.searchParams.keys()]) {
      if (/pass|secret|token|key/i.test(key)) {
        parsed.searchParams.set(key, '***');
        masked = true;
      }
    }
    return masked ? parsed.toString() : url;
  } catch {
    return url.replace(/(\/\/[^:/@]*:)[^@]*@/, '$1***@');
  }
}

/**
 * Replaces every occurrence of the given secrets (and the password part of any URL) in `text` with `***`,
 * for error messages that may quote a connection string.
 */
export function maskSecretsIn(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length < 4) continue;
    out = out.split(secret).join(maskUrl(secret) === secret ? '***' : maskUrl(secret));
  }
  return out.replace(/([a-z][a-z0-9+.-]*:\/\/[^:/@\s]*:)[^@\s]*@/gi, '$1***@');
}
