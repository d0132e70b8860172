#!/bin/sh
# Prints the summary of what `make test` skipped for want of a tool: one
# line per missing tool with how many tests it cost and in which packages.
# The file is what test/harness appends to (PADDLE_TEST_SKIPS): one line a
# skip, "needs TOOL (Debian package PKG)<tab>package dir<tab>test name".
set -eu
export LC_ALL=C # one order on every machine
file=${1:?usage: test-skips.sh FILE}
if [ ! -s "$file" ]; then
	echo "make test: nothing skipped for want of a tool."
	exit 0
fi
sort -u "$file" | awk -F '\t' '
	{
		n[$1]++; total++; key = $1 SUBSEP $2
		if (!(key in seen)) { seen[key] = 1; dirs[$1] = dirs[$1] (dirs[$1] == "" ? "" : ", ") $2 }
	}
	END {
		printf "make test: %d skipped for want of a tool (a test, or a check within one); PADDLE_TEST_REQUIRE_TOOLS=1 and PADDLE_TEST_REQUIRE_POSTGRES=1 make them failures:\n", total
		fflush()
		for (r in n) printf "  %s: %d in %s\n", r, n[r], dirs[r] | "sort"
	}'
