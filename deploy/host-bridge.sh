#!/usr/bin/env bash
# Host side of the proxy -> enclave gRPC channel (deploy/README.md). An enclave is
# reachable only over vsock, so this listens on TCP at ENCLAVE_ADDR (127.0.0.1:50051, the
# proxy's default) and relays each connection to vsock port ENCLAVE_VSOCK_PORT of the
# enclave, where deploy/enclave-entrypoint.sh relays it on to the gRPC server. The proxy's
# configuration does not change: it still dials 127.0.0.1:50051.
#
#   deploy/host-bridge.sh [ENCLAVE_CID]
#
# Without ENCLAVE_CID it asks `nitro-cli describe-enclaves`, which works when exactly one
# enclave runs. Pin the CID instead (`nitro-cli run-enclave --enclave-cid 16`): socat dials
# the enclave anew for every connection, so with a fixed CID this bridge outlives enclave
# restarts. The bridge carries bytes only: on plain calls those are the requests the proxy
# already saw; sealed calls stay sealed.
set -euo pipefail

die() { printf 'host-bridge: %s\n' "$*" >&2; exit 1; }

ENCLAVE_ADDR="${ENCLAVE_ADDR:-127.0.0.1:50051}"
ENCLAVE_VSOCK_PORT="${ENCLAVE_VSOCK_PORT:-5000}"

listen_host="${ENCLAVE_ADDR%:*}"
listen_port="${ENCLAVE_ADDR##*:}"
[[ "$listen_port" =~ ^[0-9]+$ ]] || die "ENCLAVE_ADDR must be host:port (got '$ENCLAVE_ADDR')"
# Beyond loopback, anyone on the network could call the enclave without passing the proxy's
# rate limits and checks (the enclave still checks API keys, but nothing else would stop them).
[[ "$listen_host" =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "ENCLAVE_ADDR must be a 127.x.x.x address (got '$listen_host')"
[[ "$ENCLAVE_VSOCK_PORT" =~ ^[0-9]+$ ]] || die "ENCLAVE_VSOCK_PORT must be a number"

cid="${1:-}"
if [[ -z "$cid" ]]; then
  command -v nitro-cli >/dev/null || die "give the enclave's CID, or install nitro-cli"
  command -v jq >/dev/null || die "give the enclave's CID, or install jq"
  cids="$(nitro-cli describe-enclaves | jq -r '.[].EnclaveCID')"
  [[ -n "$cids" ]] || die "no enclave is running (nitro-cli describe-enclaves)"
  [[ "$cids" != *$'\n'* ]] || die "several enclaves run; give the CID: $(tr '\n' ' ' <<<"$cids")"
  cid="$cids"
fi
[[ "$cid" =~ ^[0-9]+$ ]] || die "the enclave CID must be a number (got '$cid')"

printf 'host-bridge: tcp %s -> vsock %s:%s\n' "$ENCLAVE_ADDR" "$cid" "$ENCLAVE_VSOCK_PORT" >&2
exec socat "TCP-LISTEN:${listen_port},bind=${listen_host},reuseaddr,fork" "VSOCK-CONNECT:${cid}:${ENCLAVE_VSOCK_PORT}"
