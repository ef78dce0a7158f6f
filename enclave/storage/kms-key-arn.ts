/**
 * KMS_KEY_ID must be a key ARN. An alias (`alias/…`) can be re-pointed at another key by
 * whoever may call kms:UpdateAlias, and a bare key id leaves the account and region to the
 * caller's credentials; either way the measured configuration would not say which key
 * seals the data. Only an ARN names one key in one account and region, so that is what
 * the image carries and what `kmstool_enclave_cli decrypt --key-id` is told.
 */

/** arn:<partition>:kms:<region>:<12-digit account>:key/<uuid, or mrk-<32 hex> for a multi-Region key> */
const KEY_ARN = /^arn:aws(?:-cn|-us-gov)?:kms:([a-z]{2}(?:-[a-z]+)+-\d):(\d{12}):key\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$/;

export interface KmsKeyArn { arn: string; region: string; account: string }

export function parseKmsKeyArn(value: string): KmsKeyArn | undefined {
  const m = KEY_ARN.exec(value);
  return m ? { arn: value, region: m[1], account: m[2] } : undefined;
}

/** Why a value is not a key ARN, in one line for the settings error. */
export function kmsKeyArnProblem(value: string): string {
  const kind = value.startsWith('alias/') || value.includes(':alias/') ? 'an alias'
    : /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$/.test(value) ? 'a bare key id'
      : 'not a key ARN';
  return `must be a key ARN (arn:aws:kms:<region>:<account>:key/<key id>), got ${kind}: "${value}"; `
    + 'an alias can be re-pointed and a bare id does not name the account, so neither pins the sealing key (deploy/sealing.md)';
}
