// The pins the user gives the attestation check (PCR lines, or a signed release manifest
// and the operator key), kept in localStorage: a later visit then checks against the
// values the user brought, not against whatever the service says that day. They are
// public values (measurements, a public key, a signed file), so keeping them is safe.

const $ = (id) => document.getElementById(id);
const FIELDS = { pcrs: 'pin-pcrs', manifest: 'pin-manifest', operatorKey: 'pin-operator-key' };
const storageKey = (name) => `agent-console-pin-${name}`;

function remember(name) {
  const value = $(FIELDS[name]).value.trim();
  if (value) localStorage.setItem(storageKey(name), value);
  else localStorage.removeItem(storageKey(name));
}

/** Fills the fields from localStorage and keeps localStorage in step with them. */
export function restorePins() {
  for (const [name, id] of Object.entries(FIELDS)) {
    $(id).value = localStorage.getItem(storageKey(name)) ?? '';
    $(id).addEventListener('input', () => remember(name));
  }
  $('manifest-file').addEventListener('change', async () => {
    const file = $('manifest-file').files[0];
    if (!file) return;
    $('pin-manifest').value = await file.text();
    remember('manifest');
  });
}

/** What the user typed, as the verifier's checkAttestationAnswer takes it. */
export function currentPins() {
  return Object.fromEntries(Object.entries(FIELDS).map(([name, id]) => [name, $(id).value]));
}
