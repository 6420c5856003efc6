/**
 * How long an activity on a sandbox host may go without a heartbeat before the server calls its
 * worker lost and retries it elsewhere. Every host activity heartbeats every 2 s
 * (activities/heartbeats.ts), so a worker that dies or is cut off mid-call is noticed in this time,
 * not after the call's whole start-to-close timeout.
 */
export const HEARTBEAT_TIMEOUT = '15 seconds';
