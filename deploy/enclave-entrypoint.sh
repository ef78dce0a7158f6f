#!/usr/bin/env bash
# The enclave image's ENTRYPOINT (deploy/enclave.Dockerfile). Nitro's init runs it as the
# enclave's only program and terminates the enclave when it exits. It does what Node
# cannot do for itself in an enclave, which has no network, no disk and no environment
# from outside, then runs the enclave process:
#
#   0. opens the way out for boot stages and log lines, to the host's journal (boot-log.sh);
#   1. brings up the loopback interface, which the gRPC server and the bridges use, seeds
#      the kernel's entropy pool from the NSM, and synchronises the clock with the
#      hypervisor's KVM PTP clock (/dev/ptp0) through chronyd;
#   2. fetches the parent role's AWS credentials over vsock (for KMS; not secret from the
#      host, which has them already: the KMS key policy's PCR conditions guard the key);
#   3. decrypts MODEL_API_KEY with KMS, if the image carries it encrypted;
#   4. bridges the chat model's HTTPS endpoint: 127.0.0.1:<port> here, resolved through
#      /etc/hosts, to the parent's vsock-proxy; TLS still runs from Node to the model;
#   5. bridges vsock port ENCLAVE_VSOCK_PORT to the gRPC server on ENCLAVE_ADDR, and the
#      host store's address HOST_STORE_ADDR to the parent's vsock port HOST_STORE_VSOCK_PORT
#      (the enclave has no disk: its sealed state is kept by the host store on the parent);
#   6. starts `node dist/enclave/main.js`, and exits as soon as it or a bridge exits,
#      since the enclave is of no use without any of them (the host then sees the enclave
#      gone and may start it again).
#
# Everything it reads comes from the image (ENV, measured in the PCRs) except the
# credentials of step 2, which come from the untrusted host and are parsed strictly.
set -euo pipefail

# shellcheck source=deploy/boot-log.sh
source "${BOOT_LOG_SH:-/usr/local/bin/boot-log.sh}"
log() { printf 'enclave-entrypoint: %s\n' "$*" >&2; boot_log 30 "$*"; }
die() { printf 'enclave-entrypoint: %s\n' "$*" >&2; boot_log 50 "$*"; boot_stage failed; boot_log_close; exit 1; }

# 0. Before anything can fail: the journal on the host is the only place an operator can
#    read why a production enclave did not come up.
boot_log_open
boot_stage entrypoint

# From inside an enclave the parent instance is always CID 3.
readonly PARENT_CID=3
ENCLAVE_ADDR="${ENCLAVE_ADDR:-127.0.0.1:50051}"
ENCLAVE_VSOCK_PORT="${ENCLAVE_VSOCK_PORT:-5000}"
MODEL_VSOCK_PORT="${MODEL_VSOCK_PORT:-8001}"
CREDENTIALS_VSOCK_PORT="${CREDENTIALS_VSOCK_PORT:-8002}"
HOST_STORE_ADDR="${HOST_STORE_ADDR:-127.0.0.1:50052}"
HOST_STORE_VSOCK_PORT="${HOST_STORE_VSOCK_PORT:-8003}"
KMS_PROXY_PORT="${KMS_PROXY_PORT:-8000}"
KMS_TOOL="${KMS_TOOL:-/usr/local/bin/kmstool_enclave_cli}"
APP_DIR="${APP_DIR:-/app}"

[[ "${TEE_MODE:-}" == nitro ]] || die "this entrypoint is for TEE_MODE=nitro (got '${TEE_MODE:-}')"
[[ -n "${AWS_REGION:-}" ]] || die "AWS_REGION is not set (build argument of deploy/enclave.Dockerfile)"

# A key baked into the image would be readable by anyone holding the .eif, the host included.
if [[ -n "${MODEL_API_KEY:-}" ]]; then
  die "MODEL_API_KEY is in the image's environment, where whoever holds the image can read it; ship it KMS-encrypted (MODEL_API_KEY_CIPHERTEXT_FILE, deploy/README.md)"
fi

grpc_host="${ENCLAVE_ADDR%:*}"
grpc_port="${ENCLAVE_ADDR##*:}"
# Nothing but the vsock bridge below can reach the enclave, and it connects to loopback.
[[ "$grpc_host" == 127.0.0.1 && "$grpc_port" =~ ^[0-9]+$ ]] \
  || die "ENCLAVE_ADDR must be 127.0.0.1:<port> inside the enclave (got '$ENCLAVE_ADDR')"
store_host="${HOST_STORE_ADDR%:*}"
store_port="${HOST_STORE_ADDR##*:}"
[[ "$store_host" == 127.0.0.1 && "$store_port" =~ ^[0-9]+$ && "$store_port" != "$grpc_port" ]] \
  || die "HOST_STORE_ADDR must be 127.0.0.1:<port> inside the enclave, not the gRPC server's (got '$HOST_STORE_ADDR')"

