# Shared settings for the test-environment scripts. Sourced, not run.
# Everything expensive (Go builds, module downloads) lives in GK_CACHE, outside the repository,
# keyed by version, so a second run reuses it.
GK_CACHE=${GK_CACHE:-/var/cache/glusterkube}
GK_RUN=${GK_RUN:-/run/glusterkube}
GK_K8S_VERSION=${GK_K8S_VERSION:-v1.36.3}
GK_CSI_SANITY_VERSION=${GK_CSI_SANITY_VERSION:-v5.6.0}
GK_HELM_VERSION=${GK_HELM_VERSION:-v3.19.0}

export GOMODCACHE=${GOMODCACHE_OVERRIDE:-$GK_CACHE/go/mod}
export GOCACHE=${GOCACHE_OVERRIDE:-$GK_CACHE/go/build}
export GOFLAGS=-buildvcs=false
export CGO_ENABLED=0

gk_log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
gk_die() { gk_log "error: $*"; exit 1; }
