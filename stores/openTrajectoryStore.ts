/**
 * The trajectory store a setting names (`--store`, ROLLOUT_STORE):
 *   (absent) or `fs`        files under <data-dir>/trajectories (one machine)
 *   `fs:/some/dir`          files under that directory
 *   `postgres://...`        PostgreSQL (workers on many machines share it)
 */
import { join, resolve } from 'node:path';
import { FsTrajectoryStore } from './fsTrajectoryStore.js';
import { PostgresTrajectoryStore } from './postgresTrajectoryStore.js';
import type { TrajectoryStore } from './trajectoryStore.js';

export class StoreSettingError extends Error {
  override readonly name = 'StoreSettingError';
}

export async function openTrajectoryStore(setting: string | undefined, dataDir: string): Promise<TrajectoryStore> {
  if (setting === undefined || setting === '' || setting === 'fs') return new FsTrajectoryStore(join(dataDir, 'trajectories'));
  if (setting.startsWith('fs:')) return new FsTrajectoryStore(resolve(setting.slice('fs:'.length)));
  if (setting.startsWith('postgres://') || setting.startsWith('postgresql://')) {
    try {
      return await PostgresTrajectoryStore.connect(setting);
    } catch (err) {
      throw new StoreSettingError(err instanceof Error ? err.message : String(err), { cause: err });
    }
  }
  throw new StoreSettingError(`store ${JSON.stringify(setting)}: use fs (the default, <data-dir>/trajectories), fs:/a/directory, or postgres://user:password@host:5432/database`);
}
