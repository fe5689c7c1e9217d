#!/usr/bin/env bash
# Cost as the work grows. See bench/README.md.
#
# For each body size in SCALE_BODIES the bench upstream (127.0.0.1:9100)
# answers with that many bytes; the gateway (127.0.0.1:8080, default
# transport) and nginx (127.0.0.1:8081) proxy it. For each connection count
# in SCALE_CONNS, wrk loads each proxy for SCALE_DURATION, and the proxy's
# CPU per request (all its processes) and its memory per connection (RSS
# halfway through the run minus RSS before it, divided by the connections)
# are recorded. Prints a markdown table, draws bench/plots/scale-cpu.png and
# bench/plots/scale-rss.png with gnuplot, and with SCALE_RECORD=1 (or
# BENCH_RECORD=1) appends the table to bench/RESULTS.md.
set -euo pipefail

source "$(dirname "$0")/lib.sh"
PROG=scale.sh
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# ---------------------------------------------------------------- knobs
NPROC=$(nproc)
CONNS_LIST=${SCALE_CONNS:-1 10 100 1000 10000}
BODIES=${SCALE_BODIES:-64 16384}
DURATION=${SCALE_DURATION:-4}
WORKERS=${TOLLGATE_WORKERS:-$NPROC}
NGINX_WORKERS=${BENCH_NGINX_WORKERS:-$WORKERS}
TRANSPORT=${TOLLGATE_TRANSPORT:-reactor}
PROXY_CPUS=${SCALE_PROXY_CPUS:-}
LOAD_CPUS=${SCALE_LOAD_CPUS:-}
RECORD=${SCALE_RECORD:-${BENCH_RECORD:-0}}
HZ=$(getconf CLK_TCK)

UPSTREAM_ADDR=127.0.0.1:9100
GATEWAY_ADDR=127.0.0.1:8080
NGINX_ADDR=127.0.0.1:8081
REQ_PATH=/

COMMAND=$(command_line 'SCALE|BENCH|TOLLGATE' 'TOKEN|SECRET|PASSWORD|KEY' bench/scale.sh)

