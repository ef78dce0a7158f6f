#!/bin/sh
# The enclave image's settings, checked where a mistake is still cheap: by deploy/release.sh
# on image.env before it builds, and by deploy/enclave.Dockerfile during the build (with
# --files, when the image's files are in place). A production enclave's console cannot be
# read, so a setting refused at start would show only as an enclave that exits.
#
#   KMS_KEY_ID=… AWS_REGION=… OPERATOR_PUBKEY=… [API_KEYS_BLOB=… | API_KEYS_FILE=… | ALLOW_OPEN=1] \
#     check-image-config.sh [--files]
set -eu
die() { echo "enclave.Dockerfile: $*" >&2; exit 1; }
files=0
[ "${1:-}" = --files ] && files=1

[ -n "${KMS_KEY_ID:-}" ] || die "--build-arg KMS_KEY_ID is required (deploy/sealing.md)"
case "$KMS_KEY_ID" in
  arn:aws*:kms:*:key/*) ;;
  *) die "KMS_KEY_ID must be the key's ARN, not an alias or a bare id (deploy/sealing.md; got '$KMS_KEY_ID')" ;;
esac
[ -n "${AWS_REGION:-}" ] || die "--build-arg AWS_REGION is required (the region of KMS_KEY_ID)"
[ -n "${OPERATOR_PUBKEY:-}" ] || die "--build-arg OPERATOR_PUBKEY is required: without it the enclave would make an operator key pair and keep it on the host"
# The keys: from the host store, signed by the operator (the default, also when image.env
# leaves API_KEYS_BLOB out), or none at all.
API_KEYS_BLOB="${API_KEYS_BLOB-api-keys.signed.json}"
if [ -n "$API_KEYS_BLOB" ] && [ -n "${API_KEYS_FILE:-}" ]; then
  die "API_KEYS_BLOB and API_KEYS_FILE are two sources of keys: keep API_KEYS_BLOB (keys signed by the operator, in the host store)"
fi
if [ -z "$API_KEYS_BLOB" ] && [ -z "${API_KEYS_FILE:-}" ] && [ "${ALLOW_OPEN:-0}" != 1 ]; then
  die "no API keys: keep API_KEYS_BLOB=api-keys.signed.json (deploy/README.md, \"API keys\"), or set ALLOW_OPEN=1 to run without keys"
fi
[ "$files" -eq 1 ] || exit 0

if [ -n "${API_KEYS_FILE:-}" ]; then
  [ -f "$API_KEYS_FILE" ] || die "$API_KEYS_FILE missing (a key change would then be a new image: API_KEYS_BLOB is the usual way)"
fi
if [ -n "${MODEL_API_KEY_CIPHERTEXT_FILE:-}" ]; then
  [ -f "$MODEL_API_KEY_CIPHERTEXT_FILE" ] || die "$MODEL_API_KEY_CIPHERTEXT_FILE missing"
fi
[ -f /usr/local/bin/kmstool_enclave_cli ] || die "kmstool_enclave_cli missing (the kmstool stage)"
[ -f /usr/local/lib/libnsm.so ] || die "libnsm.so missing (the kmstool stage)"
model="${EMBEDDING_MODEL:-static}"
[ "$model" = static ] || [ -f "/opt/agent/models/$model/model.json" ] || die "EMBEDDING_MODEL=$model: no deploy/build/models/$model/model.json"
