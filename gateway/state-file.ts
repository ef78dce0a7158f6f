/**
 * The newest state head the gateway has seen from one service, kept in a small JSON file so
 * that a restart of the gateway does not forget it: a host that later serves an older (or
 * forked) copy of the enclave's store is refused (sdk StateTracker). Written atomically
 * (a temporary file renamed over it), and only when the head moves.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { formatState, parseState, type KnownState } from '../protocol/response-signature.js';

interface StateFileJson {
  v: 1;
  service: string;
  state: string;
  /** The store the head belongs to: a wiped or replaced store is refused across restarts too. */
  store?: string;
}

export class StateFile {
  private saved: string | undefined;

  constructor(private readonly path: string, private readonly service: string) {}

  /** The head remembered for this service; undefined when there is no file yet. Throws when the file is not ours. */
  load(): KnownState | undefined {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    const json = JSON.parse(text) as Partial<StateFileJson>;
    const head = parseState(json.state);
    if (json.v !== 1 || !head) throw new Error(`${this.path} is not an agent-gateway state file`);
    if (json.service !== this.service) throw new Error(`${this.path} holds the state of ${json.service}, not ${this.service}`);
    this.saved = `${json.store ?? ''}/${json.state}`;
    return typeof json.store === 'string' ? { store: json.store, ...head } : head;
  }

  /** Remembers `head` if it differs from what the file holds. */
  save(head: KnownState | undefined): void {
    if (!head || `${head.store ?? ''}/${formatState(head)}` === this.saved) return;
    const json: StateFileJson = { v: 1, service: this.service, state: formatState(head), ...(head.store ? { store: head.store } : {}) };
    mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
    const temporary = `${this.path}.${process.pid}.tmp`;
    writeFileSync(temporary, `${JSON.stringify(json)}\n`, { mode: 0o600 });
    renameSync(temporary, this.path);
    this.saved = `${json.store ?? ''}/${json.state}`;
  }
}
