#!/usr/bin/env bash
# gRPC pass-through beside a direct call. See bench/README.md.
#
# Starts the bench gRPC upstream (shop.v1.Orders, h2c, 127.0.0.1:19411)
# and one gateway (cleartext 127.0.0.1:18095, TOLLGATE_WORKERS workers,
# default 1) with a route passing /shop.v1.Orders/ calls through to it.
# and nginx (127.0.0.1:18096, the same workers) passing them with
# grpc_pass. h2load makes the same unary call (shop.v1.Orders/Create, a
# 12-byte message) over h2c to the upstream directly, through the gateway
# and through nginx. Prints one markdown table: calls/s, mean latency, the
# proxy's CPU per call and the backend's, and the ratios to the direct
# call and to nginx.
set -euo pipefail

source "$(dirname "$0")/lib.sh"
PROG=grpcpass.sh
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DURATION=${GRPC_DURATION:-${BENCH_DURATION:-10s}}
WARMUP=${GRPC_WARMUP:-${BENCH_WARMUP:-2s}}
H2_CONNS=${GRPC_H2_CONNS:-16}
H2_STREAMS=${GRPC_H2_STREAMS:-8}
TRANSPORT=${TOLLGATE_TRANSPORT:-reactor}
WORKERS=${TOLLGATE_WORKERS:-1}
BACKEND=${GRPC_BACKEND:-lean}
[[ $BACKEND == lean || $BACKEND == grpc-go ]] || die "GRPC_BACKEND must be lean or grpc-go"
RECORD=${GRPC_RECORD:-${BENCH_RECORD:-0}}
NPROC=$(nproc)
HZ=$(getconf CLK_TCK)

GRPC_ADDR=127.0.0.1:19411
GATEWAY_ADDR=127.0.0.1:18095
NGINX_ADDR=127.0.0.1:18096

COMMAND=$(command_line 'GRPC|BENCH|TOLLGATE' 'TOKEN|SECRET|PASSWORD|KEY' bench/grpcpass.sh)
[[ $WORKERS =~ ^[1-9][0-9]*$ ]] || die "TOLLGATE_WORKERS must be a positive integer"

mapfile -t need < <(missing curl)
command -v h2load >/dev/null 2>&1 || need+=(nghttp2-client)
NGINX_BIN=$(command -v nginx 2>/dev/null || true)
[[ -z $NGINX_BIN && -x /usr/sbin/nginx ]] && NGINX_BIN=/usr/sbin/nginx
[[ -n $NGINX_BIN ]] || need+=(nginx)
apt_install "${need[@]}"
if [[ -z $NGINX_BIN ]]; then
	NGINX_BIN=$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)
fi

log "building bin/tollgate and bin/bench-grpcupstream"
build tollgate bench-grpcupstream

make_tmp grpcpass
for addr in $GRPC_ADDR $GATEWAY_ADDR $NGINX_ADDR; do
	port_busy "$addr" && die "$addr is already in use; stop whatever listens there"
done
ulimit -n 65536 2>/dev/null || true

start grpcupstream bin/bench-grpcupstream -listen $GRPC_ADDR -engine "$BACKEND"
wait_port grpcupstream $GRPC_ADDR

cat >"$TMP/tollgate.yaml" <<-EOF2
	listen: "$GATEWAY_ADDR"
	watch: false
	admin: {listen: "off"}
	access_log: {path: "off"}
	services:
	  orders:
	    protocol: grpc
	    instances: [{addr: "$GRPC_ADDR"}]
	routes:
	  - {name: orders, match: {prefix: /shop.v1.Orders/}, service: orders}
EOF2
start_tollgate "" "$TRANSPORT" "$WORKERS" bin/tollgate "$TMP/tollgate.yaml"
wait_port tollgate $GATEWAY_ADDR

# nginx passing the same calls through (grpc_pass), the same workers.
prefix=$TMP/nginx
mkdir -p "$prefix"
user_line=""
if [[ $(id -u) == 0 ]]; then user_line="user nobody $(id -gn nobody 2>/dev/null || echo nogroup);"; fi
sed -e "s|@PREFIX@|$prefix|g" -e "s|@WORKERS@|$WORKERS|g" -e "s|@UPSTREAM@|$GRPC_ADDR|g" \
	-e "s|@LISTEN@|$NGINX_ADDR|g" -e "s|@USER_LINE@|$user_line|g" bench/nginx-grpc.conf.tmpl >"$prefix/nginx.conf"
chmod 755 "$TMP"
start nginx "$NGINX_BIN" -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log" -g 'daemon off;'
wait_port nginx $NGINX_ADDR

