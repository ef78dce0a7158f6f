#!/usr/bin/env bash
# Builds a release of the enclave as reproducibly as this repository allows, and writes the
# signed manifest of its PCRs that clients pin (deploy/README.md, "3. Build a release").
#
#   deploy/release.sh --pin-base-images          resolve the base images' digests and a Debian
#                                                snapshot into deploy/base-images.lock (commit it)
#   deploy/release.sh --lock-crates              write deploy/nsm-attest/Cargo.lock with the pinned
#                                                Rust image (commit it)
#   deploy/release.sh --tag <name> --key <operator.pem> [--image-env <file>]
#                     [--sign-cert <pem> --sign-key <pem>] [--out-dir <dir>] [--dry-run]
#
# A release: from a clean checkout, `docker buildx build` with every base image by digest,
# Debian packages from one snapshot, npm's lockfile (npm ci), Cargo.lock (cargo --locked),
# file times clamped to the commit's time (SOURCE_DATE_EPOCH, rewrite-timestamp); then
# `nitro-cli build-enclave` (signed with --sign-cert/--sign-key, which adds PCR8), then
# `release-manifest` signs PCR0, 1, 2 (and 8) with the operator key, recording the commit,
# the lockfiles' hashes, the base images and the .eif's hash. Someone else who builds the
# same commit with the same lock files should get the same PCRs, and can compare them with
# the manifest's; what still differs between two builds is listed in deploy/README.md.
#
# --image-env holds the image's configuration (build arguments, measured, never secret):
# KMS_KEY_ID, AWS_REGION, OPERATOR_PUBKEY, MODEL_BASE_URL, EMBEDDING_MODEL, API_KEYS_FILE,
# ALLOW_OPEN, MODEL_API_KEY_CIPHERTEXT_FILE, LOG_LEVEL, as NAME=value lines.
# --dry-run checks everything and prints the commands instead of running them.
set -euo pipefail

die() { printf 'release: %s\n' "$*" >&2; exit "${2:-1}"; }
usage() { die "$1 (see the comment at the top of $0)" 2; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE_IMAGES_LOCK="${BASE_IMAGES_LOCK:-$repo/deploy/base-images.lock}"
CARGO_LOCK="${CARGO_LOCK:-$repo/deploy/nsm-attest/Cargo.lock}"
NODE="${NODE:-node}"

mode=release tag="" key="" image_env="$repo/deploy/build/image.env" sign_cert="" sign_key=""
out_dir="$repo/deploy/build/release" dry_run=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pin-base-images) mode=pin; shift; continue ;;
    --lock-crates) mode=crates; shift; continue ;;
    --dry-run) dry_run=1; shift; continue ;;
    --tag|--key|--image-env|--sign-cert|--sign-key|--out-dir) [[ $# -ge 2 ]] || usage "$1 needs a value" ;;
    *) usage "unknown option $1" ;;
  esac
  case "$1" in
    --tag) tag="$2" ;;
    --key) key="$2" ;;
    --image-env) image_env="$2" ;;
    --sign-cert) sign_cert="$2" ;;
    --sign-key) sign_key="$2" ;;
    --out-dir) out_dir="$2" ;;
  esac
  shift 2
done

