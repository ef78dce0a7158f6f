#!/usr/bin/env bash
# Host side of the enclave's log channel (deploy/README.md, "Logs and boot stages"): the
# enclave's entrypoint connects to the parent's vsock port LOG_VSOCK_PORT and sends its boot
# stages and redacted log lines; this relays each connection to the host log receiver
# (host-log/main.ts on LOG_LISTEN_ADDR), which writes them to the journal.
#
#   deploy/host-log-bridge.sh
set -euo pipefail

die() { printf 'host-log-bridge: %s\n' "$*" >&2; exit 1; }

LOG_LISTEN_ADDR="${LOG_LISTEN_ADDR:-127.0.0.1:50053}"
LOG_VSOCK_PORT="${LOG_VSOCK_PORT:-8004}"

log_host="${LOG_LISTEN_ADDR%:*}"
log_port="${LOG_LISTEN_ADDR##*:}"
[[ "$log_port" =~ ^[0-9]+$ ]] || die "LOG_LISTEN_ADDR must be host:port (got '$LOG_LISTEN_ADDR')"
[[ "$log_host" =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "LOG_LISTEN_ADDR must be a 127.x.x.x address (got '$log_host')"
[[ "$LOG_VSOCK_PORT" =~ ^[0-9]+$ ]] || die "LOG_VSOCK_PORT must be a number"

printf 'host-log-bridge: vsock port %s -> tcp %s\n' "$LOG_VSOCK_PORT" "$LOG_LISTEN_ADDR" >&2
exec socat "VSOCK-LISTEN:${LOG_VSOCK_PORT},reuseaddr,fork" "TCP:${log_host}:${log_port}"