# CreateOrderRequest{sku: "abc", quantity: 2, customer_id: "c-1"}, framed:
# no compression, a 4-byte length, the message.
printf '\x00\x00\x00\x00\x0c\x0a\x03abc\x10\x02\x1a\x03c-1' >"$TMP/call.bin"
call() { # addr: one call with curl; prints its grpc-status and the reply's size
	curl -sS --http2-prior-knowledge -o "$TMP/reply.bin" -D - --data-binary @"$TMP/call.bin" \
		-H 'Content-Type: application/grpc' -H 'TE: trailers' "http://$1/shop.v1.Orders/Create" |
		awk 'tolower($1) == "grpc-status:" { s = $2 } END { printf "status %s, ", s }'
	wc -c <"$TMP/reply.bin"
}
for addr in $GRPC_ADDR $GATEWAY_ADDR $NGINX_ADDR; do
	got=$(call "$addr" | tr -d '\r')
	[[ $got == "status 0, "* ]] || die "the call to $addr did not succeed: $got"
done
direct=$(call $GRPC_ADDR | tr -d '\r')
through=$(call $GATEWAY_ADDR | tr -d '\r')
[[ $direct == "$through" ]] || die "the answer through the gateway ($through) differs from the direct one ($direct)"

declare -A RPS LAT CPU UPCPU ERR
pass() { # name addr proxy: the proxy's CPU is counted ("" for none)
	local name=$1 addr=$2 proxy=$3 out t0=0 t1=0 u0 u1 n args
	args=(-t2 -c"$H2_CONNS" -m"$H2_STREAMS" -d "$TMP/call.bin" -H 'content-type: application/grpc' -H 'te: trailers')
	h2load "${args[@]}" -D "${WARMUP%s}" "http://$addr/shop.v1.Orders/Create" >/dev/null 2>&1 || true
	[[ -n $proxy ]] && t0=$(proc_ticks "${PIDS[$proxy]}")
	u0=$(proc_ticks "${PIDS[grpcupstream]}")
	out=$(h2load "${args[@]}" -D "${DURATION%s}" "http://$addr/shop.v1.Orders/Create")
	[[ -n $proxy ]] && t1=$(proc_ticks "${PIDS[$proxy]}")
	u1=$(proc_ticks "${PIDS[grpcupstream]}")
	n=$(awk '/^requests:/ { print $8 }' <<<"$out")
	RPS[$name]=$(awk '/^finished in/ { printf "%.0f", $4 }' <<<"$out")
	LAT[$name]=$(awk '/^time for request:/ { print $6 }' <<<"$out")
	ERR[$name]=$(awk '/^requests:/ { f = $10 + $12 + $14 } /^status codes:/ { f += $7 + $9 } END { print f + 0 }' <<<"$out")
	CPU[$name]=$(awk -v t="$((t1 - t0))" -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.2f", (n > 0 ? t / hz * 1e6 / n : 0) }')
	UPCPU[$name]=$(awk -v t="$((u1 - u0))" -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.2f", (n > 0 ? t / hz * 1e6 / n : 0) }')
	log "$name: ${RPS[$name]} calls/s, mean ${LAT[$name]}, proxy ${CPU[$name]} µs CPU/call, backend ${UPCPU[$name]}, errors ${ERR[$name]}"
}
log "transport $TRANSPORT, $WORKERS worker(s), h2load -c$H2_CONNS -m$H2_STREAMS, $DURATION after $WARMUP warm-up"
pass direct $GRPC_ADDR ""
pass through $GATEWAY_ADDR tollgate
pass nginx $NGINX_ADDR nginx

{
	echo
	echo "$(date -u) · nproc $NPROC · $(go version | cut -d' ' -f3-) · transport $TRANSPORT · $WORKERS worker(s) · gRPC backend $BACKEND · h2load -c$H2_CONNS -m$H2_STREAMS · commit $(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
	echo
	echo "| call | calls/s | mean latency | proxy CPU µs/call | backend CPU µs/call | errors | calls/s ÷ direct | calls/s ÷ nginx | proxy CPU ÷ nginx |"
	echo "|---|---|---|---|---|---|---|---|---|"
	for name in direct through nginx; do
		echo "| $name | ${RPS[$name]} | ${LAT[$name]} | ${CPU[$name]} | ${UPCPU[$name]} | ${ERR[$name]} | $(ratio "${RPS[$name]}" "${RPS[direct]}") | $(ratio "${RPS[$name]}" "${RPS[nginx]}") | $(ratio "${CPU[$name]}" "${CPU[nginx]}") |"
	done
} | tee "$TMP/report.md"

record_report "gRPC pass-through beside a direct call"
