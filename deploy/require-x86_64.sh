#!/usr/bin/env bash
# Sourced by deploy/host-setup.sh and deploy/release.sh: refuses an aarch64 (Graviton)
# machine. The enclave's clock is kept by chronyd following the hypervisor's KVM PTP clock
# (/dev/ptp0, deploy/enclave-entrypoint.sh); the aarch64 enclave kernel nitro-cli ships has
# no PTP clock driver, so an enclave there drifts seconds a week with nothing to correct it,
# and sealed calls start failing once it lags by 30 s (deploy/README.md, "Time"). Use an x86_64
# instance (m6i, m5, c6i…). MACHINE_ARCH overrides `uname -m` (the tests).
require_x86_64() {
  local arch="${MACHINE_ARCH:-$(uname -m)}"
  if [[ "$arch" != x86_64 ]]; then
    printf '%s: this is %s; the enclave needs x86_64: the aarch64 (Graviton) enclave kernel has no PTP clock for chrony, so the enclave clock would drift uncorrected (deploy/README.md, "1. The parent instance"). Use an x86_64 instance such as m6i.xlarge.\n' "$1" "$arch" >&2
    exit 1
  fi
}
