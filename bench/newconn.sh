#!/usr/bin/env bash
# New connections while the proxy is idle and while it is saturated. See
# bench/README.md.
#
# Starts the bench upstream (127.0.0.1:19300), the gateway (127.0.0.1:18095,
# TOLLGATE_WORKERS workers, default nproc) and nginx (127.0.0.1:18096, as
# many workers) on it. For each proxy, idle and then under wrk (-t2 -c64),
# curl opens NEWCONN_SAMPLES new connections one after another and times
# each from connect to the answer's first byte: how long an accepted
# connection waits to be served. Prints one markdown table.
set -euo pipefail

source "$(dirname "$0")/lib.sh"
PROG=newconn.sh
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# ---------------------------------------------------------------- knobs
SAMPLES=${NEWCONN_SAMPLES:-40}
WORKERS=${TOLLGATE_WORKERS:-$(nproc)}
TRANSPORT=${TOLLGATE_TRANSPORT:-reactor}
NGINX_WORKERS=$WORKERS
RECORD=${NEWCONN_RECORD:-${BENCH_RECORD:-0}}
GATEWAY_BIN=${NEWCONN_GATEWAY_BIN:-${BENCH_GATEWAY_BIN:-}}
PROXY_CPUS=""
REQ_PATH=/

UPSTREAM_ADDR=127.0.0.1:19300
GATEWAY_ADDR=127.0.0.1:18095
NGINX_ADDR=127.0.0.1:18096

COMMAND=$(command_line 'NEWCONN|BENCH|TOLLGATE' 'TOKEN|SECRET|PASSWORD|KEY' bench/newconn.sh)

[[ $WORKERS =~ ^[1-9][0-9]*$ ]] || die "TOLLGATE_WORKERS must be a positive integer"
[[ $SAMPLES =~ ^[1-9][0-9]*$ ]] || die "NEWCONN_SAMPLES must be a positive integer"
mapfile -t need < <(missing wrk curl nginx)
apt_install "${need[@]}"
NGINX_BIN=$(command -v nginx)

# ---------------------------------------------------------------- processes
log "building the bench upstream and the gateway"
build bench-upstream
GW=$GATEWAY_BIN
if [[ -z $GW ]]; then
	build tollgate
	GW=bin/tollgate
fi
[[ -x $GW ]] || die "NEWCONN_GATEWAY_BIN=$GW is not executable"
make_tmp newconn
chmod 755 "$TMP"
for addr in $UPSTREAM_ADDR $GATEWAY_ADDR $NGINX_ADDR; do
	port_busy "$addr" && die "$addr is already in use; stop whatever listens there"
done
ulimit -n 65536 2>/dev/null || true

start upstream bin/bench-upstream -listen $UPSTREAM_ADDR
wait_port upstream $UPSTREAM_ADDR
plain_config "$TMP/tollgate.yaml" "$GATEWAY_ADDR" off "$UPSTREAM_ADDR"
start_tollgate "$PROXY_CPUS" "$TRANSPORT" "$WORKERS" "$GW" "$TMP/tollgate.yaml"
wait_http tollgate "http://$GATEWAY_ADDR/"
start_nginx
wait_http nginx "http://$NGINX_ADDR/"

# ---------------------------------------------------------------- measuring
# first_bytes url: ms from connect to first byte, one line per new connection
first_bytes() {
	local i
	for ((i = 0; i < SAMPLES; i++)); do
		curl -s -m 5 -o /dev/null -w '%{time_connect} %{time_starttransfer}\n' "$1" || echo "fail fail"
		sleep 0.05
	done | awk '$1 == "fail" { print "fail"; next } { printf "%.3f\n", ($2 - $1) * 1000 }'
}

# summary: "median | p90 | max | failed" of first_bytes' lines
summary() {
	sort -g | awk '$1 == "fail" { f++; next } { a[++n] = $1 }
		END { if (n == 0) { print "n/a | n/a | n/a | " f + 0; exit }
			p90 = int(n * 0.9); if (p90 < 1) p90 = 1
			printf "%.3f | %.3f | %.3f | %d\n", a[int((n + 1) / 2)], a[p90], a[n], f }'
}

TABLE="| proxy | load | new connections | connect → first byte, median ms | p90 ms | max ms | failed |"$'\n'
TABLE+="|---|---|---|---|---|---|---|"$'\n'
for tg in tollgate nginx; do
	url="http://$GATEWAY_ADDR$REQ_PATH"
	[[ $tg == nginx ]] && url="http://$NGINX_ADDR$REQ_PATH"
	log "[$tg] idle"
	TABLE+="| $tg | idle | $SAMPLES | $(first_bytes "$url" | summary) |"$'\n'
	log "[$tg] under wrk -t2 -c64"
	wrk -t2 -c64 -d60s "$url" >/dev/null 2>&1 &
	wrk_pid=$!
	sleep 1
	TABLE+="| $tg | wrk -t2 -c64 | $SAMPLES | $(first_bytes "$url" | summary) |"$'\n'
	kill "$wrk_pid" 2>/dev/null || true
	wait "$wrk_pid" 2>/dev/null || true
done

NOTES="gateway ${GATEWAY_BIN:+(NEWCONN_GATEWAY_BIN) }workers $WORKERS (transport $TRANSPORT), nginx worker_processes $NGINX_WORKERS; curl, one new connection at a time, 50 ms apart."
echo
echo "$NOTES"
echo
printf '%s' "$TABLE"
if [[ $RECORD == 1 ]]; then
	{
		echo
		echo "## New connections, $(date -u)"
		echo
		echo "- command: \`$COMMAND\`"
		echo "- host: nproc $(nproc); $(go version); $("$NGINX_BIN" -v 2>&1)"
		echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
		echo "- $NOTES"
		echo
		printf '%s' "$TABLE"
	} >>bench/RESULTS.md
	log "appended to bench/RESULTS.md"
fi
