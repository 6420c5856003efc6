#!/usr/bin/env bash
# Prints the directory holding what a real Kubernetes test node needs beyond the control plane
# of scripts/ensure-kube.sh, building it once if needed:
#   kubelet   k8s.io/kubernetes v1.36.3 (same version as kube-apiserver; cgroup v1 is allowed
#             by its KubeletConfiguration, failCgroupV1: false)
#   pause     a static pod-sandbox holder (Go, this file), made into an image by the tests
# and the Debian packages the node runs on: containerd (1.6 in bookworm: kubelet 1.36 logs that
# it lacks the RuntimeConfig CRI call and uses the configured cgroupfs driver), runc,
# containernetworking-plugins (ptp, host-local, loopback), docker-registry (the tests' loopback
# registry). test/helpers/kubeNode.ts starts containerd and kubelet from here.
#
# Warm Go caches (left by ensure-kube.sh): about 2 minutes on 2 cores; cold: add the
# control plane's 20-30 minutes (the same module graph). Builds run at nice 19.
#
# Usage: KUBE_NODE_BIN_DIR="$(bash scripts/ensure-kube-node.sh)"
#        bash scripts/ensure-kube-node.sh --no-build || skip   # exit 1 when not built
# Env:   ROLLOUT_CACHE_DIR, KUBE_BUILD_JOBS (go build -p, default 1).
set -euo pipefail

KUBE_VERSION="1.36.3"
STAGING_VERSION="0.36.3"
PAUSE_VERSION="1"
CACHE_ROOT="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}"
TARGET_DIR="$CACHE_ROOT/kube-node-v$KUBE_VERSION"
STAMP_TEXT="kubelet=v$KUBE_VERSION pause=$PAUSE_VERSION"
PACKAGES=(containerd runc containernetworking-plugins docker-registry)
# Staging modules that k8s.io/kubernetes v1.36 requires at v0.0.0 (as in ensure-kube.sh).
STAGING_MODULES=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
  cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api cri-client
  cri-streaming csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator
  kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission
  sample-apiserver streaming)
log() { echo "ensure-kube-node: $*" >&2; }

no_build=0
case "${1:-}" in
  "") ;;
  --no-build) no_build=1 ;;
  *) echo "usage: $0 [--no-build]" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
cached() { [ -x "$1/kubelet" ] && [ -x "$1/pause" ] && [ "$(cat "$1/.complete" 2>/dev/null)" = "$STAMP_TEXT" ]; }

if [ "$no_build" = 1 ]; then
  if [ ${#missing[@]} -gt 0 ]; then log "Debian packages missing: ${missing[*]} (run scripts/ensure-kube-node.sh)"; exit 1; fi
  if cached "$TARGET_DIR"; then echo "$TARGET_DIR"; exit 0; fi
  log "no kubelet in $TARGET_DIR (run scripts/ensure-kube-node.sh to build it)"
  exit 1
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then log "must run as root to install ${missing[*]}; rerun with sudo."; exit 1; fi
  log "installing ${missing[*]} from Debian"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update -o DPkg::Lock::Timeout=600 >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}" >&2; }
fi
if cached "$TARGET_DIR"; then echo "$TARGET_DIR"; exit 0; fi

if ! command -v go >/dev/null 2>&1; then
  log "no kubelet found and no Go toolchain to build it. Install Go >= 1.26 (apt-get install golang-go) and rerun."
  exit 1
fi
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/kube-node-v$KUBE_VERSION.lock"
flock 9
if cached "$TARGET_DIR"; then echo "$TARGET_DIR"; exit 0; fi

jobs="${KUBE_BUILD_JOBS:-1}"
log "building kubelet v$KUBE_VERSION and pause from Go modules into $TARGET_DIR (once per machine)"
staging="$(mktemp -d "$CACHE_ROOT/kube-node-build.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/bin" "$staging/kube" "$staging/pause"
export CGO_ENABLED=0
gobuild() { nice -n 19 go build -p="$jobs" -trimpath "$@"; }
started=$SECONDS

# 1. kubelet via a wrapper module (k8s.io/kubernetes cannot be `go install`ed; see ensure-kube.sh).
{
  echo "module rolloutpipeline.local/kubeletbuild"
  echo
  echo "go 1.26.0"
  echo
  echo "require k8s.io/kubernetes v$KUBE_VERSION"
  echo
  echo "replace ("
  for m in "${STAGING_MODULES[@]}"; do echo "	k8s.io/$m => k8s.io/$m v$STAGING_VERSION"; done
  echo ")"
} >"$staging/kube/go.mod"
(cd "$staging/kube" && nice -n 19 go get -tool "k8s.io/kubernetes/cmd/kubelet@v$KUBE_VERSION") >&2
minor="$(echo "$KUBE_VERSION" | cut -d. -f2)"
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
log "go build kubelet"
(cd "$staging/kube" && gobuild -ldflags "$kube_ldflags" -o "$staging/bin/kubelet" "k8s.io/kubernetes/cmd/kubelet") >&2

# 2. pause: PID 1 of every pod sandbox; holds the namespaces, reaps zombies, exits on TERM/INT.
cat >"$staging/pause/main.go" <<'EOF'
// Command pause holds a pod's namespaces open until it is signalled, reaping
// any zombie it inherits (it is PID 1 of the pod sandbox).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	reap := make(chan os.Signal, 8)
	signal.Notify(reap, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			os.Exit(0)
		case <-reap:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
EOF
printf 'module rolloutpipeline.local/pause\n\ngo 1.26.0\n' >"$staging/pause/go.mod"
(cd "$staging/pause" && gobuild -ldflags "-s -w" -o "$staging/bin/pause" .) >&2

out="$("$staging/bin/kubelet" --version 2>&1 || true)"
case "$out" in "Kubernetes v$KUBE_VERSION"*) ;; *) log "the built kubelet does not run: $out"; exit 1 ;; esac

mkdir -p "$TARGET_DIR/src"
for f in "$staging"/bin/*; do mv -f "$f" "$TARGET_DIR/"; done
cp "$staging/kube/go.mod" "$staging/kube/go.sum" "$staging/pause/main.go" "$TARGET_DIR/src/"
echo "$STAMP_TEXT" >"$TARGET_DIR/.complete"
log "done in $((SECONDS - started))s"
echo "$TARGET_DIR"
