#!/usr/bin/env bash
# Runs packages' tests many times over, as `make test` runs them, to find
# the tests that fail only now and then: every package $COUNT times with
# the race detector (in one go test run, $P test binaries at once, as
# `make unit` runs them), then the TestTiming*/TestNoRace* tests (which
# skip under -race) $COUNT times without it.
#
#   scripts/flake-hunt.sh                    every package whose tests start servers or processes
#   PKG='libs/bus services/indexer/internal/app' COUNT=20 scripts/flake-hunt.sh
#   HERMOD_E2E_TLS=1 PKG=e2e scripts/flake-hunt.sh
#
# PKG names package directories relative to the repository root. The runs'
# output is kept in $OUT (default bench-out/flake-hunt): race.log and
# timing.log; summary.txt lists every package and test that failed and how
# often. The exit status is 1 when any did.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${COUNT:-10}
out=${OUT:-bench-out/flake-hunt}
timeout=${TIMEOUT:-120m}
parallel=${P:-$(($(nproc) + 2))}
mkdir -p "$out"

# Packages whose tests start a server or a process: an embedded NATS or
# etcd, redis-server, the MongoDB wire server, kube-apiserver, a child
# process, a listener of their own (e2e among them).
servers='"github.com/hermod/hermod/testkit/|"os/exec"|"net/http/httptest"|net\.Listen\(|grpc\.NewServer\(|zmq4\.|embed\.StartEtcd|server\.NewServer\('
if [ -n "${PKG:-}" ]; then
	read -r -a dirs <<<"$PKG"
else
	# ... and testkit's own packages, which are such servers.
	mapfile -t dirs < <({ git ls-files -- '*_test.go' | xargs grep -lE "$servers"; git ls-files -- 'testkit/*_test.go'; } | xargs -n1 dirname | sort -u)
fi
pkgs=()
timing=()
for d in "${dirs[@]}"; do
	d=${d#./}
	d=${d%/}
	pkgs+=("./$d")
	if git grep -qE '^func (TestTiming|TestNoRace)' -- "$d/*_test.go"; then
		timing+=("./$d")
	fi
done

summary=$out/summary.txt
: >"$summary"
status=0
rm -f "$out/race.log" "$out/timing.log"
start=$(date +%s)
echo "flake-hunt: ${#pkgs[@]} packages, -race -count=$count -p $parallel"
go test -race -count="$count" -p "$parallel" -timeout "$timeout" "${pkgs[@]}" >"$out/race.log" 2>&1 || status=1
if [ ${#timing[@]} -gt 0 ]; then
	echo "flake-hunt: timing tests of ${#timing[@]} packages, -count=$count"
	go test -count="$count" -timeout "$timeout" -run '^(TestTiming|TestNoRace)' "${timing[@]}" >"$out/timing.log" 2>&1 || status=1
fi
took=$(($(date +%s) - start))
{
	echo "flake-hunt: ${#pkgs[@]} packages x $count runs under -race, ${#timing[@]} packages' timing tests x $count, ${took}s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	grep -hE '^(ok|FAIL)\s' "$out"/race.log "$out"/timing.log 2>/dev/null | awk '{print $1, $2}' | sort | uniq -c | sed 's/^/  /' || true
	echo "tests that failed (runs):"
	grep -hoE -- '--- FAIL: [^ ]+' "$out"/race.log "$out"/timing.log 2>/dev/null | sed 's/--- FAIL: //' | sort | uniq -c | sed 's/^/  /' || true
	echo "failures outside a test:"
	grep -hE '^(panic:|goroutines left behind|.*found unexpected goroutines|.*test timed out|WARNING: DATA RACE)' "$out"/race.log "$out"/timing.log 2>/dev/null | sort | uniq -c | sed 's/^/  /' || true
} | tee "$summary"
exit $status
