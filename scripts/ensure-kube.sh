#!/usr/bin/env bash
# Prints the directory holding real Kubernetes control-plane binaries, building
# them once from Go modules if needed:
#   kube-apiserver, kube-scheduler                           (k8s.io/kubernetes v1.36.3)
#   etcd                                                      (go.etcd.io/etcd/server/v3 v3.6.16)
#   kwok                                                      (sigs.k8s.io/kwok v0.8.0)
# plus kwok-stages.yaml, kwok's default "fast" node/pod Stage objects, to pass
# to `kwok --config=...` (kwok run by itself has no stages and refuses to start).
#
# Order: KUBE_BIN_DIR (must hold kube-apiserver, etcd and kwok), the copy cached
# outside the repository, else build into that cache. A cold build takes 20-30
# minutes on 2 cores (at nice 19, one package at a time) and about 7 GB of Go
# module and build cache; afterwards this prints the directory at once.
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every staging
# module (k8s.io/api, client-go, apiserver, ...) with ./staging, and requires
# them at v0.0.0. So a small wrapper module requires k8s.io/kubernetes and
# replaces each staging module by its published v0.<minor>.<patch> release.
# etcd gets a wrapper whose main calls etcdmain.Main; kwok's go.mod has no
# replace directives, so plain `go install` works.
#
# Usage: KUBE_BIN="$(bash scripts/ensure-kube.sh)"        # builds if missing
#        bash scripts/ensure-kube.sh --no-build || skip   # exit 1 when not built
# Env:   ROLLOUT_CACHE_DIR, KUBE_BIN_DIR, KUBE_BUILD_JOBS (go build -p, default 1).
# Only this set-up step fetches anything (Go modules); nothing at run time does.
set -euo pipefail

KUBE_VERSION="1.36.3"
STAGING_VERSION="0.36.3" # k8s.io/<staging> modules are tagged v0.<minor>.<patch>
ETCD_VERSION="3.6.16"
KWOK_VERSION="0.8.0"
CACHE_ROOT="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}"
TARGET_DIR="$CACHE_ROOT/kube-v$KUBE_VERSION"
STAMP_TEXT="kube=v$KUBE_VERSION etcd=v$ETCD_VERSION kwok=v$KWOK_VERSION"
# Staging modules that k8s.io/kubernetes v1.36 requires at v0.0.0 (its replace list).
STAGING_MODULES=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
  cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api cri-client
  cri-streaming csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator
  kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission
  sample-apiserver streaming)
# kube-controller-manager is not built: no test or command starts it (kubeCluster.ts runs the apiserver,
# the scheduler, etcd and kwok; kubeNode.ts lifts the not-ready taint itself).
KUBE_COMMANDS=(kube-apiserver kube-scheduler)

no_build=0
case "${1:-}" in
  "") ;;
  --no-build) no_build=1 ;;
  *) echo "usage: $0 [--no-build]" >&2; exit 2 ;;
esac

has_core() { [ -x "$1/kube-apiserver" ] && [ -x "$1/etcd" ] && [ -x "$1/kwok" ]; }
cached() { has_core "$1" && [ -x "$1/kube-scheduler" ] &&
  [ -f "$1/kwok-stages.yaml" ] && [ "$(cat "$1/.complete" 2>/dev/null)" = "$STAMP_TEXT" ]; }

if [ -n "${KUBE_BIN_DIR:-}" ]; then
  if has_core "$KUBE_BIN_DIR"; then echo "$KUBE_BIN_DIR"; exit 0; fi
  echo "ensure-kube: KUBE_BIN_DIR=$KUBE_BIN_DIR lacks kube-apiserver, etcd or kwok; unset it or fix the path." >&2
  exit 1
fi
if cached "$TARGET_DIR"; then echo "$TARGET_DIR"; exit 0; fi
if [ "$no_build" = 1 ]; then
  echo "ensure-kube: no Kubernetes binaries in $TARGET_DIR (run scripts/ensure-kube.sh to build them)" >&2
  exit 1
fi

if ! command -v go >/dev/null 2>&1; then
  echo "ensure-kube: no Kubernetes binaries found and no Go toolchain to build them." >&2
  echo "  Install Go >= 1.26 (apt-get install golang-go, or https://go.dev/dl) and rerun, or point KUBE_BIN_DIR at a directory with kube-apiserver, etcd and kwok." >&2
  exit 1
fi

mkdir -p "$CACHE_ROOT"
# One build at a time per cache (parallel test runs would otherwise each start one).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE_ROOT/kube-v$KUBE_VERSION.lock"
  flock 9
  if cached "$TARGET_DIR"; then echo "$TARGET_DIR"; exit 0; fi
