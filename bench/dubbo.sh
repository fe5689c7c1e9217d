#!/usr/bin/env bash
# A Dubbo call (JSON to a generic invocation over the Dubbo 2 protocol,
# the answer back to JSON) beside a plain HTTP proxied call.
#
# Starts the bench upstream (HTTP, 127.0.0.1:19410), the Dubbo provider of
# the tests (test/dubboprovider, dubbo-go, 127.0.0.1:19411) and one gateway
# (127.0.0.1:18095, TOLLGATE_WORKERS workers, default 1) with two routes:
# /plain/ proxied to the HTTP upstream, and /v1/orders/find calling
# com.shop.OrderService.findOrders(com.shop.OrderQuery) with the JSON
# body. wrk POSTs the same JSON body to each. Prints one markdown table:
# req/s, p99, the gateway's CPU per request and the backend's, and
# dubbo ÷ plain.
set -euo pipefail

source "$(dirname "$0")/lib.sh"
PROG=dubbo.sh
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DURATION=${DUBBO_DURATION:-${BENCH_DURATION:-10s}}
WARMUP=${DUBBO_WARMUP:-${BENCH_WARMUP:-2s}}
CONNS=${DUBBO_CONNS:-64}
TRANSPORT=${TOLLGATE_TRANSPORT:-reactor}
WORKERS=${TOLLGATE_WORKERS:-1}
RECORD=${DUBBO_RECORD:-${BENCH_RECORD:-0}}
NPROC=$(nproc)
HZ=$(getconf CLK_TCK)

UPSTREAM_ADDR=127.0.0.1:19410
DUBBO_PORT=19411
DUBBO_ADDR=127.0.0.1:$DUBBO_PORT
GATEWAY_ADDR=127.0.0.1:18095

COMMAND=$(command_line 'DUBBO|BENCH|TOLLGATE' 'TOKEN|SECRET|PASSWORD|KEY' bench/dubbo.sh)
[[ $WORKERS =~ ^[1-9][0-9]*$ ]] || die "TOLLGATE_WORKERS must be a positive integer"

mapfile -t need < <(missing wrk curl)
apt_install "${need[@]}"

log "building bin/tollgate, bin/bench-upstream and bin/dubboprovider"
build tollgate bench-upstream
(cd test/dubboprovider && go build -o ../../bin/dubboprovider .)

make_tmp dubbo
for addr in $UPSTREAM_ADDR $DUBBO_ADDR $GATEWAY_ADDR; do
	port_busy "$addr" && die "$addr is already in use; stop whatever listens there"
done
ulimit -n 65536 2>/dev/null || true

start upstream bin/bench-upstream -listen $UPSTREAM_ADDR
start provider bin/dubboprovider -port $DUBBO_PORT
wait_port upstream $UPSTREAM_ADDR
wait_port provider $DUBBO_ADDR

cat >"$TMP/tollgate.yaml" <<-EOF2
	listen: "$GATEWAY_ADDR"
	watch: false
	admin: {listen: "off"}
	access_log: {path: "off"}
	services:
	  up:
	    instances: [{addr: "$UPSTREAM_ADDR"}]
	  orders:
	    protocol: dubbo
	    instances: [{addr: "$DUBBO_ADDR"}]
	routes:
	  - {name: plain, match: {prefix: /plain/}, service: up}
	  - name: dubbo
	    match: {path: /v1/orders/find, methods: [POST]}
	    dubbo:
	      interface: com.shop.OrderService
	      method: findOrders
	      version: 1.0.0
	      group: g1
	      params: [{type: com.shop.OrderQuery, from: json}]
	    service: orders
EOF2
start_tollgate "" "$TRANSPORT" "$WORKERS" bin/tollgate "$TMP/tollgate.yaml"
wait_port tollgate $GATEWAY_ADDR
out=$(curl -sS -X POST -H 'Content-Type: application/json' -d '{"customer":"ann","items":["a"],"limit":4}' "http://$GATEWAY_ADDR/v1/orders/find")
[[ $out == *'"id":"ann-4"'* ]] || die "the Dubbo route does not answer as it should: $out"

declare -A RPS P99 CPU UPCPU ERR
pass() { wrk_pass "$1" "$2" "$3" bench/wrk/dubbo-find.lua; } # name path backend
log "transport $TRANSPORT, $WORKERS worker(s), $CONNS connections, $DURATION after $WARMUP warm-up"
pass plain /plain/x upstream
pass dubbo /v1/orders/find provider

{
	echo
	echo "$(date -u) · nproc $NPROC · $(go version | cut -d' ' -f3-) · transport $TRANSPORT · $WORKERS worker(s) · commit $(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
	echo
	echo "| route | req/s | p99 | gateway CPU µs/req | backend CPU µs/req | errors | req/s ÷ plain | gateway CPU ÷ plain |"
	echo "|---|---|---|---|---|---|---|---|"
	for name in plain dubbo; do
		echo "| $name | ${RPS[$name]} | ${P99[$name]} | ${CPU[$name]} | ${UPCPU[$name]} | ${ERR[$name]} | $(ratio "${RPS[$name]}" "${RPS[plain]}") | $(ratio "${CPU[$name]}" "${CPU[plain]}") |"
	done
} | tee "$TMP/report.md"

record_report "A Dubbo call beside a plain HTTP one"
