/**
 * Reads the PCRs that `nitro-cli build-enclave` (and `nitro-cli describe-eif`) print:
 *
 *   { "Measurements": { "HashAlgorithm": "Sha384 { ... }", "PCR0": "<96 hex>", "PCR1": …, "PCR2": …, ["PCR8": …] } }
 *
 * PCR8 appears only for an image signed with `--signing-certificate`/`--private-key`.
 * describe-eif wraps the same object in more fields; either output is accepted.
 */
export function parseNitroMeasurements(text: string, source: string): Record<number, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`${source} is not JSON (save the output of nitro-cli build-enclave or describe-eif)`);
  }
  const measurements = (parsed as { Measurements?: unknown } | null)?.Measurements;
  if (typeof measurements !== 'object' || measurements === null) throw new Error(`${source} has no "Measurements" object`);
  const pcrs: Record<number, string> = {};
  for (const [name, value] of Object.entries(measurements)) {
    const match = /^PCR(\d{1,2})$/.exec(name);
    if (!match) continue;
    if (typeof value !== 'string' || !/^[0-9a-fA-F]{96}$/.test(value)) throw new Error(`${source}: ${name} is not 96 hex digits`);
    pcrs[Number(match[1])] = value.toLowerCase();
  }
  for (const index of [0, 1, 2]) {
    if (!(index in pcrs)) throw new Error(`${source} lacks PCR${index}`);
  }
  return pcrs;
}
