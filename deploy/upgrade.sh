#!/usr/bin/env bash
# Moves a running service to a new release without losing its state (deploy/README.md,
# "Upgrade"). The PCRs come only from release manifests signed by the operator key.
#
#   deploy/upgrade.sh --key-id <KMS key ARN> --region <region> --operator-key <base64> \
#     --from <release-manifest-old.json> --to <release-manifest-new.json> \
#     --eif <new .eif> --cid <new CID> --cpus <n> --memory-mib <n> --url <https URL of the service> \
#     [--app-dir /opt/agent-service] [--work-dir <dir>] [--dry-run]
#
#   1. checks that the .eif on this host is the one the new manifest signs (nitro-cli describe-eif);
#   2. adds the new release's PCRs to the sealing key's policy (scripts/kms-policy.ts), the old
#      ones staying, so either image can unseal;
#   3. points agent-enclave.service at the new .eif on a second CID (a drop-in), stops the old
#      enclave and starts the new one, and points agent-host-bridge.service at the new CID.
#      The state stays where it is, in the host store (DATA_DIR): the new enclave gets the
#      same sealing key from KMS and replays the same sealed log. The old one is stopped
#      first because a store has one writer at a time;
#   4. waits until `agent-verify --manifest <new> --operator-key` accepts the service;
#      if it never does, goes back to the old release (its PCRs are still allowed) and exits 1;
#   5. removes the old release's PCRs from the policy.
#
# aws, nitro-cli, systemctl and agent-verify are looked up on PATH (AGENT_VERIFY overrides the
# last); SYSTEMD_DIR (default /etc/systemd/system) is where the drop-ins go.
set -euo pipefail

die() { printf 'upgrade: %s\n' "$*" >&2; exit "${2:-1}"; }
usage() { die "$1 (see the comment at the top of $0)" 2; }
say() { printf 'upgrade: %s\n' "$*" >&2; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SYSTEMD_DIR="${SYSTEMD_DIR:-/etc/systemd/system}"
NODE="${NODE:-node}"
VERIFY_ATTEMPTS="${VERIFY_ATTEMPTS:-60}"
VERIFY_INTERVAL="${VERIFY_INTERVAL:-5}"
key_id="" region="" operator_key="" from="" to="" eif="" cid="" cpus="" memory_mib="" url=""
app_dir="$(dirname "$here")" work_dir="" dry_run=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) dry_run=1; shift; continue ;;
    --key-id|--region|--operator-key|--from|--to|--eif|--cid|--cpus|--memory-mib|--url|--app-dir|--work-dir) [[ $# -ge 2 ]] || usage "$1 needs a value" ;;
    *) usage "unknown option $1" ;;
  esac
  case "$1" in
    --key-id) key_id="$2" ;; --region) region="$2" ;; --operator-key) operator_key="$2" ;;
    --from) from="$2" ;; --to) to="$2" ;; --eif) eif="$2" ;; --cid) cid="$2" ;; --cpus) cpus="$2" ;;
    --memory-mib) memory_mib="$2" ;; --url) url="$2" ;; --app-dir) app_dir="$2" ;; --work-dir) work_dir="$2" ;;
  esac
  shift 2
done
for pair in "--key-id:$key_id" "--region:$region" "--operator-key:$operator_key" "--from:$from" "--to:$to" "--eif:$eif" "--cid:$cid" "--cpus:$cpus" "--memory-mib:$memory_mib" "--url:$url"; do
  [[ -n "${pair#*:}" ]] || usage "${pair%%:*} is required"
