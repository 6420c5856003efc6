/**
 * The argument parser every `rollout` subcommand uses: node:util parseArgs,
 * strict, plus `--help`/`-h` (HelpRequested: main prints the usage, exit 0)
 * and bad options answered as UsageError (exit 2), an unknown one with the
 * closest known option.
 */
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { closestName } from './closestName.js';
import { UsageError } from './usageError.js';

/** `--help` or `-h` was given: print `usage` on stdout and exit 0. */
export class HelpRequested extends Error {
  constructor(readonly usage: string) {
    super('help requested');
    this.name = 'HelpRequested';
  }
}

export interface CommandSpec<O extends ParseArgsOptionsConfig, P extends boolean> {
  /** The subcommand as typed, e.g. `run` or `task check`: named in error messages. */
  command: string;
  /** How a user types it, for hints (default `rollout <command>`; e.g. `npm run demo:train --`). */
  invocation?: string;
  usage: string;
  options: O;
  allowPositionals?: P;
}

type Parsed<O extends ParseArgsOptionsConfig, P extends boolean> = ReturnType<typeof parseArgs<{ args: string[]; options: O; allowPositionals: P; strict: true }>>;

/** True when `--help` or `-h` comes before any `--` (after it, arguments are positionals). */
export function wantsHelp(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).some((a) => a === '--help' || a === '-h');
}

export function parseCommandLine<const O extends ParseArgsOptionsConfig, const P extends boolean = false>(argv: string[], spec: CommandSpec<O, P>): Parsed<O, P> {
  if (wantsHelp(argv)) throw new HelpRequested(spec.usage);
  try {
    return parseArgs({ args: argv, options: spec.options, allowPositionals: (spec.allowPositionals ?? false) as P, strict: true });
  } catch (err) {
    if (!(err instanceof Error) || !('code' in err) || typeof err.code !== 'string' || !err.code.startsWith('ERR_PARSE_ARGS')) throw err;
    const invocation = spec.invocation ?? `rollout ${spec.command}`;
    const hint = `(${invocation} --help lists its options)`;
    if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      const given = /'(-[^'=]*)/.exec(err.message)?.[1] ?? '';
      const known = Object.entries(spec.options).flatMap(([name, o]) => [`--${name}`, ...(o.short ? [`-${o.short}`] : [])]);
      const suggestion = closestName(given, known);
      throw new UsageError(`unknown option ${given}${suggestion ? `; did you mean ${suggestion}?` : ''} ${hint}`);
    }
    if (err.code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
      const arg = /'([^']*)'/.exec(err.message)?.[1] ?? '';
      throw new UsageError(`unexpected argument ${JSON.stringify(arg)}: ${invocation} takes none ${hint}`);
    }
    throw new UsageError(`${err.message} ${hint}`);
  }
}
