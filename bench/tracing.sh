#!/usr/bin/env bash
# What exporting spans costs the gateway: the plain proxy bench
# (bench/run.sh, wrk through the gateway to the bench upstream) with a
# tracing section exporting over OTLP/gRPC to a sink that discards
# (bench/cmd/otlpsink), at each sample of TRACING_SAMPLES ("off": no
# tracing section), the samples taking turns for TRACING_REPS rounds so
# that drift on a shared host spreads over all of them. Prints the median
# CPU µs per request of each and its ratio to sample 0.
#
#	BENCH_TRANSPORTS=netpoll BENCH_DURATION=5s bash bench/tracing.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
PROG=tracing

SAMPLES=${TRACING_SAMPLES:-off 0 0.1 1}
REPS=${TRACING_REPS:-3}
SINK_ADDR=${TRACING_SINK:-127.0.0.1:4327}
export BENCH_TARGETS=tollgate BENCH_ROUNDS=1 BENCH_OPEN_LOOP=0
export BENCH_TRANSPORTS=${BENCH_TRANSPORTS:-netpoll}

build tollgate bench-otlpsink
export BENCH_GATEWAY_BIN=$PWD/bin/tollgate
make_tmp tracing
port_busy "$SINK_ADDR" && die "$SINK_ADDR is already in use; stop whatever listens there"
start sink bin/bench-otlpsink -listen "$SINK_ADDR"
for ((i = 0; i < 50; i++)); do port_busy "$SINK_ADDR" && break; sleep 0.1; done

for ((rep = 1; rep <= REPS; rep++)); do
	for s in $SAMPLES; do
		unset BENCH_CONFIG_EXTRA
		if [[ $s != off ]]; then
			printf 'tracing:\n  otlp: {endpoint: "%s", protocol: grpc}\n  sample: %s\n' "$SINK_ADDR" "$s" >"$TMP/extra-$s.yaml"
			export BENCH_CONFIG_EXTRA=$TMP/extra-$s.yaml
		fi
		log "round $rep, sample $s"
		bash bench/run.sh >"$TMP/run-$s-$rep.out" 2>&1 || { cat "$TMP/run-$s-$rep.out" >&2; die "bench/run.sh failed"; }
		# The table row: req/s is column 5, CPU µs/req column 11.
		grep -E '^\| [a-z-]+ \| tollgate \| wrk' "$TMP/run-$s-$rep.out" |
			awk -F'|' -v s="$s" '{ gsub(/ /, "", $5); gsub(/ /, "", $11); sub(/\(.*/, "", $5); print s, $5, $11 }' >>"$TMP/rows"
	done
done
stop sink

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
base=$(awk '$1 == "0" { print $3 }' "$TMP/rows" | median)
echo
echo "$(date -u) · nproc $(nproc) · transport $BENCH_TRANSPORTS · $REPS rounds of ${BENCH_DURATION:-10s} per sample · sink: $(tail -n 1 "$TMP/sink.log")"
echo
echo "| tracing | req/s (median) | CPU µs/req (median) | CPU µs/req by round | ÷ sample 0 |"
echo "|---|---|---|---|---|"
for s in $SAMPLES; do
	rps=$(awk -v s="$s" '$1 == s { print $2 }' "$TMP/rows" | median)
	cpu=$(awk -v s="$s" '$1 == s { print $3 }' "$TMP/rows" | median)
	all=$(awk -v s="$s" '$1 == s { printf "%s ", $3 }' "$TMP/rows")
	label="sample: $s"
	[[ $s == off ]] && label="no tracing section"
	printf '| %s | %.0f | %.2f | %s | %s |\n' "$label" "$rps" "$cpu" "${all% }" \
		"$(awk -v a="$cpu" -v b="${base:-0}" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }')"
done
