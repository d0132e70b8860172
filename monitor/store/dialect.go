package store

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The SQL the two engines write differently, in one place: every
// statement of the store is written once, with ? placeholders and these
// fragments, so that a statement's text differs between the engines only
// where a method of Dialect says how. Where the engines need genuinely
// different statements (a lock only one of them has), the statement's
// entry carries both texts (stmt.postgresSQL).

// bind rewrites a query written with ? placeholders for the dialect
// (PostgreSQL numbers them: $1, $2, …). Queries are constants of this
// package, so a '?' never appears inside a string literal.
func (d Dialect) bind(q string) string {
	if d != Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// expand rewrites q, written with numbered placeholders (?1, ?2, …: one
// argument named in several places, as the report's window ends are),
// into plain ? placeholders in order, and args with them: args[N-1] for
// each ?N. The text run is then the one plain placeholders would have
// written, on both engines. A q without numbered placeholders is returned
// as it is, with args. args nil: only the text is rewritten.
func (d Dialect) expand(q string, args []any) (string, []any) {
	if !strings.ContainsAny(q, "?") {
		return q, args
	}
	var b strings.Builder
	var out []any
	numbered := false
	for i := 0; i < len(q); i++ {
		if q[i] != '?' || i+1 >= len(q) || q[i+1] < '1' || q[i+1] > '9' {
			b.WriteByte(q[i])
			continue
		}
		j := i + 1
		n := 0
		for j < len(q) && q[j] >= '0' && q[j] <= '9' {
			n = n*10 + int(q[j]-'0')
			j++
		}
		numbered = true
		b.WriteByte('?')
		if n <= len(args) {
			out = append(out, args[n-1])
		}
		i = j - 1
	}
	if !numbered {
		return q, args
	}
	return b.String(), out
}

// jsonText is the text of the member name of the JSON object in col,
// NULL when absent. name is written into the statement as a literal: it
// follows the labels' name rule (letters, digits, '.', '_', '-'), which
// the callers checked.
func (d Dialect) jsonText(col, name string) string {
	if d == Postgres {
		return `CAST(` + col + ` AS jsonb) ->> '` + name + `'`
	}
	return `json_extract(` + col + `, '$."` + name + `"')`
}

// jsonNumber is the number that the member key (an SQL expression of
// text, a bound parameter) of the JSON object in col holds, NULL when
// the member is absent or not a number. A dotted key ("eval.accuracy")
// is one member, so SQLite's path quotes it ('$."eval.accuracy"', with
// json_quote), while PostgreSQL's -> takes the key itself. Written with
// CAST, not '::', as every statement of the store is.
func (d Dialect) jsonNumber(col, key string) string {
	if d == Postgres {
		return `CASE WHEN jsonb_typeof(CAST(` + col + ` AS jsonb) -> CAST(` + key + ` AS text)) = 'number'
    THEN CAST(CAST(` + col + ` AS jsonb) ->> CAST(` + key + ` AS text) AS double precision) END`
	}
	return `CASE WHEN json_type(` + col + `, '$.' || json_quote(` + key + `)) IN ('integer', 'real')
    THEN json_extract(` + col + `, '$.' || json_quote(` + key + `)) END`
}

// keyList is the key-list fragment: a FROM item named alias over the JSON
// array of strings or numbers bound to its one ?, a row per element with
// the element in the column value (text on PostgreSQL: compare it with
// CAST where the column is a number). One statement then reads the rows
// of many keys, each by an index seek.
func (d Dialect) keyList(alias string) string {
	if d == Postgres {
		return `jsonb_array_elements_text(CAST(? AS jsonb)) AS ` + alias + `(value)`
	}
	return `json_each(?) AS ` + alias
}

// keyListArg is what a keyList or pairList fragment binds: keys, a slice
// of strings, numbers or pairs of strings, as a JSON array (such a slice
// always encodes).
func keyListArg(keys any) string {
	b, err := json.Marshal(keys)
	if err != nil {
		panic("store: a key list does not encode: " + err.Error())
	}
	return string(b)
}

// pairList is keyList for a JSON array of pairs of strings: a row per
// pair with its members in the columns k0 and k1.
func (d Dialect) pairList(alias string) string {
	if d == Postgres {
		return `(SELECT value ->> 0 AS k0, value ->> 1 AS k1 FROM jsonb_array_elements(CAST(? AS jsonb))) AS ` + alias
	}
	return `(SELECT json_extract(value, '$[0]') AS k0, json_extract(value, '$[1]') AS k1 FROM json_each(?)) AS ` + alias
}

// fence, at the end of a subquery, keeps the planner from merging it into
// the query around it, so that a column computed by a correlated subquery
// (modelSums' first, baseSums' unlisted_only) is computed once per row:
// merged, SQLite copies the subquery into every expression that names the
// column (EXPLAIN QUERY PLAN listed it twelve times). A LIMIT that limits
// nothing in SQLite, an OFFSET 0 in PostgreSQL (which takes no LIMIT -1).
func (d Dialect) fence() string {
	if d == Postgres {
		return "OFFSET 0"
	}
	return "LIMIT -1"
}

// readSettings is the statement that sets up a report's read-only
// transaction, nil where the engine needs none (SQLite: its reads run on
// the read pool as they are).
//
// On PostgreSQL the settings are local to the transaction. The planner
// cannot know that the span's second set (completed tasks that started
// before the window and ended after its start: end_time > f AND
// start_time < f) is a few hundred tasks: it multiplies the two
// conditions' shares and expects a quarter of the table (219,713 of
// 1,000,000 tasks for 530 in the benchmark's month). Over-costed so,
// every statement was JIT-compiled (0.74 s of a 1.9 s statement by model,
// more than it ran), and the GPUs were joined by hashing the whole
// task_gpus table (2 million rows, 0.5 s, spilled to disk) where an index
// lookup per spanned task on task_gpus' primary key (task_key, position)
// takes what the month has. So: no JIT, and the join by nested loop on
// that index (hash and merge joins off); EXPLAIN ANALYZE of the month by
// model: 1.9 s before, 0.5 s after.
func (d Dialect) readSettings() *stmt {
	if d == Postgres {
		return stmtReadSettings
	}
	return nil
}

var stmtReadSettings = &stmt{sql: `SELECT set_config('jit', 'off', true), set_config('enable_hashjoin', 'off', true),
  set_config('enable_mergejoin', 'off', true)`, postgresOnly: true}
