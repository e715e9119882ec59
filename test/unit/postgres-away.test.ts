import test from 'ava';
import pg from 'pg';
import { isDatabaseAway } from '../../src/history/postgres-database.js';

const serverSaid = (code: string): pg.DatabaseError => Object.assign(new pg.DatabaseError('the server said no', 0, 'error'), { code });
const socket = (code: string): Error => Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code });

// Which failures are the database away (a write kept and tried again: docs/api.md §9) and which a write refused for
// good: one the agent cannot even send (a value that does not serialize) must never be tried again for ever.
test('the server down, shutting down, out of resources, in a serialization conflict, or a connection lost: away', (t) => {
  for (const err of [
    serverSaid('08006'),
    serverSaid('57P01'),
    serverSaid('53300'),
    serverSaid('40001'),
    serverSaid('40P01'),
    socket('ECONNREFUSED'),
    socket('ECONNRESET'),
    socket('ETIMEDOUT'),
    new AggregateError([socket('ECONNREFUSED'), socket('ENETUNREACH')]),
    new Error('Connection terminated unexpectedly'),
    new Error('timeout exceeded when trying to connect'),
    new Error('Query read timeout'),
    new Error('Client has encountered a connection error and is not queryable'),
    new Error('Cannot use a pool after calling end on the pool'),
  ]) {
    t.true(isDatabaseAway(err), String(err));
  }
});

test('a statement the server refused, or a failure of the agent before the server: refused for good, not away', (t) => {
  for (const err of [
    serverSaid('23505'),
    serverSaid('22P02'),
    serverSaid('42P01'),
    new TypeError('Do not know how to serialize a BigInt'),
    new RangeError('Invalid time value'),
    new Error('an event is appended in a transaction only'),
    undefined,
  ]) {
    t.false(isDatabaseAway(err), String(err));
  }
});
