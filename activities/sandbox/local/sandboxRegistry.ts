/**
 * The on-disk registry of local sandboxes: one directory per sandbox under the
 * state root, holding `record.json` (owner, labels, lease, handle). It outlives
 * the worker process, so a reaper or a restarted worker finds every sandbox
 * that is still open, including one whose provisioning was cut short.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { LocalSandboxHandleSchema, SandboxOwnerSchema } from '../../../shared/sandbox.js';
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
});
export type StoredRecord = z.infer<typeof StoredRecordSchema>;

export const RECORD_FILE = 'record.json';

export class SandboxRegistry {
  constructor(readonly root: string) {
    mkdirSync(root, { recursive: true });
  }

  stateDir(id: string): string {
    return join(this.root, id);
  }

  write(record: StoredRecord): void {
    const file = join(record.stateDir, RECORD_FILE);
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(record, null, 2));
    renameSync(tmp, file);
  }

  read(id: string): StoredRecord | undefined {
    let text: string;
    try {
      text = readFileSync(join(this.stateDir(id), RECORD_FILE), 'utf8');
    } catch {
      return undefined;
    }
    const parsed = StoredRecordSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  }

  /** Ids of every sandbox directory under the root, with or without a readable record. */
  ids(): string[] {
    try {
      return readdirSync(this.root, { withFileTypes: true })
        .filter((e) => e.isDirectory() && /^sbx-[a-z0-9-]+$/.test(e.name))
        .map((e) => e.name);
    } catch {
      return [];
    }
  }
}
