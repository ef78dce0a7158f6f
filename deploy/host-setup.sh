#!/usr/bin/env bash
# Prepares a fresh Amazon Linux 2023 parent instance (deploy/README.md, "1. The parent
# instance"): packages, the service user, and the Nitro Enclaves allocator's reservation.
# Run as root, once; again to change the reservation.
#
#   deploy/host-setup.sh [--cpus 2] [--memory-mib 6144] [--user agent] [--dry-run]
#
# --cpus and --memory-mib are what the allocator takes away from the parent at boot for
# the enclave (nitro-cli run-enclave must then ask for no more). --dry-run prints what it
# would do, the allocator file included, and changes nothing.
set -euo pipefail

die() { printf 'host-setup: %s\n' "$*" >&2; exit 2; }

cpus=2 memory_mib=6144 user=agent dry_run=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) dry_run=1; shift; continue ;;
    --cpus|--memory-mib|--user) [[ $# -ge 2 ]] || die "$1 needs a value" ;;
    *) die "unknown option $1 (usage: $0 [--cpus n] [--memory-mib n] [--user name] [--dry-run])" ;;
  esac
  case "$1" in
    --cpus) cpus="$2" ;;
    --memory-mib) memory_mib="$2" ;;
    --user) user="$2" ;;
  esac
  shift 2
done

# The enclave gets whole cores (both threads of each), never the parent's core 0: so an even
# count, and the parent keeps at least one core for the proxy, host store and bridges.
[[ "$cpus" =~ ^[0-9]+$ && "$cpus" -ge 2 && $((cpus % 2)) -eq 0 ]] || die "--cpus must be an even number of at least 2 (whole cores)"
[[ "$memory_mib" =~ ^[0-9]+$ && "$memory_mib" -ge 1024 ]] || die "--memory-mib must be a number of at least 1024"
[[ "$user" =~ ^[a-z_][a-z0-9_-]{0,31}$ ]] || die "--user must be a plain user name"
# shellcheck source=deploy/require-x86_64.sh
source "$(dirname "${BASH_SOURCE[0]}")/require-x86_64.sh"
require_x86_64 host-setup

run() {
  if [[ $dry_run -eq 1 ]]; then printf '+ %s\n' "$*"; else "$@"; fi
}

allocator_yaml() {
  cat <<YAML
# Written by deploy/host-setup.sh. Reserved at boot by nitro-enclaves-allocator.service
# and taken away from the parent: the enclave's memory (MiB) and vCPUs (whole cores).
---
memory_mib: ${memory_mib}
cpu_count: ${cpus}
YAML
}

if [[ $dry_run -eq 0 ]]; then
  [[ $EUID -eq 0 ]] || die "run as root (sudo)"
  grep -q 'Amazon Linux' /etc/os-release 2>/dev/null || die "this script is for Amazon Linux 2023; see deploy/README.md for the packages"
  online="$(nproc --all)"
  (( online - cpus >= 2 )) || die "the instance has $online vCPUs; the enclave's $cpus would leave the parent fewer than 2 (take an instance with at least $((cpus + 2)))"
  total_mib=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 ))
  (( total_mib - memory_mib >= 2048 )) || die "the instance has $total_mib MiB; the enclave's $memory_mib would leave the parent less than 2 GiB"
fi

# nitro-cli and vsock-proxy; Node 20 (AL2023 names it nodejs20, with node-20 and npm-20);
# a C++ compiler, make and python3 for hnswlib-node's native build; socat for the bridges;
# jq and curl for the scripts; docker and git to build the enclave image.
run dnf install -y aws-nitro-enclaves-cli aws-nitro-enclaves-cli-devel nodejs20 nodejs20-npm \
  gcc-c++ make python3 socat jq curl git docker
if ! id -u "$user" >/dev/null 2>&1; then run useradd --system --create-home --shell /sbin/nologin "$user"; fi
# ne: may use /dev/nitro_enclaves (nitro-cli); docker: may build images.
run usermod -aG ne "$user"
if id -u ec2-user >/dev/null 2>&1 || [[ $dry_run -eq 1 ]]; then run usermod -aG ne,docker ec2-user; fi

if [[ $dry_run -eq 1 ]]; then
  printf '+ write /etc/nitro_enclaves/allocator.yaml:\n'
  allocator_yaml
else
  allocator_yaml >/etc/nitro_enclaves/allocator.yaml
fi
# restart, not only start: a changed reservation takes effect when the allocator runs again.
run systemctl enable nitro-enclaves-allocator.service
run systemctl restart nitro-enclaves-allocator.service
# AWS's KMS proxy: vsock port 8000 to kms.<this region>.amazonaws.com, allowlisted in
# /etc/nitro_enclaves/vsock-proxy.yaml (installed by aws-nitro-enclaves-cli).
run systemctl enable --now nitro-enclaves-vsock-proxy.service
run systemctl enable --now docker
printf 'host-setup: done; log in again for the ne and docker groups. Next: deploy/README.md, step 2.\n' >&2
