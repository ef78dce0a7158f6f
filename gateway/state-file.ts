/**
 * The newest state head the gateway has seen of each shard of one service, kept in a small
 * JSON file so that a restart of the gateway does not forget them: a host that later serves
 * an older (or forked) copy of a shard's store is refused (sdk StateTracker). Written
 * atomically (a temporary file renamed over it), and only when a head moves.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseState, StateTracker, type SavedState } from '../protocol/response-signature.js';

interface StateFileJson {
  /** 1: one head (from before shards: shard 0's); 2: the tracker's heads by shard. */
  v: 1 | 2;
  service: string;
  /** v 1: the head. */
  state?: string;
  /** v 1: the store the head belongs to. */
  store?: string;
  /** v 2: StateTracker.toJSON(). */
  tracker?: SavedState;
}

export class StateFile {
  private saved: string | undefined;

  constructor(private readonly path: string, private readonly service: string) {}

  /** A tracker at the heads remembered for this service; undefined when there is no file yet. Throws when the file is not ours. */
  load(): StateTracker | undefined {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    const json = JSON.parse(text) as Partial<StateFileJson>;
    const notOurs = () => new Error(`${this.path} is not an agent-gateway state file`);
    if ((json.v !== 1 || !parseState(json.state)) && (json.v !== 2 || typeof json.tracker !== 'object')) throw notOurs();
    if (json.service !== this.service) throw new Error(`${this.path} holds the state of ${json.service}, not ${this.service}`);
    let tracker: StateTracker;
    if (json.v === 1) {
      const head = parseState(json.state);
      if (!head) throw notOurs();
      tracker = new StateTracker(typeof json.store === 'string' ? { store: json.store, ...head } : head);
    } else {
      try {
        tracker = StateTracker.from(json.tracker as SavedState);
      } catch {
        throw notOurs();
      }
    }
    this.saved = JSON.stringify(tracker);
    return tracker;
  }

  /** Remembers the tracker's heads if they differ from what the file holds. */
  save(tracker: StateTracker): void {
    const saved = JSON.stringify(tracker);
    if (saved === this.saved || tracker.floor() === undefined) return;
    const json: StateFileJson = { v: 2, service: this.service, tracker: tracker.toJSON() };
    mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
    const temporary = `${this.path}.${process.pid}.tmp`;
    writeFileSync(temporary, `${JSON.stringify(json)}\n`, { mode: 0o600 });
    renameSync(temporary, this.path);
    this.saved = saved;
  }
}
