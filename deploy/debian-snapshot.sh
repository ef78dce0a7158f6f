#!/bin/sh
# Points apt at snapshot.debian.org as of $1 (e.g. 20250101T000000Z), so that the packages
# an image installs are the same on every build (deploy/release.sh). Without an argument it
# changes nothing: the mirrors of the day. Runs inside the Debian build stages.
set -eu
snapshot="${1:-}"
[ -n "$snapshot" ] || exit 0
case "$snapshot" in
  [0-9][0-9][0-9][0-9][0-1][0-9][0-3][0-9]T[0-2][0-9][0-5][0-9][0-5][0-9]Z) ;;
  *) echo "debian-snapshot: expected a time like 20250101T000000Z, got '$snapshot'" >&2; exit 2 ;;
esac
# shellcheck source=/dev/null
codename="$(. /etc/os-release && echo "$VERSION_CODENAME")"
rm -f /etc/apt/sources.list.d/debian.sources
# check-valid-until=no: a snapshot's Release files have long expired by the time it is used.
cat >/etc/apt/sources.list <<SOURCES
deb [check-valid-until=no] http://snapshot.debian.org/archive/debian/${snapshot} ${codename} main
deb [check-valid-until=no] http://snapshot.debian.org/archive/debian/${snapshot} ${codename}-updates main
deb [check-valid-until=no] http://snapshot.debian.org/archive/debian-security/${snapshot} ${codename}-security main
SOURCES
