import test from 'ava';
import { dataPathProblem, overlappingFolders } from '../../src/data/bot-data.js';

// The rules of a data folder's path (docs/api.md §19).

test('a plain absolute folder outside the runtime\'s own is a data folder', (t) => {
  for (const path of ['/data', '/home/node/.n8n', '/var/lib/bot', '/procs', '/device', '/a/b-c_d.e', '/developer/x']) {
    t.is(dataPathProblem(path), undefined, path);
  }
});

test('what is not one is said', (t) => {
  t.regex(dataPathProblem('data') ?? '', /absolute/);
  t.regex(dataPathProblem('') ?? '', /absolute/);
  t.regex(dataPathProblem('/') ?? '', /must not be \//);
  for (const path of ['/proc', '/proc/1', '/sys/fs', '/dev', '/dev/shm']) t.regex(dataPathProblem(path) ?? '', /must not be under \/(proc|sys|dev)/, path);
  for (const path of ['/data/', '/a//b', '/a/./b', '/a/../b', '/..', '/.']) t.regex(dataPathProblem(path) ?? '', /written plainly/, path);
  for (const path of ['/a:b', '/a,b', '/a\nb', '/a\u0000b', '/a\u007fb']) t.regex(dataPathProblem(path) ?? '', /control characters/, JSON.stringify(path));
  t.is(dataPathProblem(`/${'x'.repeat(254)}`), undefined);
  t.regex(dataPathProblem(`/${'x'.repeat(255)}`) ?? '', /at most 255/);
});

test('folders that repeat or hold one another are named; neighbours that share a prefix are not', (t) => {
  t.is(overlappingFolders(['/data', '/data2', '/var/data']), undefined);
  t.is(overlappingFolders([]), undefined);
  t.is(overlappingFolders(['/a', '/b', '/a']), '/a twice');
  t.is(overlappingFolders(['/a/b', '/a']), '/a/b and /a');
  t.is(overlappingFolders(['/x', '/a', '/a/b/c']), '/a and /a/b/c');
});
