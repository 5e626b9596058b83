#!/usr/bin/env bash
# Runs make targets one after another, as `make deps test` would, and prints
# how long each took at the end, also when one fails (then the status is
# that target's). .ci/run uses it:
#
#   scripts/phases.sh apt-deps tools kube-apiserver lint unit
#
# With PHASES_OUT=file the table is also written there.
set -uo pipefail
cd "$(dirname "$0")/.."

names=()
times=()
results=()
start_all=$SECONDS

report() {
	local total=$((SECONDS - start_all))
	{
		echo
		echo "phase times ($(nproc) cores, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
		for i in "${!names[@]}"; do
			printf '  %-16s %3dm%02ds  %s\n' "${names[$i]}" $((times[i] / 60)) $((times[i] % 60)) "${results[$i]}"
		done
		printf '  %-16s %3dm%02ds\n' total $((total / 60)) $((total % 60))
	} | tee ${PHASES_OUT:+"$PHASES_OUT"}
}

status=0
for target in "$@"; do
	start=$SECONDS
	echo "=== make $target"
	make "$target"
	rc=$?
	names+=("$target")
	times+=($((SECONDS - start)))
	if [ $rc -ne 0 ]; then
		results+=("FAILED ($rc)")
		status=$rc
		break
	fi
	results+=(ok)
done
report
exit $status
