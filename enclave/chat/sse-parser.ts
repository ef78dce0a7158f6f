/**
 * An incremental parser for the Server-Sent Events an OpenAI-compatible server streams.
 * It follows the SSE rules that matter here (lines end in \n, \r\n or \r; `data:` lines
 * of one event are joined with \n; a blank line ends an event; `:` lines are comments)
 * and bounds how much it holds, so a server that never ends a line cannot exhaust memory.
 */
export interface SseEvent {
  event?: string;
  data: string;
}

export class SseParser {
  private readonly decoder = new TextDecoder('utf-8');
  private buffer = '';
  private data: string[] = [];
  private event: string | undefined;
  private pendingCr = false;

  constructor(private readonly maxEventChars = 4 * 1024 * 1024) {}

  /** Feeds bytes; returns the events they complete. */
  push(bytes: Uint8Array): SseEvent[] {
    return this.lines(this.decoder.decode(bytes, { stream: true }));
  }

  /** Ends the input; returns a last event only if it was terminated (an unterminated one is incomplete). */
  end(): SseEvent[] {
    return this.lines(this.decoder.decode());
  }

  private lines(text: string): SseEvent[] {
    const events: SseEvent[] = [];
    let input = text;
    // A \r at the end of the previous piece may be the first half of \r\n.
    if (this.pendingCr && input.startsWith('\n')) input = input.slice(1);
    this.pendingCr = false;
    this.buffer += input;
    let start = 0;
    for (let i = 0; i < this.buffer.length; i++) {
      const c = this.buffer[i];
      if (c !== '\n' && c !== '\r') continue;
      const line = this.buffer.slice(start, i);
      if (c === '\r') {
        if (i + 1 < this.buffer.length) {
          if (this.buffer[i + 1] === '\n') i++;
        } else {
          this.pendingCr = true;
        }
      }
      start = i + 1;
      const event = this.line(line);
      if (event) events.push(event);
    }
    this.buffer = this.buffer.slice(start);
    if (this.buffer.length + this.held() > this.maxEventChars) throw new Error('server-sent event too large');
    return events;
  }

  private held(): number {
    return this.data.reduce((n, d) => n + d.length, 0);
  }

  private line(line: string): SseEvent | undefined {
    if (line === '') {
      if (this.data.length === 0) {
        this.event = undefined;
        return undefined;
      }
      const event: SseEvent = { data: this.data.join('\n'), ...(this.event ? { event: this.event } : {}) };
      this.data = [];
      this.event = undefined;
      return event;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    return undefined;
  }
}
