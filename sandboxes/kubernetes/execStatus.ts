/**
 * What a pods/exec call says about the command it ran: its exit code from the
 * final V1Status (a real kubelet and kwok say it differently), and quoting for
 * the shell command lines the provider sends.
 */
import type { V1Status } from '@kubernetes/client-node';

/**
 * The exit code of a finished exec from its V1Status: Success = 0; a real
 * kubelet says NonZeroExitCode with an ExitCode cause; kwok (and some
 * runtimes) say InternalError "... exit status N".
 */
export function exitCodeOf(status: V1Status): number | undefined {
  if (status.status === 'Success') return 0;
  const cause = status.details?.causes?.find((c) => c.reason === 'ExitCode');
  if (status.reason === 'NonZeroExitCode' && cause?.message !== undefined) return Number(cause.message);
  const message = status.message ?? '';
  const exited = /exit status (\d+)\s*$/.exec(message);
  if (exited) return Number(exited[1]);
  // Go's os/exec for a process ended by a signal: "signal: killed" -> 128 + 9, as a shell reports it
  const signalled = /signal: ([a-z ]+)\s*$/.exec(message);
  const signal = signalled ? GO_SIGNAL_NAMES[signalled[1] as string] : undefined;
  return signal === undefined ? undefined : 128 + signal;
}

/** Go's names of signals (syscall.Signal.String) that end commands. */
const GO_SIGNAL_NAMES: Record<string, number> = { hangup: 1, interrupt: 2, quit: 3, aborted: 6, killed: 9, 'segmentation fault': 11, 'broken pipe': 13, terminated: 15 };

export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}
