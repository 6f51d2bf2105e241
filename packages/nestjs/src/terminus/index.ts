// `@inboxkit/nestjs/terminus`: the inbox as a @nestjs/terminus health indicator. A sub-path of its own so the
// main entry never loads terminus: an application without it installs nothing more.

export { InboxkitHealthIndicator } from './inboxkit-health-indicator.js';
export type { InboxkitHealthDetails } from './inboxkit-health-indicator.js';
