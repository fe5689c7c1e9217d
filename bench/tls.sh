#!/usr/bin/env bash
# HTTPS beside nginx. See bench/README.md.
#
# Makes an ECDSA P-256 certificate, starts the bench upstream
# (127.0.0.1:19300), the gateway with a TLS listener (127.0.0.1:18443,
# TOLLGATE_WORKERS workers, default 1) and nginx terminating TLS with the
# same certificate (127.0.0.1:18444, as many workers), then for each: wrk
# over keep-alive connections, and wrk with "Connection: close", where
# every request is a new TLS connection and handshake (wrk does not resume
# sessions), then h2load over HTTP/2 (H2_CONNS connections with
# H2_STREAMS concurrent streams each), over TLS and then over cleartext
# with prior knowledge (h2c: the gateway's cleartext port, and an nginx
# cleartext listener with http2, 127.0.0.1:18445). Prints one markdown table: req/s,
# latency (p99 for wrk, the mean for h2load, which reports no
# percentiles), CPU per request, and the ratios to nginx; handshakes per
# second per core are the second pass's req/s divided by the proxy's busy
# cores.
set -euo pipefail

source "$(dirname "$0")/lib.sh"
PROG=tls.sh
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# ---------------------------------------------------------------- knobs
DURATION=${TLS_DURATION:-${BENCH_DURATION:-10s}}
WARMUP=${TLS_WARMUP:-${BENCH_WARMUP:-2s}}
CONNS=${TLS_CONNS:-64}
H2_CONNS=${TLS_H2_CONNS:-16}
H2_STREAMS=${TLS_H2_STREAMS:-8}
TRANSPORT=${TOLLGATE_TRANSPORT:-reactor}
WORKERS=${TOLLGATE_WORKERS:-1}
PROXY_CPUS=${TLS_PROXY_CPUS:-}
LOAD_CPUS=${TLS_LOAD_CPUS:-}
RECORD=${TLS_RECORD:-${BENCH_RECORD:-0}}
NPROC=$(nproc)
HZ=$(getconf CLK_TCK)

UPSTREAM_ADDR=127.0.0.1:19300
GATEWAY_ADDR=127.0.0.1:18092
GATEWAY_TLS=127.0.0.1:18443
NGINX_ADDR=127.0.0.1:18444
NGINX_H2C=127.0.0.1:18445

COMMAND=$(command_line 'TLS|BENCH|TOLLGATE' 'TOKEN|SECRET|PASSWORD|KEY' bench/tls.sh)
[[ $WORKERS =~ ^[1-9][0-9]*$ ]] || die "TOLLGATE_WORKERS must be a positive integer"

