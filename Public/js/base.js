// Where the dashboard lives: the folder of index.html, whether this page is the dashboard or a
// task's page (`…/tasks/{id}`). The API's paths are resolved against it, so the dashboard keeps
// working behind a proxy that serves it under a path of its own.

const TASK_PAGE = /tasks\/[^/]*$/;

/** The dashboard's own URL (with a trailing slash) for a page at `location`. */
export function appRoot(location) {
  const path = TASK_PAGE.test(location.pathname) ? location.pathname.replace(TASK_PAGE, '') : location.pathname;
  return new URL(path.replace(/[^/]*$/, ''), location.origin);
}

/** `api/…` (or another path of the server) as an absolute URL. */
export function appURL(path) {
  return new URL(path, appRoot(location));
}

/** The address of a task's page. */
export function taskPageURL(id) {
  return appURL(`tasks/${encodeURIComponent(id)}`).href;
}
