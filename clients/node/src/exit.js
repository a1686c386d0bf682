// The clients of this process, for the one 'beforeExit' hook that flushes what each still holds
// when the event loop runs dry.

const live = new Set();
let hookInstalled = false;

/** Registers `client` (its `flushBeforeExit()` runs at 'beforeExit'), installing the hook once. */
export function holdUntilExit(client) {
  live.add(client);
  if (hookInstalled) return;
  hookInstalled = true;
  process.on('beforeExit', () => {
    for (const each of live) each.flushBeforeExit();
  });
}

export function releaseAtExit(client) {
  live.delete(client);
}