# ---------------------------------------------------------------- prerequisites
mapfile -t need < <(missing wrk curl openssl)
command -v h2load >/dev/null 2>&1 || need+=(nghttp2-client)
NGINX_BIN=$(command -v nginx 2>/dev/null || true)
[[ -z $NGINX_BIN && -x /usr/sbin/nginx ]] && NGINX_BIN=/usr/sbin/nginx
[[ -n $NGINX_BIN ]] || need+=(nginx)
if ((${#need[@]})); then
	apt_install "${need[@]}"
	NGINX_BIN=$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)
fi

log "building bin/tollgate and bin/bench-upstream"
build tollgate bench-upstream

# ---------------------------------------------------------------- processes
make_tmp tls
for addr in $UPSTREAM_ADDR $GATEWAY_ADDR $GATEWAY_TLS $NGINX_ADDR $NGINX_H2C; do
	port_busy "$addr" && die "$addr is already in use; stop whatever listens there"
done
ulimit -n 65536 2>/dev/null || true

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-subj /CN=bench.test -addext subjectAltName=DNS:bench.test,IP:127.0.0.1 \
	-keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null
chmod 644 "$TMP/key.pem" "$TMP/cert.pem" # nginx's workers run as nobody

start_pinned upstream "$LOAD_CPUS" bin/bench-upstream -listen $UPSTREAM_ADDR
wait_port upstream $UPSTREAM_ADDR

plain_config "$TMP/tollgate.yaml" "$GATEWAY_ADDR" off "$UPSTREAM_ADDR"
cat >>"$TMP/tollgate.yaml" <<-EOF2
	tls:
	  listen: "$GATEWAY_TLS"
	  certs: [{cert: "$TMP/cert.pem", key: "$TMP/key.pem"}]
EOF2
start_tollgate "$PROXY_CPUS" "$TRANSPORT" "$WORKERS" bin/tollgate "$TMP/tollgate.yaml"
wait_port tollgate $GATEWAY_TLS

prefix=$TMP/nginx
mkdir -p "$prefix"
user_line=""
if [[ $(id -u) == 0 ]]; then user_line="user nobody $(id -gn nobody 2>/dev/null || echo nogroup);"; fi
sed -e "s|@PREFIX@|$prefix|g" -e "s|@WORKERS@|$WORKERS|g" -e "s|@UPSTREAM@|$UPSTREAM_ADDR|g" \
	-e "s|@LISTEN@|$NGINX_ADDR|g" -e "s|@H2C_LISTEN@|$NGINX_H2C|g" -e "s|@USER_LINE@|$user_line|g" \
	-e "s|@CERT@|$TMP/cert.pem|g" -e "s|@KEY@|$TMP/key.pem|g" bench/nginx-tls.conf.tmpl >"$prefix/nginx.conf"
chmod 755 "$TMP"
start_pinned nginx "$PROXY_CPUS" "$NGINX_BIN" -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log" -g 'daemon off;'
wait_port nginx $NGINX_ADDR


# ---------------------------------------------------------------- passes
declare -A RPS CPU P99 ERR
pass() { # target addr mode
	local target=$1 addr=$2 mode=$3 pid hdr=() out t0 t1 n secs
	pid=${PIDS[$target]}
	[[ $mode == handshake ]] && hdr=(-H "Connection: close")
	pinned "$LOAD_CPUS" wrk -t2 -c"$CONNS" -d"$WARMUP" "${hdr[@]}" "https://$addr/" >/dev/null 2>&1 || true
	t0=$(proc_ticks "$pid")
	out=$(pinned "$LOAD_CPUS" wrk -t2 -c"$CONNS" -d"$DURATION" --latency "${hdr[@]}" "https://$addr/")
	t1=$(proc_ticks "$pid")
	n=$(awk '/requests in/ { print $1 }' <<<"$out")
	RPS[$target.$mode]=$(awk '/Requests\/sec/ { printf "%.0f", $2 }' <<<"$out")
	P99[$target.$mode]=$(awk '$1 == "99%" { print $2 }' <<<"$out")
	ERR[$target.$mode]=$(awk '/Socket errors|Non-2xx/ { s = s $0 " " } END { print (s == "" ? 0 : s) }' <<<"$out")
	CPU[$target.$mode]=$(awk -v t="$((t1 - t0))" -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.2f", (n > 0 ? t / hz * 1e6 / n : 0) }')
	log "$target $mode: ${RPS[$target.$mode]} req/s, p99 ${P99[$target.$mode]}, ${CPU[$target.$mode]} µs CPU/req, errors: ${ERR[$target.$mode]}"
}
pass_h2() { # target addr [mode]: h2load, HTTP/2 over TLS (h2) or cleartext with prior knowledge (h2c)
	local target=$1 addr=$2 mode=${3:-h2} scheme=https pid out t0 t1 n
	[[ $mode == h2c ]] && scheme=http # h2load speaks h2c with prior knowledge to an http URI
	pid=${PIDS[$target]}
	pinned "$LOAD_CPUS" h2load -t2 -c"$H2_CONNS" -m"$H2_STREAMS" -D "${WARMUP%s}" "$scheme://$addr/" >/dev/null 2>&1 || true
	t0=$(proc_ticks "$pid")
	out=$(pinned "$LOAD_CPUS" h2load -t2 -c"$H2_CONNS" -m"$H2_STREAMS" -D "${DURATION%s}" "$scheme://$addr/")
	t1=$(proc_ticks "$pid")
	grep -q "h2" <<<"$(awk '/^Application protocol/' <<<"$out")" || die "$target did not speak h2 to h2load: $out"
	n=$(awk '/^requests:/ { print $8 }' <<<"$out")
	RPS[$target.$mode]=$(awk '/^finished in/ { printf "%.0f", $4 }' <<<"$out")
	P99[$target.$mode]="$(awk '/^time for request:/ { print $6 }' <<<"$out") (mean)"
	ERR[$target.$mode]=$(awk '/^requests:/ { f = $10 + $12 + $14 } /^status codes:/ { f += $7 + $9 } END { print f + 0 }' <<<"$out")
	CPU[$target.$mode]=$(awk -v t="$((t1 - t0))" -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.2f", (n > 0 ? t / hz * 1e6 / n : 0) }')
	log "$target $mode: ${RPS[$target.$mode]} req/s, latency ${P99[$target.$mode]}, ${CPU[$target.$mode]} µs CPU/req, errors: ${ERR[$target.$mode]}"
}
log "transport $TRANSPORT, $WORKERS worker(s) each, $CONNS connections, $DURATION after $WARMUP warm-up"
for mode in keepalive handshake; do
	pass tollgate $GATEWAY_TLS $mode
	pass nginx $NGINX_ADDR $mode
done
pass_h2 tollgate $GATEWAY_TLS
pass_h2 nginx $NGINX_ADDR
pass_h2 tollgate $GATEWAY_ADDR h2c
pass_h2 nginx $NGINX_H2C h2c

# ---------------------------------------------------------------- report
{
	echo
	echo "$(date -u) · nproc $NPROC · $(go version | cut -d' ' -f3-) · $(nginx -v 2>&1 | cut -d: -f2- | tr -d ' ') · transport $TRANSPORT · $WORKERS worker(s) each · ECDSA P-256 · commit $(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
	echo
	echo "| connections | target | req/s | p99 | CPU µs/req | errors | req/s ÷ nginx | CPU/req ÷ nginx |"
	echo "|---|---|---|---|---|---|---|---|"
	for mode in keepalive handshake h2 h2c; do
		label="keep-alive, wrk -c$CONNS"
		[[ $mode == handshake ]] && label="new TLS connection per request"
		[[ $mode == h2 ]] && label="HTTP/2, h2load -c$H2_CONNS -m$H2_STREAMS"
		[[ $mode == h2c ]] && label="h2c (cleartext, prior knowledge), h2load -c$H2_CONNS -m$H2_STREAMS"
		for target in tollgate nginx; do
			echo "| $label | $target | ${RPS[$target.$mode]} | ${P99[$target.$mode]} | ${CPU[$target.$mode]} | ${ERR[$target.$mode]} | $(ratio "${RPS[$target.$mode]}" "${RPS[nginx.$mode]}") | $(ratio "${CPU[$target.$mode]}" "${CPU[nginx.$mode]}") |"
		done
	done
	echo
	echo "Handshakes per second per core of CPU: tollgate $(awk -v c="${CPU[tollgate.handshake]}" 'BEGIN { printf "%.0f", (c > 0 ? 1e6 / c : 0) }'), nginx $(awk -v c="${CPU[nginx.handshake]}" 'BEGIN { printf "%.0f", (c > 0 ? 1e6 / c : 0) }') (1e6 ÷ CPU µs per request of the new-connection pass)."
} | tee "$TMP/report.md"

record_report "HTTPS beside nginx"
