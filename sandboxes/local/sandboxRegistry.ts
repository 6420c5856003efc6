/**
 * The on-disk registry of local sandboxes: one directory per sandbox under the
 * state root, holding `record.json` (owner, labels, lease, handle). It outlives
 * the worker process, so a reaper or a restarted worker finds every sandbox
 * that is still open, including one whose provisioning was cut short.
 * The provider's own paths use the asynchronous methods (write, get,
 * listIds): they run on the worker's event loop for every sandbox. read()
 * and ids() are for host-side tools (benchmarks, tests, inspectors).
 */
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { LocalSandboxHandleSchema, SandboxOwnerSchema, SandboxSpecSchema } from '../../shared/sandbox.js';
import { HolderSchema } from './holderProcess.js';

export const StoredRecordSchema = z.object({
  id: z.string(),
  provider: z.literal('local'),
  owner: SandboxOwnerSchema,
  labels: z.record(z.string(), z.string()),
  createdAt: z.string(),
  leaseExpiresAt: z.string(),
  stateDir: z.string(),
  /** Pid of the launcher (the mount shell that holds the private mount namespace, runs bwrap and records how its init ended). */
  launcherPid: z.number().int().nullable(),
  cgroupDirs: z.array(z.string()),
  handle: LocalSandboxHandleSchema.nullable(),
  /** The worker process that provisioned the sandbox or last took it over; absent in records written before it was kept. */
  holder: HolderSchema.optional(),
  /** The spec it was provisioned from (what a sandbox beside it is built from); absent in records written before it was kept. */
  spec: SandboxSpecSchema.optional(),
  /** For a sandbox beside another (a verifier's, provisionBeside): that sandbox's id. Its teardown takes this one with it. */
  beside: z.string().optional(),
});
export type StoredRecord = z.infer<typeof StoredRecordSchema>;

export const RECORD_FILE = 'record.json';
export const SANDBOX_ID = /^sbx-[a-z0-9-]+$/;

function parseRecord(text: string): StoredRecord | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = StoredRecordSchema.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}

export class SandboxRegistry {
  constructor(readonly root: string) {
    mkdirSync(root, { recursive: true });
  }

  stateDir(id: string): string {
    return join(this.root, id);
  }

  /** Replaces the record atomically (a reader sees the old one or the new one, never half of one). */
  async write(record: StoredRecord): Promise<void> {
    const file = join(record.stateDir, RECORD_FILE);
    // Unique per write: two writes of one record may overlap (a lease renewal beside a claim).
    const tmp = `${file}.${process.pid}.${++this.writes}.tmp`;
    await writeFile(tmp, JSON.stringify(record, null, 2));
    await rename(tmp, file);
  }

  private writes = 0;

  async get(id: string): Promise<StoredRecord | undefined> {
    let text: string;
    try {
      text = await readFile(join(this.stateDir(id), RECORD_FILE), 'utf8');
    } catch {
      return undefined;
    }
    return parseRecord(text);
  }

  read(id: string): StoredRecord | undefined {
    let text: string;
    try {
      text = readFileSync(join(this.stateDir(id), RECORD_FILE), 'utf8');
    } catch {
      return undefined;
    }
    return parseRecord(text);
  }

  async listIds(): Promise<string[]> {
    try {
      return (await readdir(this.root, { withFileTypes: true })).filter((e) => e.isDirectory() && SANDBOX_ID.test(e.name)).map((e) => e.name);
    } catch {
      return [];
    }
  }

  /** Ids of every sandbox directory under the root, with or without a readable record. */
  ids(): string[] {
    try {
      return readdirSync(this.root, { withFileTypes: true })
        .filter((e) => e.isDirectory() && SANDBOX_ID.test(e.name))
        .map((e) => e.name);
    } catch {
      return [];
    }
  }
}
