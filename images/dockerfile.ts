/**
 * The parts of a Dockerfile the builder changes: its FROM lines (an image
 * from a registry is replaced by a base made here; a FROM naming an earlier
 * stage stays) and the final stage's USER (additions for the verifier are
 * installed as root).
 */
import { ClassifiedError } from '../shared/failures.js';

export interface FromLine {
  /** The image as written. */
  image: string;
  /** `Dockerfile:<n>: FROM ...` for error messages and the record. */
  where: string;
  /** Index of the instruction in `instructions` (for rewriting). */
  index: number;
  /** The --platform=... and AS parts, kept when rewriting. */
  platform: string | undefined;
  stage: string | undefined;
}

/** A `COPY --from=` that names an image, not an earlier stage. */
export interface CopyFromLine {
  image: string;
  where: string;
  index: number;
}

export interface ParsedDockerfile {
  /** One entry per instruction (continuation lines joined), comments and blank lines as they were. */
  instructions: string[];
  /** The line each instruction starts on (1-based). */
  lineOf: number[];
  /** FROM lines that name an image, not an earlier stage. */
  froms: FromLine[];
  /** COPY --from= lines that name an image (a tool image), not an earlier stage or its index. */
  copyFroms: CopyFromLine[];
  /** The last USER of the final stage, if any. */
  finalUser: string | undefined;
}

export function parseDockerfile(text: string, file: string): ParsedDockerfile {
  const instructions: string[] = [];
  const lineOf: number[] = [];
  let current = '';
  let start = 0;
  text.split('\n').forEach((line, i) => {
    if (current === '') start = i + 1;
    const continued = /\\\s*$/.test(line) && !/^\s*#/.test(line);
    current += current === '' ? line : `\n${line}`;
    if (!continued) {
      instructions.push(current);
      lineOf.push(start);
      current = '';
    }
  });
  if (current !== '') {
    instructions.push(current);
    lineOf.push(start);
  }
  const stages = new Set<string>();
  const froms: FromLine[] = [];
  const copyFroms: CopyFromLine[] = [];
  let finalUser: string | undefined;
  let sawFrom = false;
  instructions.forEach((instruction, index) => {
    const words = instruction.replace(/\\\n/g, ' ').trim().split(/\s+/);
    const keyword = (words[0] ?? '').toUpperCase();
    if (keyword === 'FROM') {
      sawFrom = true;
      finalUser = undefined;
      const args = words.slice(1);
      const platform = args[0]?.startsWith('--platform=') ? args.shift() : undefined;
      const image = args[0];
      const where = `${file}:${lineOf[index]}: ${instruction.trim().split('\n')[0]}`;
      if (!image) throw new ClassifiedError('task', 'invalid_spec', `${where}: FROM names no image. Fix: write FROM <image>`);
      const stage = args[1]?.toUpperCase() === 'AS' ? args[2] : undefined;
      if (image.includes('$')) {
        throw new ClassifiedError('task', 'invalid_spec', `${where}: the base image comes from a build argument, which this builder cannot map. Fix: write the image name in the FROM line`);
      }
      if (!stages.has(image.toLowerCase()) && image !== 'scratch') froms.push({ image, where, index, platform, stage });
      if (stage) stages.add(stage.toLowerCase());
    } else if (keyword === 'USER') {
      finalUser = words[1];
    } else if (keyword === 'COPY') {
      const from = words.find((w) => w.toLowerCase().startsWith('--from='))?.slice('--from='.length);
      if (from && !stages.has(from.toLowerCase()) && !/^\d+$/.test(from)) copyFroms.push({ image: from, where: `${file}:${lineOf[index]}: ${instruction.trim().split('\n')[0]}`, index });
    }
  });
  if (!sawFrom) throw new ClassifiedError('task', 'invalid_spec', `${file}: no FROM instruction. Fix: start the Dockerfile with FROM <image>`);
  return { instructions, lineOf, froms, copyFroms, finalUser };
}

/**
 * The Dockerfile with each FROM image replaced by `replacements[i]` (same order as `froms`), each
 * `COPY --from` image by `copyReplacements[i]` (same order as `copyFroms`), and `after[i]`, when
 * given, as the instructions right after that FROM line.
 */
export function rewriteFroms(parsed: ParsedDockerfile, replacements: string[], copyReplacements: string[] = [], after: (string[] | undefined)[] = []): string {
  const out = [...parsed.instructions];
  parsed.copyFroms.forEach((copy, i) => {
    const to = copyReplacements[i];
    if (to) out[copy.index] = (out[copy.index] as string).replace(/--from=\S+/i, `--from=${to}`);
  });
  parsed.froms.forEach((from, i) => {
    const parts = ['FROM', ...(from.platform ? [from.platform] : []), replacements[i] as string, ...(from.stage ? ['AS', from.stage] : [])];
    out[from.index] = [parts.join(' '), ...(after[i] ?? [])].join('\n');
  });
  return out.join('\n');
}
