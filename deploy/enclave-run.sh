#!/usr/bin/env bash
# Runs the enclave for systemd (deploy/systemd/agent-enclave.service): starts it from the
# .eif, then watches it and exits when it is gone, so that systemd's Restart=always starts
# it again; on SIGTERM (systemctl stop) it terminates the enclave it started.
#
#   deploy/enclave-run.sh --eif <path> --cid <n> --cpus <n> --memory-mib <n>
#
# `nitro-cli run-enclave` returns as soon as the enclave boots, and nothing tells the host
# when an enclave ends (its entrypoint exits when Node or a bridge does), hence the polling.
# An enclave of the same name left from an earlier run is terminated first: its CID would
# otherwise be taken, and the new enclave could not start.
#
# Backoff: an enclave that ends within ENCLAVE_HEALTHY_SECONDS (300) of its start counts as
# a failure, and the next start waits ENCLAVE_BACKOFF_SECONDS (5) doubled for each failure
# in a row, at most ENCLAVE_BACKOFF_MAX_SECONDS (300), so that a crash loop does not call
# KMS every few seconds. The count lives in $RUNTIME_DIRECTORY (the unit keeps it across
# restarts). Done here rather than with systemd's RestartSteps=/RestartMaxDelaySec=, which
# need systemd 254: Amazon Linux 2023 has 252, which ignores them.
set -euo pipefail

log() { printf 'enclave-run: %s\n' "$*" >&2; }
usage() { printf 'enclave-run: %s\nusage: %s --eif <path> --cid <n> --cpus <n> --memory-mib <n>\n' "$*" "$0" >&2; exit 2; }

ENCLAVE_NAME="${ENCLAVE_NAME:-agent-enclave}"
POLL_SECONDS="${ENCLAVE_POLL_SECONDS:-10}"
NITRO_CLI="${NITRO_CLI:-nitro-cli}"
STATE_DIR="${RUNTIME_DIRECTORY:-${ENCLAVE_STATE_DIR:-/run/agent-enclave}}"
HEALTHY_SECONDS="${ENCLAVE_HEALTHY_SECONDS:-300}"
BACKOFF_SECONDS="${ENCLAVE_BACKOFF_SECONDS:-5}"
BACKOFF_MAX_SECONDS="${ENCLAVE_BACKOFF_MAX_SECONDS:-300}"
eif="" cid="" cpus="" memory_mib=""

while [[ $# -gt 0 ]]; do
  [[ $# -ge 2 ]] || usage "$1 needs a value"
  case "$1" in
    --eif) eif="$2" ;;
    --cid) cid="$2" ;;
    --cpus) cpus="$2" ;;
    --memory-mib) memory_mib="$2" ;;
    *) usage "unknown option $1" ;;
  esac
  shift 2
done
[[ -n "$eif" && -n "$cid" && -n "$cpus" && -n "$memory_mib" ]] || usage "--eif, --cid, --cpus and --memory-mib are all required"
[[ "$cid" =~ ^[0-9]+$ && "$cid" -ge 4 ]] || usage "--cid must be a number of at least 4"
[[ "$cpus" =~ ^[0-9]+$ && "$cpus" -ge 2 ]] || usage "--cpus must be a number of at least 2"
[[ "$memory_mib" =~ ^[0-9]+$ ]] || usage "--memory-mib must be a number"
[[ "$ENCLAVE_NAME" =~ ^[A-Za-z0-9_-]+$ ]] || usage "ENCLAVE_NAME must be letters, digits, _ and -"
[[ "$POLL_SECONDS" =~ ^[0-9]+(\.[0-9]+)?$ ]] || usage "ENCLAVE_POLL_SECONDS must be a number"
for value in "$HEALTHY_SECONDS" "$BACKOFF_SECONDS" "$BACKOFF_MAX_SECONDS"; do
  [[ "$value" =~ ^[0-9]+(\.[0-9]+)?$ ]] || usage "ENCLAVE_HEALTHY_SECONDS, ENCLAVE_BACKOFF_SECONDS and ENCLAVE_BACKOFF_MAX_SECONDS must be numbers"
done
[[ -r "$eif" ]] || { log "cannot read $eif"; exit 1; }
command -v jq >/dev/null || { log "jq is required"; exit 1; }

ids_named() {
  "$NITRO_CLI" describe-enclaves | jq -r --arg name "$ENCLAVE_NAME" '.[] | select(.EnclaveName == $name) | .EnclaveID'
}

# Quick failures in a row so far, kept per enclave name.
failures_file="$STATE_DIR/$ENCLAVE_NAME.failures"
mkdir -p "$STATE_DIR"
failures="$(cat "$failures_file" 2>/dev/null || true)"
[[ "$failures" =~ ^[0-9]+$ ]] || failures=0
if (( failures > 0 )); then
  delay="$(awk -v b="$BACKOFF_SECONDS" -v m="$BACKOFF_MAX_SECONDS" -v n="$failures" 'BEGIN { d = b * 2 ^ (n - 1); print (d > m ? m : d) }')"
  log "backing off ${delay} s before starting: the enclave ended within ${HEALTHY_SECONDS} s of its start ${failures} time(s) in a row"
  trap 'exit 0' TERM INT
  sleep "$delay" &
  wait $! || true
  trap - TERM INT
fi
# Until this enclave has run for HEALTHY_SECONDS, the next start counts as after a failure.
printf '%s\n' "$((failures + 1))" >"$failures_file"

for stale in $(ids_named); do
  log "terminating enclave $stale left from an earlier run"
  "$NITRO_CLI" terminate-enclave --enclave-id "$stale" >/dev/null
done

# A stop asked for while the enclave is being started is carried out once its id is known,
# so `systemctl stop` right after a start never leaves an enclave behind.
stop_asked=""
trap 'stop_asked=1' TERM INT
out="$("$NITRO_CLI" run-enclave --eif-path "$eif" --cpu-count "$cpus" --memory "$memory_mib" \
  --enclave-cid "$cid" --enclave-name "$ENCLAVE_NAME")" || { log "nitro-cli run-enclave failed"; exit 1; }
id="$(jq -r '.EnclaveID // empty' <<<"$out")"
[[ -n "$id" ]] || { log "nitro-cli run-enclave printed no EnclaveID: $out"; exit 1; }

stop() {
  log "stopping: terminating enclave $id"
  printf '0\n' >"$failures_file" # asked to stop: not a crash
  "$NITRO_CLI" terminate-enclave --enclave-id "$id" >/dev/null || true
  exit 0
}
trap stop TERM INT
[[ -z "$stop_asked" ]] || stop
log "enclave $id running (CID $cid, $cpus vCPUs, $memory_mib MiB)"
started=$SECONDS

while :; do
  # sleep in the background so that SIGTERM is handled at once, not after the sleep.
  sleep "$POLL_SECONDS" &
  wait $! || true
  state="$("$NITRO_CLI" describe-enclaves | jq -r --arg id "$id" '.[] | select(.EnclaveID == $id) | .State')" || state=""
  # Healthy long enough: the next start, whatever ends this one, is not a crash loop.
  if awk -v a="$((SECONDS - started))" -v h="$HEALTHY_SECONDS" 'BEGIN { exit !(a >= h) }'; then printf '0\n' >"$failures_file"; fi
  if [[ "$state" != RUNNING ]]; then
    log "enclave $id is gone (state '${state:-none}'); exiting so that systemd starts it again"
    exit 1
  fi
done
