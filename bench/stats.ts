/** Machine facts and tables for benchmarks that print numbers side by side. */
import { execFileSync } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import { resolveTemporalBinary } from '../servers/temporalBinary.js';
import { loadAverages } from './procStats.js';

export interface MachineFacts {
  cores: number;
  cpuModel: string;
  memoryGiB: number;
  node: string;
  kernel: string;
  bwrap: string;
  /** `temporal --version`: the CLI, the dev server it embeds, the UI. */
  temporal: string;
  temporalServer: string;
  loadAverage: [number, number, number];
  date: string;
}

export async function machineFacts(): Promise<MachineFacts> {
  const version = (cmd: string, args: string[]): string => {
    try {
      return execFileSync(cmd, args, { encoding: 'utf8' }).trim().split('\n')[0] ?? '';
    } catch {
      return 'unavailable';
    }
  };
  let temporal = 'unavailable';
  try {
    temporal = (await resolveTemporalBinary()).version;
  } catch {
    // reported as unavailable
  }
  return {
    cores: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    kernel: version('uname', ['-r']),
    bwrap: version('bwrap', ['--version']),
    temporal,
    temporalServer: /Server ([^,)]+)/.exec(temporal)?.[1] ?? 'unknown',
    loadAverage: loadAverages(),
    date: new Date().toISOString(),
  };
}

export function formatTable(header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map((c) => (typeof c === 'number' ? c.toFixed(2) : c)))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => String(r[i]).length)));
  return cells.map((r) => r.map((c, i) => String(c).padEnd(widths[i] ?? 0)).join('  ')).join('\n');
}
