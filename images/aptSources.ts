/**
 * A base's apt sources as the official images keep them: one deb822 file in
 * /etc/apt/sources.list.d (debian.sources; ubuntu.sources where the base stands
 * in for Ubuntu, so a Dockerfile that edits that file finds it), the release,
 * its -updates and its -security suites, `Types: deb` as shipped. A Dockerfile
 * that enables source packages the usual way (sed 's/^Types: deb$/Types: deb
 * deb-src/' on that file) then gets `apt-get source` from the same mirror, and
 * the packages installed are the release's current ones, security fixes too.
 */
import type { BaseRecipe } from './baseMap.js';

export interface AptSources {
  /** One-line sources for mmdebstrap, so the base itself is installed from all of them. */
  mirrors: string[];
  /** The customize hook that leaves the deb822 file in place of mmdebstrap's sources.list. */
  hook: string;
}

/** The security archive beside a Debian mirror (…/debian -> …/debian-security), if it follows that layout. */
function securityMirror(mirror: string): string | undefined {
  return /\/debian\/?$/.test(mirror) ? mirror.replace(/\/?$/, '-security') : undefined;
}

export function aptSources(recipe: Pick<BaseRecipe, 'suite' | 'aptSourcesFile'>, mirror: string): AptSources {
  const security = securityMirror(mirror);
  const stanza = (uri: string, suites: string): string => `Types: deb\nURIs: ${uri}\nSuites: ${suites}\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n`;
  const file = [stanza(mirror, `${recipe.suite} ${recipe.suite}-updates`), ...(security ? [stanza(security, `${recipe.suite}-security`)] : [])].join('\n');
  const name = recipe.aptSourcesFile ?? 'debian.sources';
  return {
    mirrors: [`deb ${mirror} ${recipe.suite} main`, `deb ${mirror} ${recipe.suite}-updates main`, ...(security ? [`deb ${security} ${recipe.suite}-security main`] : [])],
    hook: `rm -f "$1/etc/apt/sources.list" && printf '%b' ${JSON.stringify(file)} > "$1/etc/apt/sources.list.d/${name}"`,
  };
}