fi

jobs="${KUBE_BUILD_JOBS:-1}"
echo "ensure-kube: building Kubernetes v$KUBE_VERSION, etcd v$ETCD_VERSION and kwok v$KWOK_VERSION from Go modules into $TARGET_DIR (once per machine; 20-30 minutes cold)" >&2
staging="$(mktemp -d "$CACHE_ROOT/kube-build.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/bin" "$staging/kube" "$staging/etcd"
export CGO_ENABLED=0
# Builds run outside the repository (its files must not affect them), at low priority.
gobuild() { nice -n 19 go build -p="$jobs" -trimpath "$@"; }
started=$SECONDS

# 1. kube-apiserver and kube-scheduler via a wrapper module.
{
  echo "module rolloutpipeline.local/kubebuild"
  echo
  echo "go 1.26.0"
  echo
  echo "require k8s.io/kubernetes v$KUBE_VERSION"
  echo
  echo "replace ("
  for m in "${STAGING_MODULES[@]}"; do echo "	k8s.io/$m => k8s.io/$m v$STAGING_VERSION"; done
  echo ")"
} >"$staging/kube/go.mod"
tools=()
for c in "${KUBE_COMMANDS[@]}"; do tools+=("k8s.io/kubernetes/cmd/$c@v$KUBE_VERSION"); done
(cd "$staging/kube" && nice -n 19 go get -tool "${tools[@]}") >&2
minor="$(echo "$KUBE_VERSION" | cut -d. -f2)"
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  kube_ldflags+=" -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
done
for c in "${KUBE_COMMANDS[@]}"; do
  echo "ensure-kube: go build $c ($((SECONDS - started))s so far)" >&2
  (cd "$staging/kube" && gobuild -ldflags "$kube_ldflags" -o "$staging/bin/$c" "k8s.io/kubernetes/cmd/$c") >&2
done

# 2. etcd via a wrapper module.
cat >"$staging/etcd/main.go" <<'EOF'
// Command etcd is the etcd server, built from the go.etcd.io/etcd/server/v3 module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
EOF
printf 'module rolloutpipeline.local/etcdbuild\n\ngo 1.26.0\n' >"$staging/etcd/go.mod"
echo "ensure-kube: go build etcd ($((SECONDS - started))s so far)" >&2
(cd "$staging/etcd" && nice -n 19 go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" && nice -n 19 go mod tidy &&
  gobuild -ldflags "-s -w" -o "$staging/bin/etcd" .) >&2

# 3. kwok, and its default stages from the same module.
echo "ensure-kube: go install kwok ($((SECONDS - started))s so far)" >&2
(cd "$staging" && GOBIN="$staging/bin" GOFLAGS="${GOFLAGS:-} -p=$jobs -trimpath" nice -n 19 \
  go install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION") >&2
kwok_dir="$(cd "$staging" && go mod download -json "sigs.k8s.io/kwok@v$KWOK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
stages="$kwok_dir/kustomize/stage"
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
  pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
  [ -f "$stages/$f" ] || { echo "ensure-kube: kwok stage $stages/$f not found" >&2; exit 1; }
  echo "---"
  cat "$stages/$f"
done >"$staging/bin/kwok-stages.yaml"

check_version() { # binary, expected start of its --version output
  local out; out="$("$staging/bin/$1" --version 2>&1 || true)"
  case "$out" in "$2"*) ;; *) echo "ensure-kube: the built $1 does not run: $out" >&2; exit 1 ;; esac
}
check_version kube-apiserver "Kubernetes v$KUBE_VERSION"
check_version kube-scheduler "Kubernetes v$KUBE_VERSION"
check_version etcd "etcd Version: $ETCD_VERSION"
check_version kwok "kwok version v$KWOK_VERSION "

mkdir -p "$TARGET_DIR/src/kube" "$TARGET_DIR/src/etcd"
for f in "$staging"/bin/*; do mv -f "$f" "$TARGET_DIR/"; done
cp "$staging/kube/go.mod" "$staging/kube/go.sum" "$TARGET_DIR/src/kube/"
cp "$staging/etcd/go.mod" "$staging/etcd/go.sum" "$staging/etcd/main.go" "$TARGET_DIR/src/etcd/"
echo "$STAMP_TEXT" >"$TARGET_DIR/.complete"
echo "ensure-kube: done in $((SECONDS - started))s" >&2
echo "$TARGET_DIR"
