// A delivery's attempts page (api/deliveries/query.ts): its limit and cursor, read from the query string, as a unit.
import assert from 'node:assert/strict';
import { encodeAttemptsCursor, MAX_CURSOR_LENGTH, parseAttemptsQuery } from '../../api/deliveries/query';

const b64 = (value: string) => Buffer.from(value).toString('base64url');
const refusal = (detail: string) => (error: Error & { status?: number }) =>
  error.status === 400 && error.message === `The query is invalid: ${detail}`;

describe('the attempts page’s query: limit and cursor', () => {
  it('defaults to the first page of 20; takes a limit and the cursor it returned', () => {
    assert.deepEqual(parseAttemptsQuery({}), { limit: 20 });
    assert.deepEqual(parseAttemptsQuery({ limit: '5' }), { limit: 5 });
    assert.equal(encodeAttemptsCursor(42), b64('[42]'));
    assert.deepEqual(parseAttemptsQuery({ cursor: encodeAttemptsCursor(42) }), { limit: 20, afterSeq: 42 });
    assert.deepEqual(parseAttemptsQuery({ cursor: encodeAttemptsCursor(1), limit: '100' }), {
      limit: 100,
      afterSeq: 1,
    });
  });

  it('refuses any cursor it did not return, naming it once', () => {
    const foreign = [
      b64('[0]'),
      b64('[-3]'),
      b64('[1.5]'),
      b64('["7"]'),
      b64('[7,8]'),
      b64('[]'),
      b64('{"0":7}'),
      b64('7'),
      b64('[7'),
      `${encodeAttemptsCursor(7)}=`,
      `!${encodeAttemptsCursor(7)}`,
      'A'.repeat(MAX_CURSOR_LENGTH + 1),
    ];
    for (const cursor of foreign)
      assert.throws(() => parseAttemptsQuery({ cursor }), refusal('cursor is not one this API returned'), cursor);
    // At the length bound, a well-formed cursor is read (padding a number with spaces keeps its JSON valid).
    const padded = b64(`[7${' '.repeat(381)}]`);
    assert.equal(padded.length, MAX_CURSOR_LENGTH);
    assert.deepEqual(parseAttemptsQuery({ cursor: padded }), { limit: 20, afterSeq: 7 });
  });

  it('names every problem in one 400', () => {
    assert.throws(
      () => parseAttemptsQuery({ limit: '0', cursor: 'x' }),
      refusal('limit must be an integer from 1 to 100; cursor is not one this API returned'),
    );
  });
});