[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "SCALE_DURATION must be a whole number of seconds"
[[ $WORKERS =~ ^[1-9][0-9]*$ ]] || die "TOLLGATE_WORKERS must be a positive integer"

# ---------------------------------------------------------------- prerequisites
mapfile -t need < <(missing wrk curl)
command -v gnuplot >/dev/null 2>&1 || need+=(gnuplot-nox)
NGINX_BIN=$(command -v nginx 2>/dev/null || true)
[[ -z $NGINX_BIN && -x /usr/sbin/nginx ]] && NGINX_BIN=/usr/sbin/nginx
[[ -n $NGINX_BIN ]] || need+=(nginx)
if ((${#need[@]})); then
	apt_install "${need[@]}"
	NGINX_BIN=$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)
fi

log "building bin/tollgate and bin/bench-upstream"
build tollgate bench-upstream
make_tmp scale
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
for addr in $UPSTREAM_ADDR $GATEWAY_ADDR $NGINX_ADDR; do
	port_busy "$addr" && die "$addr is already in use; stop whatever listens there"
done

plain_config "$TMP/tollgate.yaml" "$GATEWAY_ADDR" off "$UPSTREAM_ADDR"

# procs pid: the pid and its children's (nginx's master and workers).
procs() { echo "$1" $(pgrep -P "$1" || true); }
rss_kb() { # pid: VmRSS of it and its children, in kB
	local p r=0
	for p in $(procs "$1"); do r=$((r + $(awk '/^VmRSS/ { print $2 }' "/proc/$p/status" 2>/dev/null || echo 0))); done
	echo $r
}

ROWS=() # target body conns req/s cpu_us rss_per_conn_bytes
measure() { # target pid url body conns
	local target=$1 pid=$2 url=$3 body=$4 conns=$5 threads=2 t0 t1 r0 rmid out n rps
	((conns >= 2)) || threads=1
	wrk -t"$threads" -c"$conns" -d1s "$url" >/dev/null 2>&1 || true # warm the pools
	sleep 0.5
	r0=$(rss_kb "$pid")
	t0=$(proc_ticks "$pid")
	(sleep "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')" && rss_kb "$pid" >"$TMP/rss-mid") &
	local sampler=$!
	out=$(pinned "$LOAD_CPUS" wrk -t"$threads" -c"$conns" -d"${DURATION}s" --timeout 10s "$url" 2>&1)
	t1=$(proc_ticks "$pid")
	wait "$sampler"
	rmid=$(cat "$TMP/rss-mid")
	n=$(awk '/requests in/ { print $1 }' <<<"$out")
	rps=$(awk '/^Requests\/sec/ { printf "%.0f", $2 }' <<<"$out")
	local cpu rss
	cpu=$(awk -v t="$((t1 - t0))" -v hz="$HZ" -v n="${n:-0}" 'BEGIN { printf "%.2f", (n > 0 ? t / hz * 1e6 / n : 0) }')
	rss=$(awk -v a="$r0" -v b="$rmid" -v c="$conns" 'BEGIN { d = (b - a) * 1024 / c; printf "%.0f", (d > 0 ? d : 0) }')
	log "$target body $body conns $conns: $rps req/s, $cpu µs CPU/req, $rss B RSS/conn"
	ROWS+=("$target $body $conns $rps $cpu $rss")
}

for body in $BODIES; do
	start_pinned upstream "$LOAD_CPUS" bin/bench-upstream -listen $UPSTREAM_ADDR -body-bytes "$body"
	wait_http upstream "http://$UPSTREAM_ADDR$REQ_PATH"
	start_tollgate "$PROXY_CPUS" "$TRANSPORT" "$WORKERS" bin/tollgate "$TMP/tollgate.yaml"
	wait_http tollgate "http://$GATEWAY_ADDR$REQ_PATH"
	start_nginx
	for conns in $CONNS_LIST; do
		measure tollgate "${PIDS[tollgate]}" "http://$GATEWAY_ADDR$REQ_PATH" "$body" "$conns"
		measure nginx "${PIDS[nginx]}" "http://$NGINX_ADDR$REQ_PATH" "$body" "$conns"
	done
	stop tollgate
	stop nginx
	stop upstream
	wait_port_free $UPSTREAM_ADDR
	wait_port_free $GATEWAY_ADDR
	wait_port_free $NGINX_ADDR
done

# ---------------------------------------------------------------- report
mkdir -p bench/plots
plot() { # column ylabel file title
	local series="" target body
	for body in $BODIES; do
		for target in tollgate nginx; do
			printf '%s\n' "${ROWS[@]}" | awk -v t="$target" -v b="$body" '$1 == t && $2 == b' >"$TMP/$target-$body.dat"
			series+="${series:+, }'$TMP/$target-$body.dat' using 3:$1 with linespoints title '$target, $body B bodies'"
		done
	done
	gnuplot <<-EOF
		set terminal png size 900,540
		set output '$3'
		set title '$4'
		set logscale x
		set xlabel 'concurrent connections'
		set ylabel '$2'
		set key top left
		set grid
		plot $series
	EOF
}
plot 5 'CPU µs per request' bench/plots/scale-cpu.png "CPU per request as connections grow ($TRANSPORT, $WORKERS workers; nginx $NGINX_WORKERS)"
plot 6 'RSS bytes per connection' bench/plots/scale-rss.png "Memory per connection under load ($TRANSPORT; nginx)"

{
	echo
	echo "$(date -u) · nproc $NPROC · $(go version | cut -d' ' -f3-) · $("$NGINX_BIN" -v 2>&1) · transport $TRANSPORT, $WORKERS workers · nginx $NGINX_WORKERS workers · wrk ${DURATION}s per cell · commit $(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
	echo
	echo "| body | connections | tollgate req/s | nginx req/s | tollgate µs CPU/req | nginx µs CPU/req | CPU ratio | tollgate B RSS/conn | nginx B RSS/conn |"
	echo "|---|---|---|---|---|---|---|---|---|"
	for body in $BODIES; do
		for conns in $CONNS_LIST; do
			read -r _ _ _ trps tcpu trss < <(printf '%s\n' "${ROWS[@]}" | awk -v b="$body" -v c="$conns" '$1 == "tollgate" && $2 == b && $3 == c')
			read -r _ _ _ nrps ncpu nrss < <(printf '%s\n' "${ROWS[@]}" | awk -v b="$body" -v c="$conns" '$1 == "nginx" && $2 == b && $3 == c')
			echo "| $body B | $conns | $trps | $nrps | $tcpu | $ncpu | $(awk -v a="$tcpu" -v b="$ncpu" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }') | $trss | $nrss |"
		done
	done
	echo
	echo "Plots: bench/plots/scale-cpu.png, bench/plots/scale-rss.png. RSS per connection is the growth over the run's idle baseline at its midpoint; at one or ten connections it is noise."
} | tee "$TMP/report.md"

record_report "Cost as the work grows"
