#!/usr/bin/env bash
# Runs every Go fuzz target of the workspace for $FUZZTIME each (default 4s),
# starting from its committed seed corpus (testdata/fuzz/<Target>). A crash
# leaves the failing input in that directory: commit it with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-4s}
status=0
while IFS= read -r file; do
	dir=$(dirname "$file")
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		echo "fuzz $dir $target ($fuzztime)"
		if ! (cd "$dir" && go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" -fuzzminimizetime=2s . >/tmp/fuzz-$$.log 2>&1); then
			cat /tmp/fuzz-$$.log
			status=1
		fi
	done
done < <(git ls-files --cached --others --exclude-standard -- '*_test.go' | xargs -r grep -l '^func Fuzz' | sort)
rm -f /tmp/fuzz-$$.log
exit $status
