# Every glusterkube image, one target each, for registries and for machines with Docker or
# BuildKit. The same content as tests/env/images.sh builds without a daemon (the tests and
# the demo use those): a shared Debian layer, our binaries on top. A test
# (tests/tests/deploy.rs, dockerfile_matches_the_image_builder) fails when the two drift.
#
#   docker buildx build --platform linux/amd64,linux/arm64 --target operator \
#     -t ghcr.io/glusterkube/operator:VERSION --push .
#
# Targets: brick, csi, operator, csi-liveness, csi-node-registrar. docs/release.md has the
# whole release.

# The Rust binaries, built for the platform being built (emulated or native).
FROM rust:1-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends protobuf-compiler libprotobuf-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked \
      --bin gk-agent --bin gk-csi --bin gk-operator --bin gk-csi-liveness \
 && mkdir /out \
 && cp target/release/gk-agent target/release/gk-csi target/release/gk-operator \
       target/release/gk-csi-liveness /out/

# Our own node-driver-registrar (the upstream module is not served here; same flags).
FROM golang:1.26-bookworm AS registrar
WORKDIR /src
COPY tools/csi-node-registrar/ .
RUN CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=readonly" go build -trimpath -ldflags "-s -w" \
      -o /out/csi-node-registrar .

# Gluster's translators we ship patched (gluster-patches/README.md), built from Debian's source
# of the same glusterfs; /out holds them at the paths of Debian's own.
FROM debian:bookworm-slim AS gluster-fix
RUN apt-get update \
 && apt-get install -y --no-install-recommends glusterfs-common
COPY gluster-patches/ /src/gluster-patches/
RUN bash /src/gluster-patches/build.sh /out

# The Debian layer every image but the registrar shares.
FROM debian:bookworm-slim AS base
RUN apt-get update \
 && apt-get install -y --no-install-recommends glusterfs-server glusterfs-client xfsprogs attr util-linux procps \
 && rm -rf /var/lib/apt/lists/*
COPY --from=gluster-fix /out/ /
LABEL org.opencontainers.image.source="glusterkube"

FROM base AS brick
# Without geo-replication's gsyncd (Python) the gluster CLI no longer starts it on every run
# to learn whether geo-replication is installed; we do not offer geo-replication. The glob
# names the architecture's library directory (x86_64-linux-gnu, aarch64-linux-gnu).
RUN rm /usr/lib/*-linux-gnu/glusterfs/gsyncd
COPY --from=build /out/gk-agent /usr/local/bin/gk-agent
COPY brick-image/entrypoint.sh /usr/local/bin/gk-brick-entrypoint
# Node-local storage: glusterd's state, logs and the bricks all live here, so a restarted pod
# keeps its peer identity and its bricks.
VOLUME ["/var/lib/glusterkube"]
EXPOSE 24007 24050 49152-49251
ENTRYPOINT ["/usr/local/bin/gk-brick-entrypoint"]

FROM base AS csi
COPY --from=build /out/gk-csi /usr/local/bin/gk-csi
ENTRYPOINT ["/usr/local/bin/gk-csi"]

FROM base AS operator
COPY --from=build /out/gk-operator /usr/local/bin/gk-operator
ENTRYPOINT ["/usr/local/bin/gk-operator"]

FROM base AS csi-liveness
COPY --from=build /out/gk-csi-liveness /usr/local/bin/gk-csi-liveness
ENTRYPOINT ["/usr/local/bin/gk-csi-liveness"]

FROM scratch AS csi-node-registrar
COPY --from=registrar /out/csi-node-registrar /csi-node-registrar
ENTRYPOINT ["/csi-node-registrar"]
