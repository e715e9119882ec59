import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';

/**
 * The real S3-compatible server `npm test` starts (scripts/s3.sh: versitygw on loopback), its root keys, and a
 * bucket of the test's own. Absent, a test that needs it fails, naming what to run.
 */
export const S3_KEYS = {
  accessKeyId: process.env.BOT_AGENT_S3_ACCESS_KEY ?? 'botagent',
  secretAccessKey: process.env.BOT_AGENT_S3_SECRET_KEY ?? 's3-local-only-secret',
};

export function s3Endpoint(): string {
  const endpoint = process.env.BOT_AGENT_S3;
  if (!endpoint) throw new Error('BOT_AGENT_S3 is not set: run the tests through `npm test`, or `export BOT_AGENT_S3=$(bash scripts/s3.sh | tail -n 1)`');
  return endpoint;
}

/** A new bucket on the server, named for the test. */
export async function newBucket(prefix: string): Promise<{ bucket: string; client: S3Client }> {
  const client = new S3Client({ endpoint: s3Endpoint(), region: 'us-east-1', forcePathStyle: true, credentials: S3_KEYS });
  const bucket = `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  return { bucket, client };
}
