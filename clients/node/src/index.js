// Ringcast's Node client: live progress from where the work runs (docs/NODE-CLIENT.md).
export { Ringcast } from './client.js';
export { Cancelled, RingcastError } from './fields.js';
export { Task } from './task.js';
