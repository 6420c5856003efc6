/** A promise with its resolve and reject, for results that arrive as events (a spawned command, an exec server's frames). */
export interface Deferred<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (err: Error) => void;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // Not every caller awaits every promise (a launcher's exit, a command that never started).
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}
