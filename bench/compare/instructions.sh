#!/usr/bin/env bash
# make compare-instructions BASE=<commit>: the instructions each
# single-goroutine benchmark executes per op, at BASE and in the working
# tree, counted by valgrind (callgrind) and so not blurred by a busy host.
# Each binary runs each benchmark twice, for N and 3N iterations (-cpu 1,
# asynchronous preemption off, which valgrind needs); the difference of
# the two totals over 2N is the count per op, without the set-up. The
# collector's work that the benchmark's allocations cause is counted; a
# clock read counts its instructions, not its latency, and an atomic
# instruction counts as one. So this is a second view beside make
# compare's times, not a replacement for them.
set -euo pipefail
base=${1:?usage: instructions.sh BASE [N]}
n=${2:-100000}
command -v valgrind >/dev/null || { echo "instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add -q --detach "$work/base" "$base"
(cd "$work/base" && go test -c -o "$work/base.test" ./bench)
(cd "$root" && go test -c -o "$work/head.test" ./bench)
count() { # binary pattern iterations -> total instructions
	(cd "$root/bench" && GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		"$1" -test.run='^$' -test.bench="$2" -test.cpu 1 -test.benchtime="$3x" 2>&1 |
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
}
perop() { # binary pattern -> instructions per op
	local a b
	a=$(count "$1" "$2" "$n"); b=$(count "$1" "$2" $((3 * n)))
	echo $(((b - a) / (2 * n)))
}
echo "base $(git -C "$root" rev-parse --short "$base"), head $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo ' + working tree'); instructions per op (valgrind), -cpu 1"
printf '%-48s %12s %12s %9s\n' benchmark base head head/base
for b in 'BenchmarkCycle$/^impl=ledger$' 'BenchmarkReject$/^capacity$/^impl=ledger$' 'BenchmarkReject$/^unauthorized$/^impl=ledger$' \
	'BenchmarkReject$/^unknown-revision$/^impl=ledger$' 'BenchmarkReject$/^overloaded$/^impl=ledger$' \
	'BenchmarkReject$/^invalid-identifier$/^impl=ledger$' 'BenchmarkCriticalSection$'; do
	x=$(perop "$work/base.test" "$b"); y=$(perop "$work/head.test" "$b")
	name=$(echo "$b" | tr -d '^$')
	printf '%-48s %12d %12d %8.2fx\n' "$name" "$x" "$y" "$(echo "$y / $x" | bc -l)"
done
