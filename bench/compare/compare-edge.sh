#!/usr/bin/env bash
# make compare-edge (docs/latentd.md, "Cost of an invocation"): latentd
# against the bare handler (edge/bench/barewasm), both running the
# demonstration guest, in ROUNDS interleaved rounds of
# `wrk -t2 -cCONNS -dDURATION`, POSTing world to
# /v1/invoke/acme/hello/greet. latentd runs with
# edge/latentd/testdata/bench-policy.json (the demonstration policy with
# CPU threshold 1.0 and acme's live and queued limits at 64), the
# demonstration tokens and no access log. Every answer must be 2xx: a
# round with non-2xx answers or socket errors fails the run. Prints each
# round's requests/s, the load average before it and the round's ratio
# latentd / bare, then the medians, their ratio and the median of the
# rounds' ratios. PROFILE=FILE also writes a CPU profile of latentd
# (/debug/pprof/profile, as the demonstration administrator) taken during
# the last latentd round, and prints its top functions. BEFORE=DIR also
# runs, in each round after the other two, a latentd built from the
# source tree DIR (another revision of this repository, say `git archive
# REV | tar -x -C DIR`) with the same flags, and prints its ratio to the
# bare handler beside this one's.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-32}
THREADS=${THREADS:-2}
LATENTD_PORT=${LATENTD_PORT:-18480}
BARE_PORT=${BARE_PORT:-18481}
GO=${GO:-go}

root=$(cd "$(dirname "$0")/../.." && pwd)
command -v wrk >/dev/null || { echo "compare-edge: wrk is not installed (apt-get install -y wrk)" >&2; exit 2; }
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && $GO build -o "$work/latentd" ./cmd/latentd)
BEFORE_PORT=${BEFORE_PORT:-18482}
if [ -n "${BEFORE:-}" ]; then
	(cd "$BEFORE" && $GO build -o "$work/before" ./cmd/latentd)
fi
(cd "$root/edge" && $GO build -o "$work/barewasm" ./bench/barewasm)

"$work/latentd" -policy "$root/edge/latentd/testdata/bench-policy.json" \
	-tokens "$root/edge/latentd/demo/tokens.json" -access-log=false \
	-listen "127.0.0.1:$LATENTD_PORT" >"$work/latentd.log" 2>&1 &
pids+=($!)
if [ -n "${BEFORE:-}" ]; then
	"$work/before" -policy "$root/edge/latentd/testdata/bench-policy.json" \
		-tokens "$root/edge/latentd/demo/tokens.json" -access-log=false \
		-listen "127.0.0.1:$BEFORE_PORT" >"$work/before.log" 2>&1 &
	pids+=($!)
fi
"$work/barewasm" -listen "127.0.0.1:$BARE_PORT" 2>"$work/barewasm.log" &
pids+=($!)

