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
stage "cargo test: build"
cargo test --workspace --no-run
# The integration tests in two groups. First those that change what every user of the
# apiserver sees (the CRDs themselves, cluster-scoped objects of helm releases), alone. Then
# the e2e scenario on real kubelets, which mostly waits on them, side by side with the tests
# that need no kubelet and touch only objects of their own (the operator tests reconcile only
# objects labelled with their own instance), those at a lower CPU priority.
# Every file in tests/tests/ is in exactly one group (checked here), so none is left out.
alone=(bench_docs control_plane crd_admission crd_upgrade csi deploy)
beside=(agent gluster_ops gluster_partition gluster_replica3 gluster_tls operator operator_day2)
listed=" e2e ${alone[*]} ${beside[*]} "
for f in tests/tests/*.rs; do
  t=$(basename "$f" .rs)
  case "$listed" in *" $t "*) ;; *) gk_die "tests/tests/$t.rs is in no group of tests/run.sh" ;; esac
  [ "$(grep -o " $t " <<<"$listed" | wc -l)" = 1 ] || gk_die "tests/tests/$t.rs is in two groups of tests/run.sh"
done
stage "cargo test: unit tests, apiserver-wide tests"
cargo test --workspace --lib --bins
cargo test --workspace --doc
cargo test -p gk-testenv $(printf -- '--test %s ' "${alone[@]}")

# XFS project quotas need a kernel with XFS quota support, which this machine's lacks: the
# brick agent's quota path runs on bricks in a VM of Debian's own kernel (docs/quotas.md).
# Alone: beside the e2e, under emulation, one write past a moved PV's size once failed with
# EIO instead of ENOSPC (after `./demo.sh`, then this script).
stage "quota VM"
bash tests/env/quota-vm.sh

# The e2e binary runs by itself (cargo holds its lock for a whole `cargo test`, so two cannot
# run at once); its output is printed when it ends, after the others'.
stage "cargo test: e2e beside the kubelet-free tests"
e2e_bin=$(cargo test -p gk-testenv --test e2e --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "e2e" and m.get("executable"):
        print(m["executable"])')
[ -x "$e2e_bin" ] || gk_die "no e2e test binary"
e2e_log="$CARGO_TARGET_DIR/e2e.log"
(cd tests && GK_IMAGES_BUILT=1 "$e2e_bin" > "$e2e_log" 2>&1; echo $? > "$e2e_log.rc") &
e2e_pid=$!
beside_rc=0
# All of them, even after a failure: the e2e takes longer anyway.
nice -n 10 cargo test --no-fail-fast -p gk-testenv $(printf -- '--test %s ' "${beside[@]}") || beside_rc=$?
wait "$e2e_pid" || true
cat "$e2e_log"
e2e_rc=$(cat "$e2e_log.rc" 2>/dev/null || echo 1)
[ "$beside_rc" = 0 ] || gk_die "a kubelet-free test failed (above the e2e's output)"
[ "$e2e_rc" = 0 ] || gk_die "the e2e test failed (exit $e2e_rc)"
