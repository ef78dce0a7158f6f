import { hostPort, logFormat, logLevel, optionalText, text } from '../common/config.js';

/** Every setting of the host store; `npm run start:host-store -- --help` prints this table. */
export const hostStoreSettings = {
  address: hostPort('HOST_STORE_ADDR', 'Address the host store listens on and the enclave dials (on Nitro, through a vsock bridge)', '127.0.0.1:50052'),
  dataDir: text('DATA_DIR', 'The host store\'s folder: the enclave\'s sealed blobs (log segments, snapshots, the wrapped sealing key); the enclave has no folder of its own. One host store at a time: a second one exits 2. With BLOB_STORE_S3 it holds only copies of what the host\'s tools read (simulated-root.pem)', './data'),
  s3: optionalText('BLOB_STORE_S3', 'Keep the blobs in an S3 bucket instead of DATA_DIR: s3://<bucket>/<prefix> (e.g. s3://my-bucket/agent-service/). Credentials and region as the AWS SDK finds them (AWS_* variables, the instance\'s role). Several host stores may share it: every write is conditional (docs/durability.md#the-s3-backend)'),
  s3Endpoint: optionalText('S3_ENDPOINT', 'With BLOB_STORE_S3: the URL of an S3-compatible server instead of AWS\'s (path-style requests), e.g. http://127.0.0.1:9000'),
  logLevel: logLevel(),
  logFormat: logFormat(),
};

/** `s3://bucket/prefix` → the bucket and the key prefix (ending in "/" unless empty); undefined when it is not such a URL. */
export function parseS3Url(url: string): { bucket: string; prefix: string } | undefined {
  const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(url);
  if (!m) return undefined;
  const prefix = m[2] ?? '';
  return { bucket: m[1], prefix: prefix === '' || prefix.endsWith('/') ? prefix : `${prefix}/` };
}