path=/v1/invoke/acme/hello/greet
ready() { # name port
	for _ in $(seq 200); do
		if [ "$(curl -sS -o /dev/null -w '%{http_code}' -X POST -H 'Authorization: Bearer latent-demo-alice' \
			--data-binary world "http://127.0.0.1:$2$path" 2>/dev/null)" = 200 ]; then return 0; fi
		sleep 0.1
	done
	echo "compare-edge: $1 did not answer 200 on 127.0.0.1:$2" >&2
	cat "$work/$1.log" >&2
	exit 1
}
ready latentd "$LATENTD_PORT"
ready barewasm "$BARE_PORT"
if [ -n "${BEFORE:-}" ]; then ready before "$BEFORE_PORT"; fi
echo "hello: $(curl -sS -X POST -H 'Authorization: Bearer latent-demo-alice' --data-binary world "http://127.0.0.1:$LATENTD_PORT$path") (latentd)," \
	"$(curl -sS -X POST --data-binary world "http://127.0.0.1:$BARE_PORT$path") (bare)"

# one NAME PORT: one wrk run; prints its requests/s, fails on any answer
# that is not 2xx and on socket errors.
one() {
	local out rps
	out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" -s "$root/bench/compare/invoke.lua" "http://127.0.0.1:$2$path")
	if grep -q 'Non-2xx' <<<"$out" || grep -q 'Socket errors' <<<"$out"; then
		echo "compare-edge: $1 answered something other than 2xx, or a socket failed:" >&2
		echo "$out" >&2
		exit 1
	fi
	rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
	local reqs
	reqs=$(awk '/requests in/ {print $1}' <<<"$out")
	echo "$rps $reqs"
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

echo "wrk -t$THREADS -c$CONNS -d$DURATION, $ROUNDS interleaved rounds, POST world to $path; $(nproc) CPUs"
lat=() bare=() ratios=() before=() bratios=()
for r in $(seq "$ROUNDS"); do
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	res=$(one barewasm "$BARE_PORT")
	read -r b breqs <<<"$res"
	bare+=("$b")
	load2=$(cut -d' ' -f1-3 /proc/loadavg)
	profiler=
	if [ -n "${PROFILE:-}" ] && [ "$r" = "$ROUNDS" ]; then
		curl -sS -H 'Authorization: Bearer latent-demo-admin' -o "$PROFILE" \
			"http://127.0.0.1:$LATENTD_PORT/debug/pprof/profile?seconds=${DURATION%s}" &
		profiler=$!
	fi
	res=$(one latentd "$LATENTD_PORT")
	read -r l lreqs <<<"$res"
	if [ -n "$profiler" ]; then wait "$profiler"; fi
	lat+=("$l")
	ratio=$(awk -v l="$l" -v b="$b" 'BEGIN {printf "%.3f", l/b}')
	ratios+=("$ratio")
	printf 'round %d: bare %9.1f req/s (%s requests, all 2xx; load %s)  latentd %9.1f req/s (%s requests, all 2xx; load %s)  ratio %s\n' \
		"$r" "$b" "$breqs" "$load" "$l" "$lreqs" "$load2" "$ratio"
	if [ -n "${BEFORE:-}" ]; then
		load3=$(cut -d' ' -f1-3 /proc/loadavg)
		res=$(one before "$BEFORE_PORT")
		read -r o oreqs <<<"$res"
		before+=("$o")
		bratio=$(awk -v l="$o" -v b="$b" 'BEGIN {printf "%.3f", l/b}')
		bratios+=("$bratio")
		printf '         latentd built from %s %9.1f req/s (%s requests, all 2xx; load %s)  ratio %s\n' \
			"$BEFORE" "$o" "$oreqs" "$load3" "$bratio"
	fi
done
mb=$(printf '%s\n' "${bare[@]}" | median)
ml=$(printf '%s\n' "${lat[@]}" | median)
printf 'median: bare %.1f req/s, latentd %.1f req/s, ratio of the medians latentd/bare %.3f (median of the rounds'"'"' ratios %s); load after %s\n' \
	"$mb" "$ml" "$(awk -v l="$ml" -v b="$mb" 'BEGIN {print l/b}')" "$(printf '%s\n' "${ratios[@]}" | median)" "$(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${BEFORE:-}" ]; then
	mo=$(printf '%s\n' "${before[@]}" | median)
	printf 'median: latentd built from %s %.1f req/s, ratio of the medians to bare %.3f (median of the rounds'"'"' ratios %s)\n' \
		"$BEFORE" "$mo" "$(awk -v l="$mo" -v b="$mb" 'BEGIN {print l/b}')" "$(printf '%s\n' "${bratios[@]}" | median)"
fi
if [ -n "${PROFILE:-}" ]; then
	echo "CPU profile of latentd during round $ROUNDS: $PROFILE"
	(cd "$root/edge" && $GO tool pprof -top -nodecount 25 "$PROFILE" 2>/dev/null | sed -n '1,35p')
fi
