// Ringcast's Node client: live progress from where the work runs (docs/NODE-CLIENT.md).
export { MAX_ANSWER, MAX_DEPTH, Ringcast } from './client.js';
export { Cancelled, RingcastError } from './fields.js';
export { Task } from './task.js';
export { MAX_FRAGMENTS, MAX_MESSAGE } from './websocket.js';