done
[[ "$key_id" =~ ^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$ ]] || usage "--key-id must be the key's ARN"
[[ "$region" =~ ^[a-z]{2}(-[a-z]+)+-[0-9]$ ]] || usage "--region must look like eu-west-1"
[[ "$cid" =~ ^[0-9]+$ && "$cid" -ge 4 ]] || usage "--cid must be a number of at least 4"
[[ "$cpus" =~ ^[0-9]+$ && "$memory_mib" =~ ^[0-9]+$ ]] || usage "--cpus and --memory-mib must be numbers"
# The drop-ins are unit files: only plain paths go into them.
[[ "$eif" =~ ^/[A-Za-z0-9._/-]+$ ]] || usage "--eif must be an absolute path of letters, digits, . _ - /"
[[ "$app_dir" =~ ^/[A-Za-z0-9._/-]+$ ]] || usage "--app-dir must be an absolute path of letters, digits, . _ - /"
[[ "$url" =~ ^https:// ]] || usage "--url must be https://"
[[ -f "$from" && -f "$to" ]] || die "cannot read --from $from or --to $to"
[[ -n "$work_dir" ]] || work_dir="$(mktemp -d)"
mkdir -p "$work_dir"
if [[ -z "${AGENT_VERIFY:-}" ]]; then AGENT_VERIFY="$NODE $app_dir/dist/sdk/bin/agent-verify.js"; fi

run() {
  printf '+ %s\n' "$*" >&2
  [[ $dry_run -eq 1 ]] || "$@"
}
kms_policy() { run "$NODE" "$app_dir/dist/scripts/kms-policy.js" "$@"; }
get_policy() {
  printf '+ aws kms get-key-policy --key-id %s --region %s --policy-name default --output text --query Policy > %s\n' "$key_id" "$region" "$1" >&2
  [[ $dry_run -eq 1 ]] || aws kms get-key-policy --key-id "$key_id" --region "$region" --policy-name default --output text --query Policy >"$1"
}
put_policy() { run aws kms put-key-policy --key-id "$key_id" --region "$region" --policy-name default --policy "file://$1"; }

# 1. The image on this disk is the one the operator signed.
if [[ $dry_run -eq 0 ]]; then
  measured="$(nitro-cli describe-eif --eif-path "$eif")" || die "nitro-cli describe-eif --eif-path $eif failed"
  for i in 0 1 2; do
    have="$(jq -r ".Measurements.PCR$i // empty" <<<"$measured" | tr 'A-F' 'a-f')"
    want="$(jq -r ".manifest.pcrs[\"$i\"] // empty" "$to" | tr 'A-F' 'a-f')"
    [[ -n "$want" && "$have" == "$want" ]] || die "PCR$i of $eif is '$have', but $to signs '$want': not the release the manifest names"
  done
  say "PCR0, 1, 2 of $eif are the ones $to signs"
fi

# 2. Both releases may unseal.
get_policy "$work_dir/policy-before.json"
kms_policy add --policy "$work_dir/policy-before.json" --manifest "$to" --operator-key "$operator_key" --out "$work_dir/policy-both.json"
put_policy "$work_dir/policy-both.json"

# 3. The new enclave on a second CID; the old one stopped first (one writer per store).
enclave_dropin="$SYSTEMD_DIR/agent-enclave.service.d/release.conf"
bridge_dropin="$SYSTEMD_DIR/agent-host-bridge.service.d/release.conf"
save() { if [[ -f "$1" ]]; then cp "$1" "$work_dir/$(basename "$(dirname "$1")").previous"; else rm -f "$work_dir/$(basename "$(dirname "$1")").previous"; fi; }
restore() { local saved; saved="$work_dir/$(basename "$(dirname "$1")").previous"; if [[ -f "$saved" ]]; then cp "$saved" "$1"; else rm -f "$1"; fi; }
write_dropins() {
  printf '+ write %s and %s (CID %s, %s)\n' "$enclave_dropin" "$bridge_dropin" "$cid" "$eif" >&2
  [[ $dry_run -eq 0 ]] || return 0
  save "$enclave_dropin"; save "$bridge_dropin"
  mkdir -p "$(dirname "$enclave_dropin")" "$(dirname "$bridge_dropin")"
  printf '# Written by deploy/upgrade.sh: the release in service.\n[Service]\nExecStart=\nExecStart=%s/deploy/enclave-run.sh --eif %s --cid %s --cpus %s --memory-mib %s\n' \
    "$app_dir" "$eif" "$cid" "$cpus" "$memory_mib" >"$enclave_dropin"
  printf '# Written by deploy/upgrade.sh: the CID of the release in service.\n[Service]\nExecStart=\nExecStart=%s/deploy/host-bridge.sh %s\n' \
    "$app_dir" "$cid" >"$bridge_dropin"
}
write_dropins
run systemctl daemon-reload
run systemctl stop agent-enclave.service
run systemctl start agent-enclave.service
run systemctl restart agent-host-bridge.service

# 4. The service must prove it is the new release before the old one loses its key.
verified=0
for attempt in $(seq 1 "$VERIFY_ATTEMPTS"); do
  # shellcheck disable=SC2086 # AGENT_VERIFY may be "node <path>"
  if run $AGENT_VERIFY "$url" --manifest "$to" --operator-key "$operator_key"; then verified=1; break; fi
  say "not verified yet (attempt $attempt of $VERIFY_ATTEMPTS): the new enclave may still be replaying the store"
  [[ $dry_run -eq 1 ]] || sleep "$VERIFY_INTERVAL"
done
if [[ $verified -eq 0 ]]; then
  say "the new release never verified; going back to the old one (its PCRs are still in the key policy)"
  restore "$enclave_dropin"; restore "$bridge_dropin"
  run systemctl daemon-reload
  run systemctl restart agent-enclave.service
  run systemctl restart agent-host-bridge.service
  die "upgrade abandoned: the key policy allows both releases until you remove the new one (kms-policy remove --manifest $to)"
fi

# 5. Only the new release may unseal.
get_policy "$work_dir/policy-after.json"
kms_policy remove --policy "$work_dir/policy-after.json" --manifest "$from" --operator-key "$operator_key" --out "$work_dir/policy-new.json"
put_policy "$work_dir/policy-new.json"
say "upgraded to $(jq -r .manifest.version "$to") on CID $cid; the old release's PCRs are out of the key policy"
