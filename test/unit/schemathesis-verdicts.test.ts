import test from 'ava';
import { verdictsOf } from '../helpers/schemathesis-verdicts.js';

// The schemathesis test reads the tool's own words: these are its sections as version 4.32 prints them.
const CLEAN = `
=================================== SUMMARY ====================================

API Operations:
  Selected: 17/17
  Tested: 17

Test cases:
  516 generated, 516 passed

Seed: 1

============================= No issues found in 94.34s =============================
`;

const WARNED = `
=================================== SUMMARY ====================================

Warnings:
  ⚠️ Missing test data: 2 operations repeatedly returned 404 responses
  ⚠️ Schema validation mismatch: 2 operations mostly rejected generated data

Test cases:
  516 generated, 516 passed
`;

const CRASHED = `
=================================== ERRORS ===================================
____________________________ POST /api/admin/bots ____________________________

Runtime Error

AST constructor recursion depth mismatch (before=61, after=60)

    SystemError in ast.py:50
________________________ POST /api/bots/self/restart _________________________

Runtime Error

AST constructor recursion depth mismatch (before=48, after=47)
=================================== SUMMARY ====================================

Test cases:
  516 generated, 516 passed
`;

test('a clean run has no errors and no warnings', (t) => {
  t.deepEqual(verdictsOf(CLEAN), { errors: [], warnings: [] });
});

test('each warning of the summary is a verdict', (t) => {
  t.deepEqual(verdictsOf(WARNED).warnings, [
    '⚠️ Missing test data: 2 operations repeatedly returned 404 responses',
    '⚠️ Schema validation mismatch: 2 operations mostly rejected generated data',
  ]);
});

test("a crash of the judge's own is an error, one per operation", (t) => {
  const { errors } = verdictsOf(CRASHED);
  t.is(errors.length, 2);
  t.true(errors.every((error) => error.includes('Runtime Error')));
});

const MISMATCH = (operations: string[]) => `
=================================== WARNINGS ===================================

Schema validation mismatch: ${operations.length} operation mostly rejected generated data due to validation errors, indicating schema constraints don't match API validation

${operations.map((operation) => `  - ${operation}`).join('\n')}

💡 Check your schema constraints - API validation may be stricter than documented

=================================== SUMMARY ====================================

Warnings:
  ⚠️ Schema validation mismatch: ${operations.length} operation mostly rejected generated data

Test cases:
  704 generated, 704 passed
`;

test('a warning may be excused for the operations named, and only for them', (t) => {
  const excused = { 'Schema validation mismatch': ['POST /api/admin/bots'] };
  t.deepEqual(verdictsOf(MISMATCH(['POST /api/admin/bots']), excused).warnings, []);
  t.deepEqual(verdictsOf(MISMATCH(['POST /api/admin/bots', 'POST /api/bots/stop']), excused).warnings, [
    '⚠️ Schema validation mismatch: 2 operation mostly rejected generated data',
  ]);
  t.deepEqual(verdictsOf(MISMATCH(['POST /api/admin/bots'])).warnings, ['⚠️ Schema validation mismatch: 1 operation mostly rejected generated data']);
});
