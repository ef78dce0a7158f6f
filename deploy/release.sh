#!/usr/bin/env bash
# Builds a release of the enclave as reproducibly as this repository allows, and writes the
# signed manifest of its PCRs that clients pin (deploy/README.md, "3. Build a release").
#
#   deploy/release.sh --lock    (needs network and Docker; run it on the build machine when
#                               the pins should move, then push the commit it makes)
#       resolves the base images' digests and a Debian snapshot into deploy/base-images.lock,
#       kmstool's sources to commits in deploy/kmstool/sources.lock (and the crates of its
#       nsm-api in deploy/kmstool/nsm-api.Cargo.lock), nsm-attest's crates in
#       deploy/nsm-attest/Cargo.lock, and commits these four files.
#   deploy/release.sh --tag <name> --key <operator.pem> [--image-env <file>]
#                     [--sign-cert <pem> --sign-key <pem>] [--out-dir <dir>] [--dry-run]
#
# A release: from a clean checkout, `docker buildx build` with every base image by digest,
# Debian packages from one snapshot, npm's lockfile (npm ci), Cargo.lock (cargo --locked),
# file times clamped to the commit's time (SOURCE_DATE_EPOCH, rewrite-timestamp); then
# `nitro-cli build-enclave` (signed with --sign-cert/--sign-key, which adds PCR8), then
# `release-manifest` signs PCR0, 1, 2 (and 8) with the operator key, recording the commit,
# the base images, every lock file's hash, the hash of the build context's file listing
# (context-<tag>.txt, published beside the manifest) and the nitro-cli version, which decides
# the kernel and init measured into PCR1. The output goes to releases/<tag>/, outside the
# build context, so one release never becomes an input of the next. Someone else who builds the
# same commit with the same lock files should get the same PCRs, and can compare them with
# the manifest's; what still differs between two builds is listed in deploy/README.md.
#
# --image-env holds the image's configuration (build arguments, measured, never secret):
# KMS_KEY_ID, AWS_REGION, OPERATOR_PUBKEY, MODEL_BASE_URL, EMBEDDING_MODEL, API_KEYS_BLOB,
# API_KEYS_POLL_SECONDS, API_KEYS_FILE,
# ALLOW_OPEN, MODEL_API_KEY_CIPHERTEXT_FILE, LOG_LEVEL, as NAME=value lines.
# --dry-run checks everything and prints the commands instead of running them.
set -euo pipefail

die() { printf 'release: %s\n' "$*" >&2; exit "${2:-1}"; }
usage() { die "$1 (see the comment at the top of $0)" 2; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE_IMAGES_LOCK="${BASE_IMAGES_LOCK:-$repo/deploy/base-images.lock}"
CARGO_LOCK="${CARGO_LOCK:-$repo/deploy/nsm-attest/Cargo.lock}"
KMSTOOL_LOCK="${KMSTOOL_LOCK:-$repo/deploy/kmstool/sources.lock}"
NODE="${NODE:-node}"
NITRO_CLI="${NITRO_CLI:-nitro-cli}"
# `git ls-remote` resolves kmstool's tags; a stand-in may answer for it (the tests).
LS_REMOTE_GIT="${LS_REMOTE_GIT:-git}"

mode=release tag="" key="" image_env="$repo/deploy/build/image.env" sign_cert="" sign_key=""
out_dir="" dry_run=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --lock) mode=lock; shift; continue ;;
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
BASE_IMAGES_LOCK="$(absolute "$BASE_IMAGES_LOCK")" CARGO_LOCK="$(absolute "$CARGO_LOCK")" KMSTOOL_LOCK="$(absolute "$KMSTOOL_LOCK")"

run() {
  if [[ $dry_run -eq 1 ]]; then printf '+ %s\n' "$*"; else "$@"; fi
}

