import { createHash } from 'node:crypto';
import type { TLSSocket } from 'node:tls';
import { buildConnector, Client, Pool, type Dispatcher } from 'undici';
import { ApiError } from '../../common/errors.js';

/**
 * TLS to the chat model ends inside the enclave; this is where the enclave looks at the
 * certificate it got. Each connection's peer key is hashed (SHA-256 of the DER
 * SubjectPublicKeyInfo, base64: the form of an HPKP pin) when its handshake completes,
 * before a byte of any request is written on it. With pins (MODEL_TLS_PINS), a connection
 * whose key is not pinned is closed there, so a prompt and its memories never reach a
 * server the operator did not name, whatever CA vouches for it. The hash is remembered per
 * connection, so each answer can name the key of the connection that carried it.
 */

/** Where the pool notes which connection served a request: pass one per request, read it after the answer. */
export interface PeerNote {
  connection?: { readonly spkiSha256?: string };
}

/** The error a connection refused by the pins becomes (a connect failure: nothing was sent). */
export class PinMismatchError extends Error {
  readonly code = 'MODEL_TLS_PIN_MISMATCH';
  constructor(readonly spkiSha256: string) {
    super(`the chat model's TLS certificate key sha256/${spkiSha256} is not one MODEL_TLS_PINS allows`);
  }
}

export const pinRefused = (err: PinMismatchError) => new ApiError('model_tls_pin_mismatch', `${err.message}; nothing was sent to it`);

export function spkiSha256(socket: TLSSocket): string | undefined {
  const cert = socket.getPeerX509Certificate();
  if (!cert) return undefined;
  return createHash('sha256').update(cert.publicKey.export({ type: 'spki', format: 'der' })).digest('base64');
}

/** One upstream connection (undici's Client keeps one socket), and the key its current socket presented. */
class ObservedClient extends Client {
  constructor(url: URL, options: Client.Options, private readonly peer: { spkiSha256?: string }) {
    super(url, options);
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    // The response arrives on this client's current socket; the caller reads the note after it.
    const note = (options as { peerNote?: PeerNote }).peerNote;
    if (note) note.connection = this.peer;
    return super.dispatch(options, handler);
  }
}

export interface PinnedPoolOptions extends Pool.Options {
  /** base64 SHA-256 SPKI hashes; empty: any certificate the system's CAs accept. */
  pins: readonly string[];
}

/** A Pool whose connections are checked against `pins` and remember their peer's key. */
export function pinnedPool(origin: string, { pins, connectTimeout, ...options }: PinnedPoolOptions): Pool {
  const base = buildConnector({ timeout: connectTimeout ?? undefined });
  const allowed = new Set(pins);
  return new Pool(origin, {
    ...options,
    connectTimeout,
    factory: (url, clientOptions) => {
      // The key of this client's current socket: base64 SHA-256 of its peer's SPKI (none over http).
      const peer: { spkiSha256?: string } = {};
      const connect: buildConnector.connector = (connectOptions, callback) => base(connectOptions, (err, socket) => {
        if (err || !socket) return callback(err ?? new Error('no socket'), null);
        const key = 'getPeerX509Certificate' in socket ? spkiSha256(socket as TLSSocket) : undefined;
        if (allowed.size > 0 && (key === undefined || !allowed.has(key))) {
          socket.destroy();
          return callback(new PinMismatchError(key ?? 'none'), null);
        }
        peer.spkiSha256 = key;
        return callback(null, socket);
      });
      return new ObservedClient(url, { ...(clientOptions as Client.Options), connect }, peer);
    },
  });
}
