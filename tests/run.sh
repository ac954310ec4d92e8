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

bash tests/env/install-tools.sh
bash tests/env/k8s.sh build

# Leave the machine as we found it: stop the control plane only if this run started it.
if ! bash tests/env/k8s.sh status | grep 'kube-apiserver running' >/dev/null; then
  trap 'bash tests/env/k8s.sh stop' EXIT
fi
bash tests/env/k8s.sh start

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The end-to-end test (tests/tests/e2e.rs) runs these images on real nodes; cargo cannot build
# them from inside `cargo test`, so they are built (or found cached) here.
bash tests/env/images.sh build
# The e2e test runs the kubectl plugin as kubectl finds it, from the target directory.
cargo build -p kubectl-gluster
GK_IMAGES_BUILT=1 cargo test --workspace
