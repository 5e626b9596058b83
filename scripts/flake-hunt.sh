#!/usr/bin/env bash
# Runs packages' tests many times over, as `make test` runs them, to find
# the tests that fail only now and then: each package $COUNT times with the
# race detector, then its TestTiming*/TestNoRace* tests (which skip under
# -race) $COUNT times without it.
#
#   scripts/flake-hunt.sh                    every package whose tests start servers or processes
#   PKG='libs/bus services/indexer/internal/app' COUNT=20 scripts/flake-hunt.sh
#
# PKG names package directories relative to the repository root. Each run's
# output is kept in $OUT/<package>.log (default bench-out/flake-hunt); the
# summary lists every test that failed and how often, and the exit status is
# 1 when any did.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
count=${COUNT:-10}
out=${OUT:-bench-out/flake-hunt}
timeout=${TIMEOUT:-60m}
mkdir -p "$out"

# Packages whose tests start a server or a process: an embedded NATS or
# etcd, redis-server, the MongoDB wire server, kube-apiserver, a child
# process, a listener of their own (e2e among them: the longest, last).
servers='"github.com/hermod/hermod/testkit/|"os/exec"|"net/http/httptest"|net\.Listen\(|grpc\.NewServer\(|zmq4\.|embed\.StartEtcd|server\.NewServer\('
if [ -n "${PKG:-}" ]; then
	read -r -a pkgs <<<"$PKG"
else
	# ... and testkit's own packages, which are such servers.
	mapfile -t pkgs < <({ git ls-files -- '*_test.go' | xargs grep -lE "$servers"; git ls-files -- 'testkit/*_test.go'; } | xargs -n1 dirname | sort -u)
fi

# module returns the directory of the module that holds package dir $1.
module() {
	local d=$1
	while [ "$d" != . ] && [ ! -f "$d/go.mod" ]; do d=$(dirname "$d"); done
	echo "$d"
}

summary=$out/summary.txt
: >"$summary"
status=0
for pkg in "${pkgs[@]}"; do
	pkg=${pkg#./}
	pkg=${pkg%/}
	mod=$(module "$pkg")
	rel=./${pkg#"$mod"}
	rel=${rel/#.\/\//./}
	[ "$pkg" = "$mod" ] && rel=.
	log=$out/$(echo "$pkg" | tr / _).log
	start=$(date +%s)
	failed=0
	echo "flake-hunt $pkg: -race -count=$count"
	(cd "$root/$mod" && go test -race -count="$count" -timeout "$timeout" "$rel") >"$log" 2>&1 || failed=1
	if git grep -qE '^func (TestTiming|TestNoRace)' -- "$pkg/*_test.go"; then
		echo "flake-hunt $pkg: timing tests -count=$count"
		(cd "$root/$mod" && go test -count="$count" -timeout "$timeout" -run '^(TestTiming|TestNoRace)' "$rel") >>"$log" 2>&1 || failed=1
	fi
	took=$(($(date +%s) - start))
	if [ $failed = 0 ]; then
		echo "ok    $pkg ($count runs, ${took}s)" | tee -a "$summary"
		continue
	fi
	status=1
	echo "FAIL  $pkg ($count runs, ${took}s; log $log)" | tee -a "$summary"
	# tests that failed, with how often; then failures outside any test
	# (TestMain's leak check, a panic, a timeout)
	grep -oE -- '--- FAIL: [^ ]+' "$log" | sed 's/--- FAIL: //' | sort | uniq -c | sed 's/^/      /' | tee -a "$summary" || true
	grep -E '^(panic:|goroutines left behind|.*found unexpected goroutines|.*test timed out)' "$log" | sort | uniq -c | sed 's/^/      /' | tee -a "$summary" || true
done
echo
echo "flake-hunt: $(grep -c '^ok' "$summary" || true) packages passed $count runs, $(grep -c '^FAIL' "$summary" || true) failed (summary in $summary)"
exit $status
