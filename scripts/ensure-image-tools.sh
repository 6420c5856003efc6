#!/usr/bin/env bash
# Makes this machine able to build task images without a daemon (Debian's podman, runc as its
# runtime, mmdebstrap for base images, slirp4netns for sandboxes with network_mode "public"
# (sandboxes/local/userNetwork.ts; passt is installed but unused)), and
# writes the containers settings the pipeline uses into a directory of ours, never into the
# host's /etc/containers:
#   $CACHE/image-tools/containers.conf   default_ulimits nofile/nproc (root here lacks
#                                        CAP_SYS_RESOURCE; conmon caps nproc at 32768),
#                                        runtime = runc (crun 1.8 rejects hybrid cgroup v1),
#                                        cgroupfs, file events (no systemd/journald needed)
#   $CACHE/image-tools/storage.conf      images under $CACHE/containers, overlay driver
#   $CACHE/image-tools/uv/               uv (and uvx) from PyPI, for offline verification
# The pipeline points podman at them with CONTAINERS_CONF / CONTAINERS_STORAGE_CONF (only for
# the podman processes it starts). Idempotent; prints what it made on stderr and, on stdout,
#   export ROLLOUT_IMAGE_TOOLS=<dir>
# which tests that build images look for (they skip without it).
set -euo pipefail

CACHE_ROOT="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}"
TOOLS="$CACHE_ROOT/image-tools"
UV_VERSION="0.9.5" # the version TB2's tests/test.sh asks astral.sh for
log() { echo "ensure-image-tools: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
  log "must run as root (podman builds and sandbox overlays need it); rerun with sudo."
  exit 1
fi

# Root with kernel overlayfs needs neither uidmap nor fuse-overlayfs.
packages=(podman runc mmdebstrap slirp4netns passt)
missing=()
for p in "${packages[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} from Debian"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update -o DPkg::Lock::Timeout=600 >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}" >&2; }
fi

mkdir -p "$TOOLS" "$CACHE_ROOT/containers/storage"
write_if_changed() { # file content
  if [ ! -f "$1" ] || [ "$(cat "$1")" != "$2" ]; then printf '%s\n' "$2" > "$1.tmp" && mv -f "$1.tmp" "$1" && log "wrote $1"; fi
}
write_if_changed "$TOOLS/containers.conf" '# Written by scripts/ensure-image-tools.sh; the pipeline passes it to podman as CONTAINERS_CONF.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
# Containers podman itself runs (only build steps, always with --network host) get no network
# of their own: a default bridge would add a CNI bridge, iptables chains and ip_forward.
netns = "none"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
image_parallel_copies = 1'
write_if_changed "$TOOLS/storage.conf" "# Written by scripts/ensure-image-tools.sh; the pipeline passes it to podman as CONTAINERS_STORAGE_CONF.
[storage]
driver = \"overlay\"
graphroot = \"$CACHE_ROOT/containers/storage\"
runroot = \"/run/rollout-pipeline/containers\""

export CONTAINERS_CONF="$TOOLS/containers.conf" CONTAINERS_STORAGE_CONF="$TOOLS/storage.conf"
if ! out="$(podman info --format '{{.Host.OCIRuntime.Name}} {{.Store.GraphDriverName}}' 2>&1)"; then
  log "podman does not work with these settings: $out"
  exit 1
fi
case "$out" in "runc overlay") ;; *) log "podman reports runtime/driver '$out', expected 'runc overlay'"; exit 1 ;; esac

# uv from PyPI (the astral.sh installer TB2's test.sh curls is unreachable here).
if [ ! -x "$TOOLS/uv/uv-$UV_VERSION/uv" ]; then
  pip_python=""
  for py in python3 /usr/bin/python3; do if "$py" -m pip --version >/dev/null 2>&1; then pip_python="$py"; break; fi; done
  if [ -z "$pip_python" ]; then
    log "installing python3-pip from Debian (to download wheels from PyPI)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 --no-install-recommends python3-pip >&2
    pip_python=/usr/bin/python3
  fi
  staging="$(mktemp -d "$TOOLS/uv-download.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  "$pip_python" -m pip download --quiet --no-deps --only-binary :all: --platform manylinux_2_17_x86_64 --platform "manylinux_2_17_$(uname -m)" --python-version 3.11 --dest "$staging" "uv==$UV_VERSION" >&2
  wheel="$(ls "$staging"/uv-*.whl)"
  "$pip_python" -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for n in z.namelist():
    if n.endswith("/scripts/uv") or n.endswith("/scripts/uvx"):
        open(sys.argv[2] + "/" + n.rsplit("/", 1)[1], "wb").write(z.read(n))' "$wheel" "$staging"
  chmod 0755 "$staging/uv" "$staging/uvx"
  "$staging/uv" --version >/dev/null
  mkdir -p "$TOOLS/uv"
  rm -rf "$TOOLS/uv/uv-$UV_VERSION"
  mkdir "$TOOLS/uv/uv-$UV_VERSION" && mv "$staging/uv" "$staging/uvx" "$TOOLS/uv/uv-$UV_VERSION/"
  log "uv $UV_VERSION from PyPI in $TOOLS/uv/uv-$UV_VERSION"
fi
ln -sfn "uv-$UV_VERSION" "$TOOLS/uv/current"
printf '%s\n' "$UV_VERSION" > "$TOOLS/.complete"
echo "export ROLLOUT_IMAGE_TOOLS=$TOOLS"
