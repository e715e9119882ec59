import { connect } from 'node:net';
import test from 'ava';
import { isTransportFailure } from '../../src/runtime/transport-failure.js';

const failedConnect = (path: string) =>
  new Promise<Error>((resolve) => connect(path).on('error', resolve));

test('a socket that is not there, a refused port and a deadline are transport failures', async (t) => {
  t.true(isTransportFailure(await failedConnect('/nonexistent/docker.sock')));
  t.true(isTransportFailure(await new Promise<Error>((resolve) => connect(1, '127.0.0.1').on('error', resolve))));
  const deadline = AbortSignal.timeout(1);
  await new Promise((resolve) => setTimeout(resolve, 10));
  t.true(isTransportFailure(deadline.reason));
  t.true(isTransportFailure(Object.assign(new Error('x'), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' })));
});

test('a failure wrapped by fetch (its cause) counts too', (t) => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' });
  t.true(isTransportFailure(new TypeError('fetch failed', { cause: refused })));
});

test('a bug is not a transport failure', (t) => {
  t.false(isTransportFailure(new TypeError("Cannot read properties of undefined (reading 'State')")));
  t.false(isTransportFailure(new RangeError('Maximum call stack size exceeded')));
  t.false(isTransportFailure(undefined));
  t.false(isTransportFailure('text'));
});