# The build runs from the repository root; paths given relative to where we were stay valid.
absolute() { if [[ -z "$1" || "$1" == /* ]]; then printf '%s' "$1"; else printf '%s/%s' "$PWD" "$1"; fi; }
key="$(absolute "$key")" image_env="$(absolute "$image_env")" out_dir="$(absolute "$out_dir")"
sign_cert="$(absolute "$sign_cert")" sign_key="$(absolute "$sign_key")"
BASE_IMAGES_LOCK="$(absolute "$BASE_IMAGES_LOCK")" CARGO_LOCK="$(absolute "$CARGO_LOCK")"

run() {
  if [[ $dry_run -eq 1 ]]; then printf '+ %s\n' "$*"; else "$@"; fi
}

# The lock file: NAME=value lines, parsed strictly (never sourced: it is data).
declare -A lock=()
read_lock() {
  [[ -f "$BASE_IMAGES_LOCK" ]] || die "no $BASE_IMAGES_LOCK: run deploy/release.sh --pin-base-images on a machine with Docker, and commit it"
  local line
  while IFS= read -r line || [[ -n "$line" ]]; do
    [[ -z "$line" || "$line" == \#* ]] && continue
    [[ "$line" =~ ^(NODE_BUILD_IMAGE|NODE_RUN_IMAGE|RUST_IMAGE|DEBIAN_SNAPSHOT)=([^[:space:]]+)$ ]] \
      || die "$BASE_IMAGES_LOCK: unexpected line '$line'"
    lock["${BASH_REMATCH[1]}"]="${BASH_REMATCH[2]}"
  done <"$BASE_IMAGES_LOCK"
  local name
  for name in NODE_BUILD_IMAGE NODE_RUN_IMAGE RUST_IMAGE; do
    # A tag alone names whatever the registry serves today; only a digest names bytes.
    [[ "${lock[$name]:-}" =~ ^[a-z0-9./_-]+(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}$ ]] \
      || die "$BASE_IMAGES_LOCK: $name must be <image>[:tag]@sha256:<digest> (got '${lock[$name]:-}')"
  done
  [[ "${lock[DEBIAN_SNAPSHOT]:-}" =~ ^[0-9]{8}T[0-9]{6}Z$ ]] || die "$BASE_IMAGES_LOCK: DEBIAN_SNAPSHOT must be like 20250101T000000Z"
}

case "$mode" in
  pin)
    {
      printf '# Base images by digest and the Debian snapshot of deploy/enclave.Dockerfile,\n'
      printf '# written by deploy/release.sh --pin-base-images on %s. Commit this file.\n' "$(date -u +%Y-%m-%d)"
      for pair in NODE_BUILD_IMAGE=node:20-bookworm NODE_RUN_IMAGE=node:20-bookworm-slim RUST_IMAGE=rust:1-bookworm; do
        ref="${pair#*=}"
        run docker pull --quiet "$ref" >/dev/null
        digest="$(docker image inspect --format '{{index .RepoDigests 0}}' "$ref")" || die "cannot read the digest of $ref"
        printf '%s=%s@%s\n' "${pair%%=*}" "$ref" "${digest#*@}"
      done
      printf 'DEBIAN_SNAPSHOT=%s\n' "$(date -u +%Y%m%dT000000Z)"
    } >"$BASE_IMAGES_LOCK.tmp"
    mv "$BASE_IMAGES_LOCK.tmp" "$BASE_IMAGES_LOCK"
    printf 'release: wrote %s\n' "$BASE_IMAGES_LOCK" >&2
    exit 0
    ;;
  crates)
    read_lock
    run docker run --rm -v "$repo/deploy/nsm-attest:/src" -w /src "${lock[RUST_IMAGE]}" cargo generate-lockfile
    printf 'release: wrote deploy/nsm-attest/Cargo.lock; commit it\n' >&2
    exit 0
    ;;
esac

[[ -n "$tag" ]] || usage "--tag is required"
[[ "$tag" =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ ]] || usage "--tag must be letters, digits, . _ - (got '$tag')"
[[ -n "$key" ]] || usage "--key is required: the operator's private key, whose public half is OPERATOR_PUBKEY"
[[ -f "$key" ]] || die "cannot read --key $key"
[[ -z "$sign_cert" && -z "$sign_key" || -n "$sign_cert" && -n "$sign_key" ]] || usage "--sign-cert and --sign-key go together"
read_lock
[[ -f "$CARGO_LOCK" ]] || die "no $CARGO_LOCK: run deploy/release.sh --lock-crates, and commit it (without it cargo resolves crates anew on each build)"
[[ -f "$image_env" ]] || die "no $image_env: the image's configuration as NAME=value lines (see the top of $0)"

build_args=()
while IFS= read -r line || [[ -n "$line" ]]; do
  [[ -z "$line" || "$line" == \#* ]] && continue
  [[ "$line" =~ ^(KMS_KEY_ID|AWS_REGION|OPERATOR_PUBKEY|MODEL_BASE_URL|EMBEDDING_MODEL|API_KEYS_FILE|ALLOW_OPEN|MODEL_API_KEY_CIPHERTEXT_FILE|LOG_LEVEL)=(.*)$ ]] \
    || die "$image_env: '$line' is not one of the image's settings (a secret never goes here: MODEL_API_KEY travels KMS-encrypted)"
  build_args+=(--build-arg "$line")
done <"$image_env"

cd "$repo"
commit="$(git rev-parse HEAD)"
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
  # A dirty tree is not the commit the manifest would name.
  [[ $dry_run -eq 1 ]] || die "the working tree has uncommitted changes; a release is built from a commit"
  printf 'release: warning: uncommitted changes (ignored for --dry-run)\n' >&2
fi
source_date_epoch="$(git log -1 --format=%ct)"
image="agent-enclave:$tag"
eif="$out_dir/agent-enclave-$tag.eif"
measurements="$out_dir/measurements-$tag.json"
manifest="$out_dir/release-manifest-$tag.json"
sha256() { sha256sum "$1" | cut -d' ' -f1; }

run mkdir -p "$out_dir"
run docker buildx build -f deploy/enclave.Dockerfile \
  --build-arg "NODE_BUILD_IMAGE=${lock[NODE_BUILD_IMAGE]}" --build-arg "NODE_RUN_IMAGE=${lock[NODE_RUN_IMAGE]}" \
  --build-arg "RUST_IMAGE=${lock[RUST_IMAGE]}" --build-arg "DEBIAN_SNAPSHOT=${lock[DEBIAN_SNAPSHOT]}" \
  --build-arg "SOURCE_DATE_EPOCH=$source_date_epoch" "${build_args[@]}" \
  --output "type=docker,name=$image,rewrite-timestamp=true" .

signing=()
[[ -z "$sign_cert" ]] || signing=(--signing-certificate "$sign_cert" --private-key "$sign_key")
if [[ $dry_run -eq 1 ]]; then
  printf '+ nitro-cli build-enclave --docker-uri %s --output-file %s %s > %s\n' "$image" "$eif" "${signing[*]}" "$measurements"
else
  nitro-cli build-enclave --docker-uri "$image" --output-file "$eif" "${signing[@]}" >"$measurements"
fi

eif_sha384="(the .eif's SHA-384)"
[[ $dry_run -eq 1 ]] || eif_sha384="$(sha384sum "$eif" | cut -d' ' -f1)"
run "$NODE" "$repo/dist/scripts/release-manifest.js" --key "$key" --release "$tag" --measurements "$measurements" \
  --image "eif_sha384=$eif_sha384" --image "node_build_image=${lock[NODE_BUILD_IMAGE]}" \
  --image "node_run_image=${lock[NODE_RUN_IMAGE]}" --image "rust_image=${lock[RUST_IMAGE]}" \
  --image "debian_snapshot=${lock[DEBIAN_SNAPSHOT]}" --image "signed=$([[ -n "$sign_cert" ]] && echo yes || echo no)" \
  --source "commit=$commit" --source "source_date_epoch=$source_date_epoch" \
  --source "package_lock_sha256=$(sha256 package-lock.json)" --source "cargo_lock_sha256=$(sha256 "$CARGO_LOCK")" \
  --source "image_env_sha256=$(sha256 "$image_env")" --out "$manifest"

printf 'release: %s built. Next: put PCR0/1/2 from %s in the KMS key policies (deploy/sealing.md),\n' "$tag" "$measurements" >&2
printf 'release: publish %s and %s beside the release, and deploy %s.\n' "$manifest" "$image_env" "$eif" >&2
