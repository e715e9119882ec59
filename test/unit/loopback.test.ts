import test from 'ava';
import { isLoopback } from '../../src/loopback.js';

test('127.0.0.0/8 and ::1 are loopback', (t) => {
  for (const address of ['127.0.0.1', '127.255.255.255', '127.0.0.0', '::1']) t.true(isLoopback(address), address);
});

test('anything else is not, near misses included', (t) => {
  for (const address of ['128.0.0.1', '10.0.0.1', '126.255.255.255', '127.0.0', '127.0.0.1.5', '1270.0.0.1', '127.256.0.1', '::2', '::', '', 'localhost']) {
    t.false(isLoopback(address), address);
  }
});
