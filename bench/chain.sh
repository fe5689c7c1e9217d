#!/usr/bin/env bash
# The full chain beside the plain route. See bench/README.md.
#
# Starts the bench upstream (127.0.0.1:19200) and one gateway
# (127.0.0.1:18090, TOLLGATE_WORKERS workers, default 1) with two routes on
# that upstream: /plain/ (routing and proxying only) and /chain/ (signature
# check with replay protection, a limit per consumer and one per client
# address — both far above the load, so every request passes both — a
# circuit breaker, and the access log written to a file). The open-loop
# generator (bin/bench-loadgen, signing every /chain/ request with a fresh
# nonce) then offers each route CHAIN_RATE req/s, and afterwards
# CHAIN_MAX_RATE req/s, more than the gateway can take, which measures its
# capacity. Prints one markdown table: achieved req/s, corrected latency
# percentiles and the gateway's CPU per request for each, and chain ÷ plain.
set -euo pipefail

source "$(dirname "$0")/lib.sh"
PROG=chain.sh
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# ---------------------------------------------------------------- knobs
RATE=${CHAIN_RATE:-13000}
MAX_RATE=${CHAIN_MAX_RATE:-60000}
DURATION=${CHAIN_DURATION:-${BENCH_DURATION:-10s}}
WARMUP=${CHAIN_WARMUP:-${BENCH_WARMUP:-2s}}
CONNS=${CHAIN_CONNS:-64}
TRANSPORT=${TOLLGATE_TRANSPORT:-reactor}
WORKERS=${TOLLGATE_WORKERS:-1}
PROXY_CPUS=${CHAIN_PROXY_CPUS:-}
LOAD_CPUS=${CHAIN_LOAD_CPUS:-}
RECORD=${CHAIN_RECORD:-${BENCH_RECORD:-0}}
NPROC=$(nproc)
HZ=$(getconf CLK_TCK)

UPSTREAM_ADDR=127.0.0.1:19200
GATEWAY_ADDR=127.0.0.1:18090
QUERY='channel=app&page=2'
APP_KEY=bench-app

COMMAND=$(command_line 'CHAIN|BENCH|TOLLGATE' 'TOKEN|SECRET|PASSWORD|KEY' bench/chain.sh)

[[ $WORKERS =~ ^[1-9][0-9]*$ ]] || die "TOLLGATE_WORKERS must be a positive integer"
for r in "$RATE" "$MAX_RATE"; do
	[[ $r =~ ^[0-9]+([.][0-9]+)?$ ]] || die "CHAIN_RATE and CHAIN_MAX_RATE must be numbers"
done

# ---------------------------------------------------------------- build
log "building bin/tollgate, bin/bench-upstream and bin/bench-loadgen"
build tollgate bench-upstream bench-loadgen

# ---------------------------------------------------------------- processes
make_tmp chain
for addr in $UPSTREAM_ADDR $GATEWAY_ADDR; do
	port_busy "$addr" && die "$addr is already in use; stop whatever listens there"
done
ulimit -n 65536 2>/dev/null || true

start_pinned upstream "$LOAD_CPUS" bin/bench-upstream -listen $UPSTREAM_ADDR
wait_port upstream $UPSTREAM_ADDR

SECRET=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
NONCE_RATE=$(awk -v r="$MAX_RATE" 'BEGIN { printf "%d", r + 0.5 }')
LIMIT=$(awk -v r="$MAX_RATE" 'BEGIN { printf "%d", 10 * r }')
cat >"$TMP/tollgate.yaml" <<-EOF
	listen: "$GATEWAY_ADDR"
	workers: 0
	watch: false
	admin: {listen: "off"}
	access_log: {path: "$TMP/access.log"}
	consumers:
	  - {app_key: $APP_KEY, secret: "$SECRET", tier: enterprise}
	signature: {nonce_rate: $NONCE_RATE}
	services:
	  up:
	    instances: [{addr: "$UPSTREAM_ADDR"}]
	routes:
	  - {name: plain, match: {prefix: /plain/}, service: up}
	  - name: chain
	    match: {prefix: /chain/}
	    auth: signature
	    limits:
	      - {by: consumer, rate: $LIMIT, per: 1s}
	      - {by: ip, rate: $LIMIT, per: 1s}
	    breaker: {window: 10s, failure_rate: 0.5, min_requests: 100, open_for: 30s}
	    service: up
EOF
chmod 600 "$TMP/tollgate.yaml"
start_tollgate "$PROXY_CPUS" "$TRANSPORT" "$WORKERS" bin/tollgate "$TMP/tollgate.yaml"
wait_port tollgate $GATEWAY_ADDR
GW_PID=${PIDS[tollgate]}


# ---------------------------------------------------------------- passes
ROWS=()
pass() { # label path rate
	local label=$1 path=$2 rate=$3 out t0 t1 sign=()
	[[ $path == /chain/* ]] && sign=(-secret "$SECRET" -app-key $APP_KEY)
	t0=$(proc_ticks "$GW_PID")
	out=$(pinned "$LOAD_CPUS" bin/bench-loadgen -url "http://$GATEWAY_ADDR$path?$QUERY" -rate "$rate" \
		-duration "$DURATION" -warmup "$WARMUP" -conns "$CONNS" -label "$label" "${sign[@]}" | grep '^LOADGEN ')
	t1=$(proc_ticks "$GW_PID")
	val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$out"; }
	local achieved cpu
	achieved=$(val achieved_rps)
	# CPU over warm-up and measured time, per request answered then.
	cpu=$(awk -v t="$((t1 - t0))" -v hz="$HZ" -v n="$(val responses_total)" 'BEGIN { printf "%.2f", (n > 0 ? t / hz * 1e6 / n : 0) }')
	log "$label: $achieved req/s, $(val ok) ok, $(val non2xx) non-2xx, $(val errors) errors, p99.9 $(val c_p999_ms) ms, ${cpu} µs CPU/req"
	ROWS+=("$label|$rate|$achieved|$(val c_p50_ms)|$(val c_p99_ms)|$(val c_p999_ms)|$(val c_p9999_ms)|$(val ok)|$(val non2xx)|$(val errors)|$cpu")
}
log "transport $TRANSPORT, $WORKERS worker(s), $CONNS connections, $DURATION after $WARMUP warm-up"
pass plain /plain/x "$RATE"
pass chain /chain/x "$RATE"
pass "plain, capacity" /plain/x "$MAX_RATE"
pass "chain, capacity" /chain/x "$MAX_RATE"

# ---------------------------------------------------------------- report
field() { cut -d'|' -f"$2" <<<"${ROWS[$1]}"; }
{
	echo
	echo "$(date -u) · nproc $NPROC · $(go version | cut -d' ' -f3-) · transport $TRANSPORT · $WORKERS worker(s) · commit $(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
	echo
	echo "| route | offered req/s | achieved req/s | p50 ms | p99 ms | p99.9 ms | p99.99 ms | 2xx | non-2xx | errors | CPU µs/req |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
	for r in "${ROWS[@]}"; do echo "| ${r//|/ | } |"; done
	echo
	echo "chain ÷ plain: CPU per request $(ratio "$(field 1 11)" "$(field 0 11)") at $RATE req/s; capacity $(ratio "$(field 3 3)" "$(field 2 3)") ($(field 3 3) ÷ $(field 2 3) req/s). Latencies are corrected for coordinated omission."
} | tee "$TMP/report.md"

record_report "Full chain beside the plain route"
