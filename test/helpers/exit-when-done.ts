// Loaded into every test process before its test file (package.json ava.require). The agent lets a
// restart run to its end after its caller has gone (a self restart is answered first),
// so an engine call may outlive the last test of a file; ava 8 would wait for it and
// time out. Once ava has the file's results, the process ends.
import process from 'node:process';
import { registerCompletionHandler } from 'ava';

registerCompletionHandler(() => process.exit());
