// Types of display-text.js (plain JavaScript so the console serves it to the page without a build step).

/** True when `value` contains a character `displayText` would escape. */
export function hasUnsafeCharacters(value: string): boolean;
/** Free text safe to show: every invisible, bidi or control character as a visible escape. */
export function displayText(text: string, options?: { readonly multiline?: boolean }): string;
/** An identifier as shown: as it is when plain, else quoted with every unsafe character escaped. */
export function displayName(value: string): string;
/** JSON text with every unsafe character inside its strings written as a `\uXXXX` escape. */
export function escapeJsonText(json: string): string;
