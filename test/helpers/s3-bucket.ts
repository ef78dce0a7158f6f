import { S3Objects } from '../../host-store/s3-objects.js';
import { startS3StandIn, type S3StandIn } from './s3-stand-in.js';

/**
 * The S3 bucket a test of the service on S3 runs on: the loopback stand-in of S3's API, or the
 * real server S3_TEST_ENDPOINT names (with S3_TEST_BUCKET and AWS_* credentials; `npm run
 * test:s3-ceph` starts Ceph's RADOS Gateway for it), where every key of the run is under a
 * prefix of its own. What is in it is read through S3's API, the same way on both.
 */
export interface TestBucket {
  name: string;
  endpoint: string;
  /** Put before every key the test names: empty on the stand-in, which is this run's alone. */
  prefix: string;
  /** What a host store needs besides BLOB_STORE_S3: the endpoint and credentials. */
  env: Record<string, string>;
  objects(): S3Objects;
  keys(prefix: string): Promise<string[]>;
  bytes(key: string): Promise<Buffer | undefined>;
  close(): Promise<void>;
}

export async function testBucket(standInName: string): Promise<TestBucket> {
  const real = process.env.S3_TEST_ENDPOINT;
  let standIn: S3StandIn | undefined;
  let name: string;
  let endpoint: string;
  let prefix = '';
  let credentials: { accessKeyId: string; secretAccessKey: string };
  if (real) {
    name = process.env.S3_TEST_BUCKET ?? 'agent-service-test';
    endpoint = real;
    prefix = `run-${Date.now()}-${process.pid}/`;
    credentials = { accessKeyId: process.env.AWS_ACCESS_KEY_ID ?? '', secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY ?? '' };
  } else {
    standIn = await startS3StandIn(standInName);
    name = standIn.bucket;
    endpoint = standIn.endpoint;
    credentials = { accessKeyId: 'stand-in', secretAccessKey: 'stand-in' };
  }
  const objects = () => new S3Objects(name, { endpoint, credentials });
  return {
    name, endpoint, prefix,
    env: { S3_ENDPOINT: endpoint, AWS_ACCESS_KEY_ID: credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey, AWS_REGION: process.env.AWS_REGION ?? 'eu-west-1' },
    objects,
    keys: async (under) => {
      const client = objects();
      try {
        return (await client.list(under)).sort();
      } finally {
        client.close();
      }
    },
    bytes: async (key) => {
      const client = objects();
      try {
        return (await client.get(key))?.bytes;
      } finally {
        client.close();
      }
    },
    close: async () => {
      await standIn?.close();
    },
  };
}
