// Values the CLI prints come from message ids, consumer names, dead-letter reasons and error messages that
// anyone who can publish a message chose. Every such value is printed through these functions. They live in
// the console page's folder (console-page/display-text.js) because the console serves the same module to the
// browser: the terminal and the page apply one display rule.

export {
  displayName,
  displayText,
  escapeJsonText,
  hasUnsafeCharacters,
} from '../../console-page/display-text.js';
