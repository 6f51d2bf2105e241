import { describe, expect, it } from 'vitest';
import { literalStatement } from '../src/postgres/sql-literal.js';

// literalStatement splits each statement text once and keeps the split (the claim's text repeats every
// delivery): the values written in must still be each call's own.
describe('literalStatement', () => {
  const sql = 'SELECT f($1::text, $2::int, $10::text, $1::text, $3::timestamptz)';
  const parameters = (id: string, n: number): unknown[] => [id, n, null, null, null, null, null, null, null, 'ten'];

  it("writes each call's values into a text it has split before, $10 apart from $1", () => {
    expect(literalStatement({ sql, parameters: parameters("it's", 1) })).toBe(
      "SELECT f('it''s'::text, '1'::int, 'ten'::text, 'it''s'::text, NULL::timestamptz)",
    );
    expect(literalStatement({ sql, parameters: parameters('b\\c', 2) })).toBe(
      "SELECT f( E'b\\\\c'::text, '2'::int, 'ten'::text,  E'b\\\\c'::text, NULL::timestamptz)",
    );
    expect(literalStatement({ sql: 'SELECT 1', parameters: [] })).toBe('SELECT 1');
  });

  it('still writes statements once many different texts were seen', () => {
    for (let i = 0; i < 400; i++) {
      expect(literalStatement({ sql: `SELECT $1::int + ${i}`, parameters: [i] })).toBe(`SELECT '${i}'::int + ${i}`);
    }
  });
});
