#!/usr/bin/env bash
# A transcoded gRPC call beside a plain HTTP proxied call. See
# bench/README.md.
#
# Starts the bench upstream (HTTP, 127.0.0.1:19400), the bench gRPC
# upstream (shop.v1.Orders, h2c, 127.0.0.1:19401) and one gateway
# (127.0.0.1:18094, TOLLGATE_WORKERS workers, default 1) with two routes:
# /plain/ proxied to the HTTP upstream, and /v1/orders transcoded (JSON
# body to shop.v1.Orders/Create, the reply back to JSON). wrk POSTs the
# same JSON body to each. Prints one markdown table: req/s, p99, the
# gateway's CPU per request and the backend's, and transcoded ÷ plain.
set -euo pipefail

source "$(dirname "$0")/lib.sh"
PROG=grpc.sh
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DURATION=${GRPC_DURATION:-${BENCH_DURATION:-10s}}
WARMUP=${GRPC_WARMUP:-${BENCH_WARMUP:-2s}}
CONNS=${GRPC_CONNS:-64}
TRANSPORT=${TOLLGATE_TRANSPORT:-reactor}
WORKERS=${TOLLGATE_WORKERS:-1}
BACKEND=${GRPC_BACKEND:-lean}
RECORD=${GRPC_RECORD:-${BENCH_RECORD:-0}}
NPROC=$(nproc)
HZ=$(getconf CLK_TCK)

UPSTREAM_ADDR=127.0.0.1:19400
GRPC_ADDR=127.0.0.1:19401
GATEWAY_ADDR=127.0.0.1:18094

COMMAND=$(command_line 'GRPC|BENCH|TOLLGATE' 'TOKEN|SECRET|PASSWORD|KEY' bench/grpc.sh)
[[ $WORKERS =~ ^[1-9][0-9]*$ ]] || die "TOLLGATE_WORKERS must be a positive integer"
[[ $BACKEND == lean || $BACKEND == grpc-go ]] || die "GRPC_BACKEND must be lean or grpc-go"

mapfile -t need < <(missing wrk curl)
apt_install "${need[@]}"

log "building bin/tollgate, bin/bench-upstream and bin/bench-grpcupstream"
build tollgate bench-upstream bench-grpcupstream

make_tmp grpc
for addr in $UPSTREAM_ADDR $GRPC_ADDR $GATEWAY_ADDR; do
	port_busy "$addr" && die "$addr is already in use; stop whatever listens there"
done
ulimit -n 65536 2>/dev/null || true

cp internal/testutil/grpcorders/orders.pb "$TMP/orders.pb"
start upstream bin/bench-upstream -listen $UPSTREAM_ADDR
start grpcupstream bin/bench-grpcupstream -listen $GRPC_ADDR -engine "$BACKEND"
wait_port upstream $UPSTREAM_ADDR
wait_port grpcupstream $GRPC_ADDR

cat >"$TMP/tollgate.yaml" <<-EOF2
	listen: "$GATEWAY_ADDR"
	watch: false
	admin: {listen: "off"}
	access_log: {path: "off"}
	services:
	  up:
	    instances: [{addr: "$UPSTREAM_ADDR"}]
	  orders:
	    protocol: grpc
	    instances: [{addr: "$GRPC_ADDR"}]
	routes:
	  - {name: plain, match: {prefix: /plain/}, service: up}
	  - name: transcoded
	    match: {path: /v1/orders, methods: [POST]}
	    grpc: {service: shop.v1.Orders, method: Create, descriptors: "$TMP/orders.pb"}
	    service: orders
EOF2
start_tollgate "" "$TRANSPORT" "$WORKERS" bin/tollgate "$TMP/tollgate.yaml"
wait_port tollgate $GATEWAY_ADDR
out=$(curl -sS -X POST -H 'Content-Type: application/json' -d '{"sku":"abc","quantity":2,"customerId":"c-1"}' "http://$GATEWAY_ADDR/v1/orders")
[[ $out == *'"id":"o-abc"'* ]] || die "the transcoded route does not answer as it should: $out"

declare -A RPS P99 CPU UPCPU ERR
pass() { wrk_pass "$1" "$2" "$3" bench/wrk/post-json.lua; } # name path backend
log "transport $TRANSPORT, $WORKERS worker(s), $CONNS connections, $DURATION after $WARMUP warm-up"
pass plain /plain/x upstream
pass transcoded /v1/orders grpcupstream

{
	echo
	echo "$(date -u) · nproc $NPROC · $(go version | cut -d' ' -f3-) · transport $TRANSPORT · $WORKERS worker(s) · gRPC backend $BACKEND · commit $(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
	echo
	echo "| route | req/s | p99 | gateway CPU µs/req | backend CPU µs/req | errors | req/s ÷ plain | gateway CPU ÷ plain |"
	echo "|---|---|---|---|---|---|---|---|"
	for name in plain transcoded; do
		echo "| $name | ${RPS[$name]} | ${P99[$name]} | ${CPU[$name]} | ${UPCPU[$name]} | ${ERR[$name]} | $(ratio "${RPS[$name]}" "${RPS[plain]}") | $(ratio "${CPU[$name]}" "${CPU[plain]}") |"
	done
} | tee "$TMP/report.md"

record_report "A transcoded gRPC call beside a plain HTTP one"
