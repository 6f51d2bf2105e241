// The injection tokens of the module: the options as given (forRoot / forRootAsync) and the store built over them.

/** The `InboxkitModuleOptions` given to `forRoot` or made by `forRootAsync`'s factory. */
export const INBOXKIT_OPTIONS = Symbol.for('inboxkit.nestjs.options');

/** The inbox store (`PostgresInboxStore`) over the application's data layer seam. */
export const INBOXKIT_STORE = Symbol.for('inboxkit.nestjs.store');
