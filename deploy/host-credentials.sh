#!/usr/bin/env bash
# Hands the parent instance role's AWS credentials to the enclave, which needs them to call
# KMS (kmstool_enclave_cli signs its requests with them; deploy/sealing.md). An enclave
# cannot reach the instance metadata service, and `nitro-cli run-enclave` passes no
# environment, so deploy/enclave-entrypoint.sh asks for them over vsock at start.
#
#   deploy/host-credentials.sh           serve them on vsock port CREDENTIALS_VSOCK_PORT (8002)
#   deploy/host-credentials.sh --print   print what each connection gets, once
#
# Each connection gets fresh credentials from IMDSv2 as three lines NAME=value. They are
# not a secret kept from the host (the host holds them already): what keeps the sealing key
# inside the enclave is the KMS key policy's PCR conditions. Any enclave on this instance
# may connect; it learns nothing a process on the host could not read from IMDS.
set -euo pipefail

die() { printf 'host-credentials: %s\n' "$*" >&2; exit 1; }

# IMDS is overridable only so that the script can be exercised off EC2.
IMDS="${IMDS:-http://169.254.169.254}"
CREDENTIALS_VSOCK_PORT="${CREDENTIALS_VSOCK_PORT:-8002}"

# Every step checks its own result: `set -e` does not apply inside a function called as
# `print_credentials || ...`.
print_credentials() {
  local token role json
  token="$(curl -fsS -X PUT "$IMDS/latest/api/token" -H 'X-aws-ec2-metadata-token-ttl-seconds: 60')" \
    || { echo "host-credentials: IMDS is unreachable" >&2; return 1; }
  role="$(curl -fsS -H "X-aws-ec2-metadata-token: $token" "$IMDS/latest/meta-data/iam/security-credentials/")" \
    || { echo "host-credentials: the instance has no IAM role (instance profile)" >&2; return 1; }
  role="${role%%$'\n'*}"
  json="$(curl -fsS -H "X-aws-ec2-metadata-token: $token" "$IMDS/latest/meta-data/iam/security-credentials/$role")" \
    || { echo "host-credentials: IMDS gave no credentials for role $role" >&2; return 1; }
  jq -er '
    if (.AccessKeyId and .SecretAccessKey and .Token) then
      "AWS_ACCESS_KEY_ID=\(.AccessKeyId)\nAWS_SECRET_ACCESS_KEY=\(.SecretAccessKey)\nAWS_SESSION_TOKEN=\(.Token)"
    else error("IMDS answered without credentials") end' <<<"$json"
}

case "${1:-}" in
  --print)
    print_credentials
    ;;
  "")
    [[ "$CREDENTIALS_VSOCK_PORT" =~ ^[0-9]+$ ]] || die "CREDENTIALS_VSOCK_PORT must be a number"
    self="$(readlink -f "$0")"
    # socat splits EXEC's command on spaces and treats : , ! specially.
    [[ "$self" =~ ^[A-Za-z0-9/._-]+$ ]] || die "move this script to a path without spaces or punctuation ($self)"
    print_credentials >/dev/null || die "cannot read the instance role's credentials from IMDS"
    printf 'host-credentials: serving on vsock port %s\n' "$CREDENTIALS_VSOCK_PORT" >&2
    exec socat "VSOCK-LISTEN:${CREDENTIALS_VSOCK_PORT},fork" "EXEC:${self} --print"
    ;;
  *)
    die "usage: $0 [--print]"
    ;;
esac
