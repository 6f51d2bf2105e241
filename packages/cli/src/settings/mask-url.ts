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
    if (parsed.password !== '') parsed.password = '***';
    for (const key of [...parsed.searchParams.keys()]) {
      if (/pass|secret|token|key/i.test(key)) parsed.searchParams.set(key, '***');
    }
    return parsed.toString();
  } catch {
    return url.replace(/(\/\/[^:/@]*:)[^@]*@/, '$1***@');
  }
}