# 1. Loopback. An enclave boots with lo down. The address is given explicitly: on the 4.14
#    enclave kernel `ip link set lo up` alone left connect() to 127.0.0.1 failing with
#    ENETUNREACH. (Already there on newer kernels: "File exists" is fine.)
ip link set dev lo up
ip addr add 127.0.0.1/8 dev lo 2>/dev/null || ip addr show dev lo | grep -q 'inet 127\.0\.0\.1/8' \
  || die "cannot give lo the address 127.0.0.1/8"
boot_stage loopback

# Entropy. The enclave makes its keys at start, with no disk, network or devices to gather
# entropy from: seed the kernel's pool from the NSM's GetRandom first, as nitriding does.
if "${NSM_HELPER:-/usr/local/bin/nsm-attest}" --seed-entropy 512; then
  boot_stage entropy
else
  log "warning: could not seed the entropy pool from the NSM; the kernel's own sources only"
fi

# The clock. An enclave's clock is set at boot and then drifts (seconds a week) with nothing
# to correct it: no network, no NTP. What depends on it (deploy/README.md, "Time"): the
# sdk refuses signatures more than 5 minutes off its own clock, and the enclave refuses
# sealed requests more than 30 s ahead of its clock, so a lagging enclave fails sealed calls
# first. The hypervisor exposes its clock as a KVM PTP device; chronyd follows it. That
# clock is the Nitro hypervisor's, not the parent OS's (as AWS describes it; not checked
# here): an operator who can set the parent's clock should not be able to set this one.
CHRONY_CONF="${CHRONY_CONF:-/etc/chrony/enclave.conf}"
if [[ -c /dev/ptp0 ]] && command -v chronyd >/dev/null; then
  # Not fatal: an enclave with a drifting clock still serves; one that restarts forever does not.
  if ! chronyd -f "$CHRONY_CONF"; then
    log "warning: chronyd failed to start with $CHRONY_CONF; the clock is not synchronised"
  # Wait (up to 30 s) for the first correction, so that the first signatures carry good time.
  elif chronyc -n waitsync 15 1 0 2 >/dev/null 2>&1; then
    log "clock synchronised with /dev/ptp0 ($(chronyc -n tracking | sed -n 's/^System time *: //p'))"
  else
    log "warning: chronyd has not synchronised with /dev/ptp0 yet; continuing"
  fi
else
  log "warning: no /dev/ptp0 (or no chronyd): the clock is not synchronised and will drift"
fi

# 2. Credentials: deploy/host-credentials.sh on the parent answers each connection with
#    three lines NAME=value. Retry for a while: the host may start it after the enclave.
fetch_credentials() {
  local attempt raw
  for attempt in $(seq 1 "${CREDENTIALS_ATTEMPTS:-60}"); do
    if raw="$(timeout 5 socat -u "VSOCK-CONNECT:${PARENT_CID}:${CREDENTIALS_VSOCK_PORT}" STDOUT 2>/dev/null)" && [[ -n "$raw" ]]; then
      printf '%s\n' "$raw"
      return 0
    fi
    (( attempt % 10 == 1 )) && log "waiting for credentials on vsock ${PARENT_CID}:${CREDENTIALS_VSOCK_PORT} (deploy/host-credentials.sh)"
    sleep 2
  done
  return 1
}

# The host wrote these lines: accept exactly the three names, with values of the
# characters AWS uses, and never evaluate anything.
parse_credentials() {
  local line name
  while IFS= read -r line; do
    [[ -z "$line" ]] && continue
    if [[ "$line" =~ ^(AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY|AWS_SESSION_TOKEN)=([A-Za-z0-9/+=]{1,4096})$ ]]; then
      name="${BASH_REMATCH[1]}"
      printf -v "$name" '%s' "${BASH_REMATCH[2]}"
      export "${name?}"
    else
      die "refusing the credentials from the parent: a line is not AWS_ACCESS_KEY_ID=, AWS_SECRET_ACCESS_KEY= or AWS_SESSION_TOKEN= with a plain value"
    fi
  done
  [[ -n "${AWS_ACCESS_KEY_ID:-}" && -n "${AWS_SECRET_ACCESS_KEY:-}" && -n "${AWS_SESSION_TOKEN:-}" ]] \
    || die "the parent sent incomplete credentials (need AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)"
}

unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN
credentials="$(fetch_credentials)" || die "no credentials from the parent on vsock port $CREDENTIALS_VSOCK_PORT"
parse_credentials <<<"$credentials"
unset credentials
log "credentials received from the parent"
boot_stage credentials

