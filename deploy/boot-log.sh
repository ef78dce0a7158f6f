#!/usr/bin/env bash
# Sourced by deploy/enclave-entrypoint.sh: the way out for the enclave's boot stages and log
# lines, to the host's journal (deploy/README.md, "Logs and boot stages"). A production
# enclave's console cannot be read (only debug mode shows it, and debug mode zeroes the
# PCRs), so without this a KMS refusal or a missing keys file shows only as an enclave that
# exits.
#
#   boot_log_open            opens BOOT_LOG_FD: a pipe to socat, which connects to
#                            BOOT_LOG_CONNECT (default VSOCK-CONNECT:3:$LOG_VSOCK_PORT, the
#                            parent's deploy/host-log-bridge.sh) and retries until it can
#   boot_stage <name>        one JSON line {"stage": <name>}
#   boot_log <level> <text>  one JSON line; level is pino's number (30 info, 40 warn, 50 error)
#
# Only the entrypoint's own words and stage names go through here: never credentials, keys
# or anything of a tenant. The enclave process writes its own lines, redacted, to the same
# pipe (LOG_SINK_FD, enclave/observability/host-log-redaction.ts).

BOOT_LOG_FD=""
boot_log_pid=""

boot_log_open() {
  local connect="${BOOT_LOG_CONNECT:-VSOCK-CONNECT:3:${LOG_VSOCK_PORT:-8004}}"
  # A reader that has gone away must not kill the writer: writes fail instead.
  trap '' PIPE
  # socat exits 0 once the pipe is closed and drained; until the host listens, try again.
  exec {BOOT_LOG_FD}> >(until socat -u STDIN "$connect" 2>/dev/null; do sleep 1; done)
  boot_log_pid=$!
}

boot_log() {
  [[ -n "$BOOT_LOG_FD" ]] || return 0
  local text="$2"
  text="${text//\\/\\\\}"
  text="${text//\"/\\\"}"
  text="$(printf '%s' "$text" | tr -d '\000-\037')"
  printf '{"level":%d,"time":%s,"process":"entrypoint","msg":"%s"}\n' "$1" "$(date +%s%3N)" "$text" 1>&"$BOOT_LOG_FD" 2>/dev/null || true
}

boot_stage() {
  [[ -n "$BOOT_LOG_FD" ]] || return 0
  [[ "$1" =~ ^[a-z0-9-]{1,32}$ ]] || return 0
  printf '{"level":30,"time":%s,"process":"entrypoint","stage":"%s","msg":"boot stage"}\n' "$(date +%s%3N)" "$1" 1>&"$BOOT_LOG_FD" 2>/dev/null || true
}

# Before the entrypoint exits (and the enclave with it): let socat deliver what is queued,
# for a few seconds at most, since the last line is usually the reason.
boot_log_close() {
  [[ -n "$BOOT_LOG_FD" ]] || return 0
  exec {BOOT_LOG_FD}>&-
  BOOT_LOG_FD=""
  for _ in $(seq 1 30); do
    kill -0 "$boot_log_pid" 2>/dev/null || return 0
    sleep 0.1
  done
}
