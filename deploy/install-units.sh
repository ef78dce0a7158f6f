#!/usr/bin/env bash
# Renders the systemd units of every host-side piece (deploy/systemd/*.in-place templates)
# and the vsock-proxy allowlist, so that everything comes back after a reboot
# (deploy/README.md, "Start on boot").
#
#   deploy/install-units.sh --eif <path> --region <aws region> [options]
#
#   --eif <path>          the enclave image file (absolute path)
#   --region <region>     the AWS region of the KMS key (allowlist entry for KMS)
#   --model-url <url>     MODEL_BASE_URL of the image (https); adds the model's vsock-proxy
#   --cid <n>             enclave CID (default 16)
#   --cpus <n>            enclave vCPUs (default 2; even: whole cores)
#   --memory-mib <n>      enclave memory (default 6144)
#   --app-dir <dir>       checkout of the same commit, built (default: this repository)
#   --user <name>         user the services run as (default agent)
#   --data-dir <dir>      the host store's DATA_DIR (default /var/lib/agent-store)
#   --node <path>         Node 20 binary (default /usr/bin/node-20, Amazon Linux 2023's nodejs20)
#   --out <dir>           where the units go (default /etc/systemd/system)
#   --etc-dir <dir>       where the allowlist and env files go (default /etc/agent)
#
# It writes files only; enabling them is `systemctl daemon-reload && systemctl enable --now agent.target`.
set -euo pipefail

die() { printf 'install-units: %s\n' "$*" >&2; exit 2; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
app_dir="$(cd "$here/.." && pwd)"
eif="" region="" model_url="" cid=16 cpus=2 memory_mib=6144 user=agent
data_dir=/var/lib/agent-store node=/usr/bin/node-20 out=/etc/systemd/system etc_dir=/etc/agent
vsock_proxy=/usr/bin/vsock-proxy

while [[ $# -gt 0 ]]; do
  [[ $# -ge 2 ]] || die "$1 needs a value"
  case "$1" in
    --eif) eif="$2" ;;
    --region) region="$2" ;;
    --model-url) model_url="$2" ;;
    --cid) cid="$2" ;;
    --cpus) cpus="$2" ;;
    --memory-mib) memory_mib="$2" ;;
    --app-dir) app_dir="$2" ;;
    --user) user="$2" ;;
    --data-dir) data_dir="$2" ;;
    --node) node="$2" ;;
    --out) out="$2" ;;
    --etc-dir) etc_dir="$2" ;;
    *) die "unknown option $1 (see the comment at the top of $0)" ;;
  esac
  shift 2
done

# Values go into unit files and a sed replacement: allow only what a path or name needs,
# so nothing can add a directive or break out of the substitution.
safe_path() { [[ "$2" =~ ^/[A-Za-z0-9._/-]*$ ]] || die "$1 must be an absolute path of letters, digits, . _ / - (got '$2')"; }
[[ -n "$eif" ]] || die "--eif is required"
[[ -n "$region" ]] || die "--region is required (the KMS key's region)"
safe_path --eif "$eif"
safe_path --app-dir "$app_dir"
safe_path --data-dir "$data_dir"
safe_path --node "$node"
safe_path --etc-dir "$etc_dir"
[[ "$region" =~ ^[a-z]{2}(-[a-z]+)+-[0-9]$ ]] || die "--region must look like eu-west-1 (got '$region')"
[[ "$user" =~ ^[a-z_][a-z0-9_-]{0,31}$ ]] || die "--user must be a plain user name (got '$user')"
[[ "$cid" =~ ^[0-9]+$ && "$cid" -ge 4 ]] || die "--cid must be a number of at least 4 (0-2 are reserved, 3 is the parent)"
# An enclave takes whole cores: on instances with two threads per core, an even count.
[[ "$cpus" =~ ^[0-9]+$ && "$cpus" -ge 2 && $((cpus % 2)) -eq 0 ]] || die "--cpus must be an even number of at least 2 (whole cores)"
[[ "$memory_mib" =~ ^[0-9]+$ && "$memory_mib" -ge 1024 ]] || die "--memory-mib must be a number of at least 1024"

model_host="" model_port=""
if [[ -n "$model_url" ]]; then
  # The same rules as the enclave's entrypoint: https, a host name (not an address), a port.
  [[ "$model_url" =~ ^https://([A-Za-z0-9.-]+)(:([0-9]+))?(/.*)?$ ]] || die "--model-url must be https://<host name>[:port][/path] (got '$model_url')"
  model_host="${BASH_REMATCH[1]}"
  model_port="${BASH_REMATCH[3]:-443}"
  [[ ! "$model_host" =~ ^[0-9.]+$ ]] || die "--model-url needs a host name, not an address"
fi

mkdir -p "$out" "$etc_dir"

render() {
  local template="$1" target="$2"
  sed -e "s|@APP_DIR@|$app_dir|g" -e "s|@USER@|$user|g" -e "s|@DATA_DIR@|$data_dir|g" \
      -e "s|@NODE@|$node|g" -e "s|@ETC_DIR@|$etc_dir|g" -e "s|@EIF@|$eif|g" -e "s|@CID@|$cid|g" \
      -e "s|@CPUS@|$cpus|g" -e "s|@MEMORY_MIB@|$memory_mib|g" -e "s|@VSOCK_PROXY@|$vsock_proxy|g" \
      -e "s|@MODEL_HOST@|$model_host|g" -e "s|@MODEL_PORT@|$model_port|g" \
      -e "s|@MODEL_PROXY_WANT@|${model_host:+agent-model-proxy.service }|g" \
      -e "s|@MODEL_PROXY_AFTER@|${model_host:+agent-model-proxy.service}|g" \
      "$template" >"$target.tmp"
  # Collapse the space a missing model proxy leaves at the end of a line.
  sed -i -e 's/[[:space:]]*$//' "$target.tmp"
  mv "$target.tmp" "$target"
  printf 'install-units: wrote %s\n' "$target" >&2
}

for template in "$here"/systemd/*; do
  name="$(basename "$template")"
  [[ "$name" == agent-model-proxy.service && -z "$model_host" ]] && continue
  render "$template" "$out/$name"
done

# vsock-proxy refuses any destination not on its allowlist: KMS of the region, and the model.
{
  printf '# Written by deploy/install-units.sh: what vsock-proxy may connect to.\n'
  printf 'allowlist:\n'
  printf -- '- {address: kms.%s.amazonaws.com, port: 443}\n' "$region"
  [[ -z "$model_host" ]] || printf -- '- {address: %s, port: %s}\n' "$model_host" "$model_port"
} >"$etc_dir/vsock-proxy.yaml"
printf 'install-units: wrote %s\n' "$etc_dir/vsock-proxy.yaml" >&2

# The proxy's settings (docs/configuration.md); an existing file is the operator's and stays.
if [[ ! -e "$etc_dir/proxy.env" ]]; then
  cat >"$etc_dir/proxy.env" <<'ENV'
# The proxy's settings (docs/configuration.md). TLS ends here, on the host.
HOST=0.0.0.0
PORT=443
TLS_CERT=/etc/agent/tls.crt
TLS_KEY=/etc/agent/tls.key
ENV
  printf 'install-units: wrote %s (edit it: TLS_CERT, TLS_KEY)\n' "$etc_dir/proxy.env" >&2
fi
