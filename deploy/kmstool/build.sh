#!/bin/sh
# Builds kmstool_enclave_cli and libnsm.so inside deploy/enclave.Dockerfile's kmstool stage,
# from exactly the commits of sources.lock (deploy/release.sh --lock writes it), so that
# these binaries are rebuilt by anyone who rebuilds the image instead of being copied in
# from somebody's disk. Leaves /out/kmstool_enclave_cli and /out/libnsm.so.
#
#   build.sh <sources.lock>     GIT=, CMAKE=, CARGO= may name stand-ins (the tests do)
set -eu

lock="${1:?usage: build.sh <sources.lock>}"
GIT="${GIT:-git}" CMAKE="${CMAKE:-cmake}" CARGO="${CARGO:-cargo}"
SRC="${SRC:-/src/kmstool}" OUT="${OUT:-/out}"
die() { echo "kmstool/build.sh: $*" >&2; exit 1; }

[ -f "$lock" ] || die "no $lock: run deploy/release.sh --lock (needs network) and commit deploy/kmstool/sources.lock"
nsm_cargo_lock="$(dirname "$lock")/nsm-api.Cargo.lock"
mkdir -p "$SRC" "$OUT"
count=0
while read -r name url tag commit rest; do
  case "$name" in ''|\#*) continue ;; esac
  [ -z "${rest:-}" ] || die "$lock: extra fields on the line of $name"
  printf '%s' "$commit" | grep -Eq '^[0-9a-f]{40}$' || die "$lock: $name $tag has no commit (got '${commit:-}')"
  case "$url" in https://github.com/*.git) ;; *) die "$lock: $name: $url is not a https://github.com/ repository" ;; esac
  dir="$SRC/$name"
  "$GIT" init -q "$dir"
  # By commit, not by tag: a tag can be moved to other code, a commit cannot.
  "$GIT" -C "$dir" fetch -q --depth 1 "$url" "$commit"
  "$GIT" -C "$dir" checkout -q FETCH_HEAD
  head="$("$GIT" -C "$dir" rev-parse HEAD)"
  [ "$head" = "$commit" ] || die "$name: fetched $head, but $lock says $commit"
  case "$name" in
    aws-nitro-enclaves-nsm-api)
      # The repository has no Cargo.lock of its own; ours (written by --lock) pins the crates.
      cp "$nsm_cargo_lock" "$dir/Cargo.lock" || die "no nsm-api.Cargo.lock beside $lock (deploy/release.sh --lock)"
      (cd "$dir" && "$CARGO" build --release --locked -p nsm-lib)
      install -m 0644 "$dir/target/release/libnsm.so" /usr/lib/libnsm.so
      install -m 0644 "$dir/target/release/nsm.h" /usr/include/nsm.h ;;
    *)
      extra=""
      [ "$name" = aws-c-io ] && extra="-DUSE_VSOCK=1"
      [ "$name" = json-c ] && extra="-DBUILD_SHARED_LIBS=OFF"
      # shellcheck disable=SC2086 # $extra is one flag or none
      "$CMAKE" -DCMAKE_PREFIX_PATH=/usr -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
        -DCMAKE_C_FLAGS="-ffile-prefix-map=$SRC=/src" $extra -GNinja -S "$dir" -B "$dir/build"
      "$CMAKE" --build "$dir/build" --target install ;;
  esac
  count=$((count + 1))
done <"$lock"
[ "$count" -gt 0 ] || die "$lock lists no sources"
install -m 0755 /usr/bin/kmstool_enclave_cli "$OUT/kmstool_enclave_cli"
install -m 0644 /usr/lib/libnsm.so "$OUT/libnsm.so"
