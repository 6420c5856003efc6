/**
 * apt pins a Debian stand-in cannot serve: apt's words for a version it could not find, and what the
 * build or the solution then needs from beyond the registries, said with the fixes a user can apply.
 */
import { beyondRegistries } from '../tasks/outsideWorld.js';
import type { BaseRecipe } from './baseMap.js';

/** apt-get's words for a pinned version the release does not have: [version, package]. */
const MISSING_VERSION = /^E: Version '([^']+)' for '([^']+)' was not found/gm;

/** `package=version` pins in the build log that apt could not find. */
export function missingAptVersions(log: string): string[] {
  return [...new Set([...log.matchAll(MISSING_VERSION)].map((m) => `${m[2]}=${m[1]}`))];
}

/**
 * What a build or a solution that pins apt versions the stand-in's mirror lacks needs: the original
 * image's archive (Ubuntu's), or, on a Debian base, an archive snapshot (Debian's mirrors keep only a
 * release's latest versions), with the fixes a user can apply.
 */
export function pinnedBeyondMirror(pins: string[], recipes: Pick<BaseRecipe, 'originalArchive' | 'suite'>[]): string {
  const archive = recipes.find((r) => r.originalArchive)?.originalArchive;
  if (archive) return beyondRegistries(archive, `the Dockerfile pins ${pins.join(', ')}, versions of the original image's archive that the Debian stand-in does not have`);
  const suites = [...new Set(recipes.map((r) => r.suite))].join(', ') || 'the release';
  return `${beyondRegistries(DEBIAN_SNAPSHOT_HOST, `apt pins ${pins.join(', ')}, versions Debian ${suites}'s mirror no longer serves (it keeps a release's latest only)`)}. Fix: point ROLLOUT_DEBIAN_MIRROR at an archive snapshot of the task's date (http://${DEBIAN_SNAPSHOT_HOST}/archive/debian/<YYYYMMDDThhmmssZ>/) or a mirror that keeps these versions, or map this FROM with a ROLLOUT_BASE_MAP rule to a release that has them`;
}

/** Where Debian keeps every version it ever published. */
export const DEBIAN_SNAPSHOT_HOST = 'snapshot.debian.org';