# 3. The model's API key, KMS-encrypted in the image. KMS decrypts it only for an enclave
#    whose attestation matches the key policy (deploy/README.md, "The model's API key").
if [[ -n "${MODEL_API_KEY_CIPHERTEXT_FILE:-}" ]]; then
  ciphertext="$(tr -d '[:space:]' <"$MODEL_API_KEY_CIPHERTEXT_FILE")"
  kms_out="$("$KMS_TOOL" decrypt --region "$AWS_REGION" --proxy-port "$KMS_PROXY_PORT" \
    --aws-access-key-id "$AWS_ACCESS_KEY_ID" --aws-secret-access-key "$AWS_SECRET_ACCESS_KEY" \
    --aws-session-token "$AWS_SESSION_TOKEN" --ciphertext "$ciphertext")" \
    || die "KMS refused to decrypt $MODEL_API_KEY_CIPHERTEXT_FILE (kmstool_enclave_cli's reason above)"
  plaintext_b64="$(sed -n 's/^PLAINTEXT:[[:space:]]*//p' <<<"$kms_out")"
  [[ -n "$plaintext_b64" ]] || die "kmstool_enclave_cli printed no PLAINTEXT for $MODEL_API_KEY_CIPHERTEXT_FILE"
  MODEL_API_KEY="$(printf '%s' "$plaintext_b64" | base64 -d)" || die "the decrypted model API key is not base64"
  export MODEL_API_KEY
  unset ciphertext kms_out plaintext_b64
  log "model API key decrypted with KMS"
  boot_stage model-key
fi

pids=()

# 4. The chat model. Node connects to https://<host>:<port> as usual; /etc/hosts sends
#    <host> to 127.0.0.1, where socat relays to the parent's vsock-proxy, which connects to
#    the real <host>:<port>. TLS (SNI, certificate check) runs end to end from Node.
if [[ -n "${MODEL_BASE_URL:-}" ]]; then
  parsed="$(node -e '
    const u = new URL(process.argv[1]);
    console.log(u.protocol, u.hostname, u.port || (u.protocol === "https:" ? "443" : "80"));
  ' "$MODEL_BASE_URL")" || die "MODEL_BASE_URL is not a URL: $MODEL_BASE_URL"
  read -r model_scheme model_host model_port <<<"$parsed"
  # Over plain http the host, which relays every byte, would read prompts and memories.
  [[ "$model_scheme" == https: ]] \
    || die "MODEL_BASE_URL must be https:// on Nitro: the host relays the model traffic, and only TLS that ends in the enclave keeps it from reading it"
  # The bridge works by name (/etc/hosts) and TLS checks that name: an IP literal has neither.
  [[ "$model_host" =~ ^[A-Za-z0-9.-]+$ && ! "$model_host" =~ ^[0-9.]+$ ]] \
    || die "MODEL_BASE_URL needs a host name, not an address (got '$model_host')"
  [[ "$model_port" != "$grpc_port" ]] || die "MODEL_BASE_URL's port $model_port is the gRPC server's"
  grep -qE '^127\.0\.0\.1[[:space:]]+localhost([[:space:]]|$)' /etc/hosts 2>/dev/null \
    || printf '127.0.0.1 localhost\n' >>/etc/hosts
  printf '127.0.0.1 %s\n' "$model_host" >>/etc/hosts
  socat "TCP-LISTEN:${model_port},bind=127.0.0.1,reuseaddr,fork" "VSOCK-CONNECT:${PARENT_CID}:${MODEL_VSOCK_PORT}" &
  pids+=("$!")
  log "model: https://${model_host}:${model_port} via vsock ${PARENT_CID}:${MODEL_VSOCK_PORT} (vsock-proxy on the parent)"
fi

# 5. gRPC in: the parent's deploy/host-bridge.sh connects to this vsock port.
socat "VSOCK-LISTEN:${ENCLAVE_VSOCK_PORT},fork" "TCP:127.0.0.1:${grpc_port}" &
pids+=("$!")
log "gRPC: vsock port ${ENCLAVE_VSOCK_PORT} -> ${ENCLAVE_ADDR}"

# The host store: the enclave dials 127.0.0.1:<port>, which leads to the parent's
# deploy/host-store-bridge.sh and the host store behind it. Only sealed blobs cross.
socat "TCP-LISTEN:${store_port},bind=127.0.0.1,reuseaddr,fork" "VSOCK-CONNECT:${PARENT_CID}:${HOST_STORE_VSOCK_PORT}" &
pids+=("$!")
log "host store: ${HOST_STORE_ADDR} -> vsock ${PARENT_CID}:${HOST_STORE_VSOCK_PORT} (deploy/host-store-bridge.sh on the parent)"

# 6. The enclave process. The image's WORKDIR is not applied by Nitro's init.
cd "$APP_DIR"
# The flags are common/node-flags.ts's, and the heap the capacity settings need
# (enclave/heap-flag.ts; test/unit/deploy-scripts.test.ts checks).
heap_flag="$(node dist/enclave/heap-flag.js)"
boot_stage node
# fd 3 is the way out for its redacted log lines and boot stages (LOG_SINK_FD=3).
LOG_SINK_FD=3 node --max-semi-space-size=32 --heap-growing-percent=100 "$heap_flag" dist/enclave/main.js 3>&"$BOOT_LOG_FD" &
pids+=("$!")

stop_all() { kill -TERM "${pids[@]}" 2>/dev/null || true; }
trap stop_all TERM INT

set +e
wait -n "${pids[@]}"
status=$?
set -e
log "a process of the enclave exited (status $status); stopping the others"
boot_stage stopped
stop_all
wait "${pids[@]}" 2>/dev/null || true
boot_log_close
exit "$status"
