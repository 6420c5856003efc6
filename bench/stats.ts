/** Percentiles and machine facts for benchmarks that print numbers side by side. */
import { execFileSync } from 'node:child_process';
import { cpus, totalmem } from 'node:os';

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}

export interface Summary {
  n: number;
  p50: number;
  p95: number;
  p99: number;
  mean: number;
}

export function summarize(samples: number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const mean = sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length);
  return { n: sorted.length, p50: percentile(sorted, 50), p95: percentile(sorted, 95), p99: percentile(sorted, 99), mean };
}

export function machineFacts(): Record<string, string | number> {
  const version = (cmd: string, args: string[]): string => {
    try {
      return execFileSync(cmd, args, { encoding: 'utf8' }).trim().split('\n')[0] ?? '';
    } catch {
      return 'unavailable';
    }
  };
  return {
    cores: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    kernel: version('uname', ['-r']),
    bwrap: version('bwrap', ['--version']),
    date: new Date().toISOString(),
  };
}

export function formatTable(header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map((c) => (typeof c === 'number' ? c.toFixed(2) : c)))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => String(r[i]).length)));
  return cells.map((r) => r.map((c, i) => String(c).padEnd(widths[i] ?? 0)).join('  ')).join('\n');
}