# The lock file: NAME=value lines, parsed strictly (never sourced: it is data).
declare -A lock=()
read_lock() {
  [[ -f "$BASE_IMAGES_LOCK" ]] || die "no $BASE_IMAGES_LOCK: run deploy/release.sh --lock on a machine with Docker and network (it commits the lock files)"
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

if [[ $mode == lock ]]; then
  cd "$repo"
  {
    printf '# Base images by digest and the Debian snapshot of deploy/enclave.Dockerfile,\n'
    printf '# written by deploy/release.sh --lock on %s.\n' "$(date -u +%Y-%m-%d)"
    for pair in NODE_BUILD_IMAGE=node:20-bookworm NODE_RUN_IMAGE=node:20-bookworm-slim RUST_IMAGE=rust:1-bookworm; do
      ref="${pair#*=}"
      docker pull --quiet "$ref" >/dev/null
      digest="$(docker image inspect --format '{{index .RepoDigests 0}}' "$ref")" || die "cannot read the digest of $ref"
      printf '%s=%s@%s\n' "${pair%%=*}" "$ref" "${digest#*@}"
    done
    printf 'DEBIAN_SNAPSHOT=%s\n' "$(date -u +%Y%m%dT000000Z)"
  } >"$BASE_IMAGES_LOCK.tmp"
  mv "$BASE_IMAGES_LOCK.tmp" "$BASE_IMAGES_LOCK"
  read_lock

  # kmstool's sources: each tag of deploy/kmstool/sources.txt to the commit it names today.
  {
    printf '# Written by deploy/release.sh --lock from sources.txt: <name> <URL> <tag> <commit>.\n'
    while read -r name url ref rest; do
      [[ -z "$name" || "$name" == \#* ]] && continue
      [[ -z "$rest" ]] || die "deploy/kmstool/sources.txt: extra fields on the line of $name"
      # An annotated tag lists its object and, as <tag>^{}, the commit it points to.
      commit="$("$LS_REMOTE_GIT" ls-remote "$url" "refs/tags/$ref" "refs/tags/$ref^{}" | awk '{ c = $1 } END { print c }')"
      [[ "$commit" =~ ^[0-9a-f]{40}$ ]] || die "$url has no tag $ref"
      printf '%s %s %s %s\n' "$name" "$url" "$ref" "$commit"
    done <"$repo/deploy/kmstool/sources.txt"
  } >"$KMSTOOL_LOCK.tmp"
  mv "$KMSTOOL_LOCK.tmp" "$KMSTOOL_LOCK"
  nsm_api="$(awk '$1 == "aws-nitro-enclaves-nsm-api" { print $2, $4 }' "$KMSTOOL_LOCK")"
  [[ -n "$nsm_api" ]] || die "deploy/kmstool/sources.txt lists no aws-nitro-enclaves-nsm-api"
  read -r nsm_url nsm_commit <<<"$nsm_api"
  docker run --rm "${lock[RUST_IMAGE]}" sh -ec \
    "git init -q /n && cd /n && git fetch -q --depth 1 $nsm_url $nsm_commit && git checkout -q FETCH_HEAD && cargo generate-lockfile -q && cat Cargo.lock" \
    >"$(dirname "$KMSTOOL_LOCK")/nsm-api.Cargo.lock"
  docker run --rm -v "$repo/deploy/nsm-attest:/src" -w /src "${lock[RUST_IMAGE]}" cargo generate-lockfile
  [[ -s "$CARGO_LOCK" ]] || die "cargo wrote no $CARGO_LOCK"

  git add -- "$BASE_IMAGES_LOCK" "$KMSTOOL_LOCK" "$(dirname "$KMSTOOL_LOCK")/nsm-api.Cargo.lock" "$CARGO_LOCK"
  if git diff --cached --quiet -- "$BASE_IMAGES_LOCK" "$KMSTOOL_LOCK" "$(dirname "$KMSTOOL_LOCK")/nsm-api.Cargo.lock" "$CARGO_LOCK"; then
    printf 'release: the lock files are unchanged\n' >&2
  else
    git commit -q -m "deploy: pin base images, Debian snapshot ${lock[DEBIAN_SNAPSHOT]}, kmstool sources and crates (release.sh --lock)" \
      -- "$BASE_IMAGES_LOCK" "$KMSTOOL_LOCK" "$(dirname "$KMSTOOL_LOCK")/nsm-api.Cargo.lock" "$CARGO_LOCK"
    printf 'release: committed the lock files (%s); push it\n' "$(git rev-parse --short HEAD)" >&2
  fi
  exit 0
fi

# shellcheck source=deploy/require-x86_64.sh
source "$repo/deploy/require-x86_64.sh"
require_x86_64 release

[[ -n "$tag" ]] || usage "--tag is required"
[[ "$tag" =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ ]] || usage "--tag must be letters, digits, . _ - (got '$tag')"
[[ -n "$key" ]] || usage "--key is required: the operator's private key, whose public half is OPERATOR_PUBKEY"
[[ -f "$key" ]] || die "cannot read --key $key"
[[ -z "$sign_cert" && -z "$sign_key" || -n "$sign_cert" && -n "$sign_key" ]] || usage "--sign-cert and --sign-key go together"
read_lock
[[ -f "$CARGO_LOCK" ]] || die "no $CARGO_LOCK: run deploy/release.sh --lock (without it cargo resolves crates anew on each build)"
[[ -f "$KMSTOOL_LOCK" ]] || die "no $KMSTOOL_LOCK: run deploy/release.sh --lock (kmstool is built from the commits it names)"
[[ -f "$image_env" ]] || die "no $image_env: the image's configuration as NAME=value lines (see the top of $0)"

build_args=() settings=()
while IFS= read -r line || [[ -n "$line" ]]; do
  [[ -z "$line" || "$line" == \#* ]] && continue
  [[ "$line" =~ ^(KMS_KEY_ID|AWS_REGION|OPERATOR_PUBKEY|MODEL_BASE_URL|EMBEDDING_MODEL|API_KEYS_BLOB|API_KEYS_POLL_SECONDS|API_KEYS_FILE|ALLOW_OPEN|MODEL_API_KEY_CIPHERTEXT_FILE|LOG_LEVEL)=(.*)$ ]] \
    || die "$image_env: '$line' is not one of the image's settings (a secret never goes here: MODEL_API_KEY travels KMS-encrypted)"
  build_args+=(--build-arg "$line")
  settings+=("$line")
done <"$image_env"
# The Dockerfile's own checks, before an hour of building (deploy/check-image-config.sh).
env "${settings[@]}" "$repo/deploy/check-image-config.sh" || exit 1

cd "$repo"
commit="$(git rev-parse HEAD)"
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
  # A dirty tree is not the commit the manifest would name.
  [[ $dry_run -eq 1 ]] || die "the working tree has uncommitted changes; a release is built from a commit"
  printf 'release: warning: uncommitted changes (ignored for --dry-run)\n' >&2
fi
source_date_epoch="$(git log -1 --format=%ct)"
[[ -n "$out_dir" ]] || out_dir="$repo/releases/$tag"
image="agent-enclave:$tag"
eif="$out_dir/agent-enclave-$tag.eif"
measurements="$out_dir/measurements-$tag.json"
manifest="$out_dir/release-manifest-$tag.json"
context="$out_dir/context-$tag.txt"
sha256() { sha256sum "$1" | cut -d' ' -f1; }

# What the image is built from: every file of the build context with its hash. If the
# output directory were inside the context, this release would be an input of the next.
listing="$("$NODE" "$repo/dist/scripts/build-context.js" --root "$repo")" || die "cannot list the build context"
case "$out_dir/" in
  "$repo"/*)
    "$NODE" "$repo/dist/scripts/build-context.js" --root "$repo" --includes "${out_dir#"$repo"/}/agent-enclave-$tag.eif" \
      && die "--out-dir $out_dir is inside the build context (deploy/enclave.Dockerfile.dockerignore): the release would become an input of the next" ;;
esac
context_sha256="$(printf '%s\n' "$listing" | sha256sum | cut -d' ' -f1)"
nitro_cli_version="$("$NITRO_CLI" --version 2>/dev/null | head -n 1)" || true
[[ -n "$nitro_cli_version" ]] || die "cannot read \`$NITRO_CLI --version\`: the nitro-cli version decides PCR1 and goes into the manifest"

run mkdir -p "$out_dir"
if [[ $dry_run -eq 1 ]]; then printf '+ (the build context listing) > %s\n' "$context"; else printf '%s\n' "$listing" >"$context"; fi
run docker buildx build -f deploy/enclave.Dockerfile \
  --build-arg "NODE_BUILD_IMAGE=${lock[NODE_BUILD_IMAGE]}" --build-arg "NODE_RUN_IMAGE=${lock[NODE_RUN_IMAGE]}" \
  --build-arg "RUST_IMAGE=${lock[RUST_IMAGE]}" --build-arg "DEBIAN_SNAPSHOT=${lock[DEBIAN_SNAPSHOT]}" \
  --build-arg "SOURCE_DATE_EPOCH=$source_date_epoch" "${build_args[@]}" \
  --output "type=docker,name=$image,rewrite-timestamp=true" .

signing=()
[[ -z "$sign_cert" ]] || signing=(--signing-certificate "$sign_cert" --private-key "$sign_key")
if [[ $dry_run -eq 1 ]]; then
  printf '+ %s build-enclave --docker-uri %s --output-file %s %s > %s\n' "$NITRO_CLI" "$image" "$eif" "${signing[*]}" "$measurements"
else
  "$NITRO_CLI" build-enclave --docker-uri "$image" --output-file "$eif" "${signing[@]}" >"$measurements"
fi

# No hash of the .eif: its metadata carries the time it was built, so nobody could
# reproduce it. The PCRs are what a rebuild is compared on.
run "$NODE" "$repo/dist/scripts/release-manifest.js" --key "$key" --release "$tag" --measurements "$measurements" \
  --image "node_build_image=${lock[NODE_BUILD_IMAGE]}" \
  --image "node_run_image=${lock[NODE_RUN_IMAGE]}" --image "rust_image=${lock[RUST_IMAGE]}" \
  --image "debian_snapshot=${lock[DEBIAN_SNAPSHOT]}" --image "signed=$([[ -n "$sign_cert" ]] && echo yes || echo no)" \
  --image "nitro_cli_version=$nitro_cli_version" \
  --source "commit=$commit" --source "source_date_epoch=$source_date_epoch" \
  --source "context_sha256=$context_sha256" \
  --source "package_lock_sha256=$(sha256 package-lock.json)" --source "cargo_lock_sha256=$(sha256 "$CARGO_LOCK")" \
  --source "kmstool_sources_lock_sha256=$(sha256 "$KMSTOOL_LOCK")" \
  --source "image_env_sha256=$(sha256 "$image_env")" --out "$manifest"

printf 'release: %s built. Next: put PCR0/1/2 from %s in the KMS key policies (deploy/sealing.md),\n' "$tag" "$measurements" >&2
printf 'release: publish %s, %s and %s beside the release, and deploy %s.\n' "$manifest" "$context" "$image_env" "$eif" >&2
