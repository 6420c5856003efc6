/**
 * Ubuntu's compiler defaults on the Debian stand-in for an Ubuntu base. ubuntu:24.04's `gcc`, `g++`,
 * `cpp` and `gfortran` are GCC 13; trixie's are GCC 14, which rejects C that 13 only warns about
 * (implicit function declarations, int-conversion, incompatible pointer types are errors since 14):
 * a Dockerfile or a test that compiles such a file on the original fails on the stand-in.
 *
 * trixie also ships GCC 13 (gcc-13, g++-13, ...), only not as the default. The stand-in base gets a
 * local apt repository holding trixie's own gcc-defaults packages (cpp, gcc, g++, gfortran and their
 * triplet-named halves) rebuilt to point at 13, as Ubuntu's gcc-defaults do: each package's
 * dependencies on the -14 compiler become the -13 one, its links (`/usr/bin/gcc` -> `gcc-13`, man
 * pages) follow, and its version is trixie's plus `+rollout.gcc13`, so apt prefers it and every
 * `(>= 4:14.2)` dependency (build-essential) still holds. Nothing is installed in the base: a
 * Dockerfile's `apt-get install gcc` or `build-essential` then gets GCC 13, as on the original.
 * Left: packages that pin the Debian defaults exactly (`cpp-x86-64-linux-gnu (= 4:14.2.0-1)`:
 * gccgo, gobjc, gm2, gdc) cannot be installed beside them.
 */

/** The gcc-defaults packages rebuilt, each with its triplet-named half (`gcc-x86-64-linux-gnu`). */
const DEFAULTS = ['cpp', 'gcc', 'g++', 'gfortran'];
/** Where the stand-in keeps the rebuilt packages, a flat apt repository. */
export const TOOLCHAIN_REPOSITORY = '/var/lib/rollout-toolchain';

/** Shell run inside the new root (as root, its apt sources in place): builds the repository. */
export function ubuntuToolchainScript(fromMajor: number, toMajor: number): string {
  const suffix = `+rollout.gcc${toMajor}`;
  return `set -eu
case "$(dpkg --print-architecture)" in
  amd64) triplet=x86-64-linux-gnu ;;
  arm64) triplet=aarch64-linux-gnu ;;
  *) echo "GCC ${toMajor} as the default compiler: no rule for the architecture $(dpkg --print-architecture)" >&2; exit 1 ;;
esac
repo=${TOOLCHAIN_REPOSITORY}
work=$(mktemp -d)
mkdir -p "$repo"
apt-get update -qq
cd "$work"
packages=""
for p in ${DEFAULTS.join(' ')}; do packages="$packages $p $p-$triplet"; done
apt-get download -qq $packages
for deb in ./*.deb; do
  rm -rf tree && dpkg-deb -R "$deb" tree
  name=$(dpkg-deb -f "$deb" Package)
  version=$(dpkg-deb -f "$deb" Version)
  # The compiler it depends on: cpp-${fromMajor} (>= ...) becomes cpp-${toMajor}; the defaults it pins exactly get the new version.
  sed -i -E \\
    -e "s/^Version: .*/Version: $version${suffix}/" \\
    -e "/^(Depends|Recommends|Suggests):/ s/\\b([a-z+]+)-${fromMajor}((-[a-z0-9-]+)?) \\(>= [^)]*\\)/\\1-${toMajor}\\2/g" \\
    -e "/^(Depends|Recommends|Suggests):/ s/\\(= $version\\)/(= $version${suffix})/g" \\
    -e "s/^(Description: .*)$/\\1 (GCC ${toMajor}, as Ubuntu's; rebuilt for the ubuntu stand-in)/" \\
    tree/DEBIAN/control
  if grep -Eq '^(Depends|Recommends):.*-${fromMajor}([ ,-]|$)' tree/DEBIAN/control; then
    echo "$name: still depends on a -${fromMajor} package after the rebuild:" >&2; grep -E '^(Depends|Recommends):' tree/DEBIAN/control >&2; exit 1
  fi
  find tree -path tree/DEBIAN -prune -o -type l -print | while read -r link; do
    target=$(readlink "$link")
    new=$(printf '%s' "$target" | sed -E 's/-${fromMajor}(\\.|$)/-${toMajor}\\1/')
    if [ "$new" != "$target" ]; then ln -sfn "$new" "$link"; fi
  done
  dpkg-deb --root-owner-group -b tree "$repo/$name.deb" >/dev/null
done
cd "$repo"
: > Packages
for deb in ./*.deb; do
  dpkg-deb -f "$deb" >> Packages
  printf 'Filename: %s\\nSize: %s\\nSHA256: %s\\n\\n' "$deb" "$(stat -c %s "$deb")" "$(sha256sum "$deb" | cut -d' ' -f1)" >> Packages
done
printf 'Types: deb\\nURIs: file:%s\\nSuites: ./\\nTrusted: yes\\n' "$repo" > /etc/apt/sources.list.d/rollout-toolchain.sources
rm -rf "$work"
apt-get update -qq
gcc_candidate=$(apt-cache policy gcc | sed -n 's/^ *Candidate: //p')
case "$gcc_candidate" in *${suffix}) ;; *) echo "apt would install gcc $gcc_candidate, not the rebuilt ${suffix}" >&2; exit 1 ;; esac
rm -rf /var/lib/apt/lists/*
`;
}

/** The mmdebstrap customize hook that runs the script in the root ("$1"). */
export function ubuntuToolchainHook(fromMajor: number, toMajor: number): string {
  const script = Buffer.from(ubuntuToolchainScript(fromMajor, toMajor)).toString('base64');
  return `echo ${script} | base64 -d > "$1/tmp/rollout-toolchain.sh" && chroot "$1" sh /tmp/rollout-toolchain.sh && rm -f "$1/tmp/rollout-toolchain.sh"`;
}
