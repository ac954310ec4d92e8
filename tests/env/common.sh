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

# The PKI helpers below read the caller's $pki (CA and output directory), $state (where
# kubeconfigs go) and $api_port.

# cert NAME CN O [SANs]: a key and a certificate signed by the CA in $pki.
cert() {
  local name=$1 cn=$2 org=$3 sans=${4:-}
  [ -f "$pki/$name.crt" ] && return 0
  openssl genrsa -out "$pki/$name.key" 2048 2>/dev/null
  local subj="/CN=$cn"; [ -n "$org" ] && subj="/O=$org$subj"
  openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
  local ext="$pki/$name.ext"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$sans" ]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$sans"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } > "$ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 365 -sha256 -extfile "$ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr" "$ext"
}

# kubeconfig NAME: $state/NAME.kubeconfig for the certificate NAME, against the local apiserver.
kubeconfig() {
  local name=$1
  cat > "$state/$name.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $pki/ca.crt
users:
- name: $name
  user:
    client-certificate: $pki/$name.crt
    client-key: $pki/$name.key
contexts:
- name: local
  context: {cluster: local, user: $name}
current-context: local
KC
}

