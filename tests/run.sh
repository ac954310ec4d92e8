#!/usr/bin/env bash
# The test command (README.md): installs what the tests need (idempotent, cached), then runs
# formatting and lint checks, unit tests, and integration tests against a real kube-apiserver
# and real glusterd. Needs root: tests create network namespaces and FUSE mounts.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/env/common.sh

[ "$(id -u)" = 0 ] || gk_die "run as root: the tests create network namespaces, loop and FUSE mounts"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$GK_CACHE/cargo-target}
export PATH="$GK_CACHE/bin:$PATH"

# Each stage's wall time, printed as it ends and again in a summary at the end (CI's budget:
# issue 40).
run_started=$(date +%s); stage_started=$run_started; stage_name=""; stage_times=""
stage() {
  local now; now=$(date +%s)
  if [ -n "$stage_name" ]; then
    gk_log "stage '$stage_name' took $((now - stage_started)) s"
    stage_times="$stage_times$(printf '  %-34s %5d s' "$stage_name" $((now - stage_started)))"$'\n'
  fi
  stage_name=$1; stage_started=$now
}
# The e2e test writes its own steps' times here (tests/tests/e2e.rs, Steps).
export GK_E2E_STEPS="$CARGO_TARGET_DIR/e2e-steps.txt"
rm -f "$GK_E2E_STEPS"
stage_summary() {
  stage ""
  printf 'stage times (total %d s):\n%s' $(($(date +%s) - run_started)) "$stage_times" >&2
  if [ -s "$GK_E2E_STEPS" ]; then
    printf 'e2e steps (within cargo test):\n' >&2
    cat "$GK_E2E_STEPS" >&2
  fi
}

stage "install tools"
bash tests/env/install-tools.sh
stage "build Kubernetes"
bash tests/env/k8s.sh build

# Leave the machine as we found it: stop the control plane only if this run started it. The
# stage times are printed however the run ends.
stop_control_plane=false
if ! bash tests/env/k8s.sh status | grep 'kube-apiserver running' >/dev/null; then
  stop_control_plane=true
fi
on_exit() {
  stage_summary
  if $stop_control_plane; then bash tests/env/k8s.sh stop; fi
}
trap on_exit EXIT
stage "start the control plane"
bash tests/env/k8s.sh start

stage "fmt and clippy"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The end-to-end test (tests/tests/e2e.rs) runs these images on real nodes; cargo cannot build
# them from inside `cargo test`, so they are built (or found cached) here.
stage "images"
bash tests/env/images.sh build
# The e2e test runs the kubectl plugin as kubectl finds it, from the target directory; the
# quota VM runs the brick agent's binary.
stage "build the plugin and the agent"
cargo build -p kubectl-gluster -p gk-agent
cargo build -p gk-testenv --bin vm-agent-rpcs
# XFS project quotas need a kernel with XFS quota support, which this machine's lacks: the
# brick agent's quota path runs on bricks in a VM of Debian's own kernel (docs/quotas.md).
stage "quota VM"
bash tests/env/quota-vm.sh
stage "cargo test"
GK_IMAGES_BUILT=1 cargo test --workspace
