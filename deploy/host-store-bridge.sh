#!/usr/bin/env bash
# Host side of the enclave -> host store channel (deploy/README.md, "Storage"). The enclave
# has no disk: it dials the host store at HOST_STORE_ADDR (127.0.0.1:50052 inside the
# enclave, where deploy/enclave-entrypoint.sh relays it to the parent's vsock port
# HOST_STORE_VSOCK_PORT). This listens on that vsock port and relays each connection to the
# host store's TCP address on the parent, so the host store runs exactly as it does locally.
#
#   deploy/host-store-bridge.sh
#
# The bridge carries sealed blobs only: the enclave encrypts and authenticates everything it
# hands the host store, so the host learns names, sizes and timing, never contents.
set -euo pipefail

die() { printf 'host-store-bridge: %s\n' "$*" >&2; exit 1; }

HOST_STORE_ADDR="${HOST_STORE_ADDR:-127.0.0.1:50052}"
HOST_STORE_VSOCK_PORT="${HOST_STORE_VSOCK_PORT:-8003}"

store_host="${HOST_STORE_ADDR%:*}"
store_port="${HOST_STORE_ADDR##*:}"
[[ "$store_port" =~ ^[0-9]+$ ]] || die "HOST_STORE_ADDR must be host:port (got '$HOST_STORE_ADDR')"
# The host store answers anyone who reaches it; keep it on loopback, behind this bridge.
[[ "$store_host" =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "HOST_STORE_ADDR must be a 127.x.x.x address (got '$store_host')"
[[ "$HOST_STORE_VSOCK_PORT" =~ ^[0-9]+$ ]] || die "HOST_STORE_VSOCK_PORT must be a number"

printf 'host-store-bridge: vsock port %s -> tcp %s\n' "$HOST_STORE_VSOCK_PORT" "$HOST_STORE_ADDR" >&2
exec socat "VSOCK-LISTEN:${HOST_STORE_VSOCK_PORT},reuseaddr,fork" "TCP:${store_host}:${store_port}"
