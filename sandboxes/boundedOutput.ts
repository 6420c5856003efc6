/**
 * Collects a stream's bytes up to a cap and counts the rest without keeping it,
 * so a command that prints gigabytes never exhausts the worker's memory.
 */
import type { Readable } from 'node:stream';

export class BoundedOutput {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  private total = 0;

  constructor(private readonly maxBytes: number) {}

  attach(stream: Readable): void {
    stream.on('data', (chunk: Buffer) => this.push(chunk));
  }

  push(chunk: Buffer): void {
    this.total += chunk.length;
    const room = this.maxBytes - this.kept;
    if (room <= 0) return;
    const slice = chunk.length <= room ? chunk : chunk.subarray(0, room);
    this.chunks.push(slice);
    this.kept += slice.length;
  }

  /** The stream's full length when another process did the counting and sent only the kept bytes. */
  countUnkept(totalBytes: number): void {
    this.total = Math.max(this.total, totalBytes);
  }

  get truncated(): boolean {
    return this.total > this.kept;
  }

  get totalBytes(): number {
    return this.total;
  }

  bytes(): Buffer {
    return Buffer.concat(this.chunks, this.kept);
  }

  /**
   * The kept bytes as UTF-8 (invalid sequences become U+FFFD), with a closing
   * note when bytes were dropped.
   */
  text(): string {
    const text = this.bytes().toString('utf8');
    if (!this.truncated) return text;
    return `${text}\n[output truncated: ${this.total} bytes in total, the first ${this.kept} kept]`;
  }
}
