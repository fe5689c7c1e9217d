#!/usr/bin/env bash
# Benchmark harness behind `make bench`. See bench/README.md for every knob.
#
# Starts a local upstream (127.0.0.1:9100), the gateway (127.0.0.1:8080) and
# nginx as a reference proxy on the same upstream, twice: as a bare proxy
# (127.0.0.1:8081) and adding the fields the gateway adds (nginx-fields,
# 127.0.0.1:8082); then:
#   1. wrk (closed loop, max throughput) in rotating rounds against each;
#   2. the open-loop generator at a fixed rate against each;
#   3. optionally (BENCH_IDLE=1) idle keep-alive connections against the
#      gateway and the bare nginx;
# and prints one markdown table with the gateway/nginx ratios.
set -euo pipefail

source "$(dirname "$0")/lib.sh"
PROG=bench
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

# ---------------------------------------------------------------- knobs
NPROC=$(nproc)
DURATION=${BENCH_DURATION:-10s}
WARMUP=${BENCH_WARMUP:-2s}
ROUNDS=${BENCH_ROUNDS:-3}
OPEN_ROUNDS=${BENCH_OPEN_ROUNDS:-$ROUNDS}
THREADS=${BENCH_THREADS:-2}
CONNS=${BENCH_CONNS:-64}
RATE=${BENCH_RATE:-13000}
OPEN_LOOP=${BENCH_OPEN_LOOP:-1}
CLOSE=${BENCH_CLOSE:-0}
SLACK=${BENCH_SLACK:-0}
TRANSPORTS=${BENCH_TRANSPORTS:-reactor fasthttp}
TARGETS=${BENCH_TARGETS:-tollgate nginx nginx-fields}
WORKERS=${TOLLGATE_WORKERS:-$NPROC}
NGINX_WORKERS=${BENCH_NGINX_WORKERS:-$WORKERS}
BODY_BYTES=${BENCH_BODY_BYTES:-64}
REQ_PATH=${BENCH_PATH:-/}
IDLE=${BENCH_IDLE:-0}
IDLE_CONNS=${BENCH_IDLE_CONNS:-10000}
IDLE_HOLD=${BENCH_IDLE_HOLD:-10s}
RECORD=${BENCH_RECORD:-0}
GATEWAY_BIN=${BENCH_GATEWAY_BIN:-}
PROXY_CPUS=${BENCH_PROXY_CPUS:-}
LOAD_CPUS=${BENCH_LOAD_CPUS:-}
UPSTREAM_PROCS=${BENCH_UPSTREAM_PROCS:-}

UPSTREAM_ADDR=127.0.0.1:9100
GATEWAY_ADDR=127.0.0.1:8080
NGINX_ADDR=127.0.0.1:8081
NGINX_FIELDS_ADDR=127.0.0.1:8082
ADMIN_ADDR=127.0.0.1:9901
GOROUTINES_URL=http://$ADMIN_ADDR/debug/goroutines
HZ=$(getconf CLK_TCK)

# The exact command, for the record: every BENCH_*/TOLLGATE_* variable set
# (secrets left out).
COMMAND=$(command_line 'BENCH|TOLLGATE' 'TOKEN|SECRET|PASSWORD|KEY' bench/run.sh)

has_target() { [[ " $TARGETS " == *" $1 "* ]]; }

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "BENCH_ROUNDS must be a positive integer"
[[ $OPEN_ROUNDS =~ ^[1-9][0-9]*$ ]] || die "BENCH_OPEN_ROUNDS must be a positive integer"
[[ $CLOSE == 0 || $CLOSE == 1 ]] || die "BENCH_CLOSE must be 0 or 1"
[[ $WORKERS =~ ^[1-9][0-9]*$ ]] || die "TOLLGATE_WORKERS must be a positive integer"
[[ $NGINX_WORKERS =~ ^[1-9][0-9]*$ ]] || die "BENCH_NGINX_WORKERS must be a positive integer"
for t in $TARGETS; do
	[[ $t == tollgate || $t == nginx || $t == nginx-fields ]] ||
		die "unknown target '$t' in BENCH_TARGETS (tollgate, nginx, nginx-fields)"
done
has_target tollgate || TRANSPORTS=""

# ---------------------------------------------------------------- prerequisites
mapfile -t need < <(missing wrk curl)
NGINX_BIN=$(command -v nginx 2>/dev/null || true)
[[ -z $NGINX_BIN && -x /usr/sbin/nginx ]] && NGINX_BIN=/usr/sbin/nginx
uses_nginx() { has_target nginx || has_target nginx-fields; }
if [[ -z $NGINX_BIN ]] && uses_nginx; then need+=(nginx); fi
if ((${#need[@]})); then
	apt_install "${need[@]}"
	NGINX_BIN=$(command -v nginx 2>/dev/null || true)
	[[ -z $NGINX_BIN && -x /usr/sbin/nginx ]] && NGINX_BIN=/usr/sbin/nginx
fi

# ---------------------------------------------------------------- build
# The commit the programs are built from, read before the run: the record
# appends to bench/RESULTS.md, which is no change to what was measured.
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo none)
git diff --quiet HEAD -- . ':!bench/RESULTS.md' 2>/dev/null || COMMIT+=" (with local changes)"
log "building the bench programs"
build bench-upstream bench-loadgen bench-idleconns
if has_target tollgate; then
	if [[ -n $GATEWAY_BIN ]]; then
		[[ -x $GATEWAY_BIN ]] || die "BENCH_GATEWAY_BIN=$GATEWAY_BIN is not executable"
		GW=$GATEWAY_BIN
	else
		log "building the gateway"
		build tollgate
		GW=$ROOT/bin/tollgate
	fi
fi

# ---------------------------------------------------------------- processes
make_tmp bench
chmod 755 "$TMP"

pin() { # cpu-list cmd...: run cmd pinned when a cpu list is given
	local cpus=$1
	shift
	if [[ -n $cpus ]]; then taskset -c "$cpus" "$@"; else "$@"; fi
}

# start_pinned name cpu-list cmd...: start, pinned when a cpu list is given.
start_upstream() {
	port_busy $UPSTREAM_ADDR && die "$UPSTREAM_ADDR is already in use; stop whatever listens there"
	local procs=()
	[[ -z $UPSTREAM_PROCS ]] || procs=("GOMAXPROCS=$UPSTREAM_PROCS")
	start_pinned upstream "$LOAD_CPUS" env "${procs[@]}" bin/bench-upstream -listen $UPSTREAM_ADDR -body-bytes "$BODY_BYTES"
	wait_http upstream "http://$UPSTREAM_ADDR$REQ_PATH"
}

start_gateway() { # transport
	local t=$1 cfg=$TMP/tollgate.yaml
	port_busy $GATEWAY_ADDR && die "$GATEWAY_ADDR is already in use; stop whatever listens there"
	port_busy $ADMIN_ADDR && die "$ADMIN_ADDR (gateway admin) is already in use; stop whatever listens there"
	plain_config "$cfg" "$GATEWAY_ADDR" "$ADMIN_ADDR" "$UPSTREAM_ADDR"
	start_tollgate "$PROXY_CPUS" "$t" "$WORKERS" "$GW" "$cfg"
	wait_http tollgate "http://$GATEWAY_ADDR$REQ_PATH"
}

stop_gateway() {
	stop tollgate
	wait_port_free $GATEWAY_ADDR
	wait_port_free $ADMIN_ADDR
}


# ---------------------------------------------------------------- measuring
children() { pgrep -P "$1" 2>/dev/null || true; }

other_ticks() { # pids...: CPU ticks of every process except these (reaped children included via cutime)
	cat /proc/[0-9]*/stat 2>/dev/null | awk -v excl=" $* " '
		index(excl, " " $1 " ") { next }
		{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); t += f[12] + f[13] + f[14] + f[15] }
		END { printf "%d\n", t }'
}

now_ns() { date +%s%N; }

# cpu_idle_total: idle+iowait, all, steal: ticks of all cores. Steal is the
# time the hypervisor ran something else while this machine had work.
cpu_idle_total() { awk '/^cpu /{ t = 0; for (i = 2; i <= NF; i++) t += $i; print $5 + $6, t, $9 + 0; exit }' /proc/stat; }

# measure target outfile cmd...: runs cmd (a load generator) and appends its
# result line plus proxy_ticks (CPU of the proxy, workers included),
# upstream_ticks (CPU of the upstream), load_cpu_s (CPU seconds of the load
# generator: what the answers cost the client side), other_cpu_pct (CPU of every process that is neither the proxy, the upstream
# nor this script and its load generators, as a share of all cores),
# idle_pct (the machine's idle time, as a share of all cores) and steal_pct
# (the time the hypervisor took from this machine, as a share of all cores).
measure() {
	local target=$1 out=$2 pid ours t0 o0 p0 u0 t1 o1 p1 u1 load
	shift 2
	pid=${PIDS[$target]}
	ours="$$ ${PIDS[upstream]} $pid $(children "$pid" | tr '\n' ' ')"
	read -r i0 a0 s0 < <(cpu_idle_total)
	t0=$(now_ns) o0=$(other_ticks "$ours") p0=$(proc_ticks "$pid") u0=$(proc_ticks "${PIDS[upstream]}")
	# The load generator's own CPU (user + system), from bash's time.
	local TIMEFORMAT='LOADCPU %3U %3S'
	{ time "$@" >"$out.raw" 2>&1; } 2>"$out.load" || true
	p1=$(proc_ticks "$pid") u1=$(proc_ticks "${PIDS[upstream]}") o1=$(other_ticks "$ours") t1=$(now_ns)
	read -r i1 a1 s1 < <(cpu_idle_total)
	load=$(awk '/^LOADCPU /{ printf "%.3f", $2 + $3 }' "$out.load")
	awk -v p=$((p1 - p0)) -v u=$((u1 - u0)) -v load="${load:-0}" -v o=$((o1 - o0)) -v el=$((t1 - t0)) -v hz="$HZ" -v ncpu="$NPROC" \
		-v idle=$((i1 - i0)) -v all=$((a1 - a0)) -v steal=$((s1 - s0)) '
		{ print $0 " proxy_ticks=" p " upstream_ticks=" u " load_cpu_s=" load \
			" other_cpu_pct=" sprintf("%.1f", 100 * o / (el / 1e9 * hz * ncpu)) \
			" idle_pct=" sprintf("%.1f", all > 0 ? 100 * idle / all : 0) \
			" steal_pct=" sprintf("%.1f", all > 0 ? 100 * steal / all : 0) }' \
		<(grep -E '^(WRKPCT|LOADGEN) ' "$out.raw" | tail -n 1) >"$out.line"
	if [[ ! -s $out.line ]]; then
		cat "$out.raw" >&2
		die "no result from: $*"
	fi
	cat "$out.line" >>"$out"
}

url_of() {
	case $1 in
	tollgate) echo "http://$GATEWAY_ADDR$REQ_PATH" ;;
	nginx) echo "http://$NGINX_ADDR$REQ_PATH" ;;
	nginx-fields) echo "http://$NGINX_FIELDS_ADDR$REQ_PATH" ;;
	esac
}

# With BENCH_CLOSE=1 every wrk request asks for Connection: close: one new
# connection per request.
WRK_HEADERS=()
WRK_LOAD_NOTE=""
if ((CLOSE)); then WRK_HEADERS=(-H "Connection: close") WRK_LOAD_NOTE=" Connection: close"; fi

run_wrk() { # target outfile duration
	measure "$1" "$2" pin "$LOAD_CPUS" wrk -t"$THREADS" -c"$CONNS" -d"$3" "${WRK_HEADERS[@]}" -s bench/wrk/pct.lua "$(url_of "$1")"
}

run_loadgen() { # target outfile latencyfile
	measure "$1" "$2" pin "$LOAD_CPUS" bin/bench-loadgen -url "$(url_of "$1")" -rate "$RATE" \
		-duration "$DURATION" -warmup "$WARMUP" -conns "$CONNS" -slack "$SLACK" -label "$1" -latencies "$3"
}

# rotate r: order is targets in round r's order (A B C, B C A, C A B, ...;
# with two: A B, B A), so slow drift on a shared box does not favour one
# side.
rotate() {
	local i
	order=()
	for ((i = 0; i < ${#targets[@]}; i++)); do
		order+=("${targets[(i + $1 - 1) % ${#targets[@]}]}")
	done
}

# ---------------------------------------------------------------- summarising
val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$2"; } # key file: one value per line

median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "n/a"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

sum() { awk '{s+=$1} END {print s+0}'; }

# cpu_per_line file reqkey [cpukey]: CPU µs per request, one line per round;
# cpukey proxy_ticks (the default) or upstream_ticks in clock ticks,
# load_cpu_s in seconds.
cpu_per_line() {
	awk -v key="$2" -v ck="${3:-proxy_ticks}" -v hz="$HZ" '{
		r = ""; p = ""
		for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) r = kv[2]; if (kv[1] == ck) p = kv[2] }
		s = (ck ~ /_s$/) ? p : p / hz
		printf "%.4f\n", (r > 0 && p != "" ? s * 1e6 / r : 0) }' "$1"
}

cpu_us_per_req() { cpu_per_line "$1" "$2" "${3:-}" | median | fmtd 2; } # file reqkey [cpukey]: median over rounds

# paired a b: a's values divided by b's, round by round (the rounds of two
# targets alternate, so each pair ran a few seconds apart), as "median" or,
# over several rounds, "median (min–max)".
paired() {
	paste -d' ' <(echo "$1") <(echo "$2") | awk '$1 > 0 && $2 > 0 { printf "%.4f\n", $1 / $2 }' | sort -g |
		awk '{ a[NR] = $1 } END {
			if (NR == 0) { print "n/a"; exit }
			m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
			if (NR == 1) printf "%.2f\n", m; else printf "%.2f (%.2f–%.2f)\n", m, a[1], a[NR] }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b + 0 == 0) print "n/a"; else printf "%.2f\n", a / b }'; }

fmtd() { awk -v d="$1" '{ if ($1 == "n/a") print $1; else printf "%." d "f\n", $1 }'; } # digits: format stdin
ms() { median | fmtd 3; } # median of ms values

fmt0() { awk -v v="$1" 'BEGIN { if (v == "n/a") print v; else printf "%.0f\n", v }'; }

# ratios pass target kind key ref: "req/s ratio|CPU ratio" of target to the
# reference proxy ref in the same pass, round by round (see paired; kind
# wrk or open; key the request count's name); "n/a" where ref did not run,
# 1.00 for ref itself.
ratios() {
	local f=$TMP/res/$1.$2.$3 r=$TMP/res/$1.$5.$3 rps=n/a
	if [[ $2 == "$5" ]]; then
		echo "1.00|1.00"
	elif [[ -s $f && -s $r ]]; then
		[[ $3 == wrk ]] && rps=$(paired "$(val rps "$f")" "$(val rps "$r")")
		echo "$rps|$(paired "$(cpu_per_line "$f" "$4")" "$(cpu_per_line "$r" "$4")")"
	else
		echo "n/a|n/a"
	fi
}

# ratio_cells pass target kind key: the table's ratio cells, to nginx and,
# when it ran, to nginx-fields.
ratio_cells() {
	local ref r cells=""
	for ref in nginx nginx-fields; do
		[[ $ref == nginx-fields ]] && ! has_target nginx-fields && continue
		r=$(ratios "$1" "$2" "$3" "$4" "$ref")
		if [[ $3 == wrk ]]; then cells+="${r%%|*} | "; fi
		cells+="${r##*|} | "
	done
	echo "${cells% | }"
}

# steal_cell file: the median steal share over the rounds, and the largest
# when a round's differs.
steal_cell() {
	local med hi
	med=$(val steal_pct "$1" | median | fmtd 1) hi=$(val steal_pct "$1" | sort -g | tail -n1 | fmtd 1)
	if [[ $hi != "$med" ]]; then echo "$med (≤ $hi)"; else echo "$med"; fi
}

# steal_note: a line for the report when the hypervisor took a noticeable
# share of the CPUs in some round: then a round's ratio says as much about
# the host as about the proxies.
steal_note() {
	local hi
	hi=$(cat "$TMP"/res/*.wrk "$TMP"/res/*.open 2>/dev/null | sed -n 's/.* steal_pct=\([^ ]*\).*/\1/p' | sort -g | tail -n1)
	[[ -n $hi ]] || return 0
	awk -v hi="$hi" 'BEGIN { exit !(hi >= 2) }' || return 0
	printf -- '- the hypervisor took up to %s %% of the CPUs in a round (steal %%): the rounds ran on a host whose capacity changed under them, so read the ratios over many rounds, not one\n' "$hi"
}

# row_wrk pass target: one table row from the wrk rounds
row_wrk() {
	local f=$TMP/res/$1.$2.wrk rps lo hi
	rps=$(val rps "$f" | median) lo=$(val rps "$f" | sort -g | head -n1) hi=$(val rps "$f" | sort -g | tail -n1)
	printf '| %s | %s | wrk -t%s -c%s %s ×%s%s | %s (%s–%s) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
		"$1" "$2" "$THREADS" "$CONNS" "$DURATION" "$ROUNDS" "$WRK_LOAD_NOTE" \
		"$(fmt0 "$rps")" "$(fmt0 "$lo")" "$(fmt0 "$hi")" \
		"$(val p50_ms "$f" | ms)" "$(val p99_ms "$f" | ms)" "$(val p999_ms "$f" | ms)" "$(val p9999_ms "$f" | ms)" \
		"$(val errors "$f" | sum)" "$(cpu_us_per_req "$f" requests)" \
		"$(cpu_us_per_req "$f" requests upstream_ticks)" "$(cpu_us_per_req "$f" requests load_cpu_s)" \
		"$(val other_cpu_pct "$f" | median | fmtd 1)" \
		"$(val idle_pct "$f" | median | fmtd 1)" "$(steal_cell "$f")" \
		"$(ratio_cells "$1" "$2" wrk requests)"
}

# row_open pass target: one table row from the open-loop run
# tails_open pass: each target's corrected p99.9 / p99.99 round by round,
# and in how many rounds the gateway's p99.9 was no longer than nginx's
# (the rounds alternate, so each pair ran within a minute).
tails_open() {
	local f line="" tg n a b
	for tg in tollgate nginx nginx-fields; do
		f=$TMP/res/$1.$tg.open
		[[ -s $f ]] || continue
		line+="$tg $(paste -d/ <(val c_p999_ms "$f") <(val c_p9999_ms "$f") | paste -sd' ' -); "
	done
	[[ -n $line ]] || return 0
	a=$TMP/res/$1.tollgate.open b=$TMP/res/$1.nginx.open
	if [[ -s $a && -s $b ]]; then
		n=$(paste -d' ' <(val c_p999_ms "$a") <(val c_p999_ms "$b") | awk '$1 <= $2 { k++ } END { printf "%d of %d", k, NR }')
		line+="gateway's p99.9 no longer than nginx's in $n rounds"
	fi
	printf -- '- open loop, %s, p99.9/p99.99 ms by round: %s\n' "$1" "${line%; }"
	pooled_open "$1"
}

# pooled_open pass: each target's tail over every request of every round
# (bench-loadgen -pool over the rounds' latency files). A median of
# rounds' p99.9 passes over the rounds a stall fell in; the pooled
# percentiles are the run's own, and the shares over 5 and 10 ms hold the
# seed's targets to every request: a p99.9 under 5 ms is at most 0.1 %
# over 5 ms, a p99.99 under 10 ms at most 0.01 % over 10 ms.
pooled_open() {
	local tg line="" f lats
	for tg in tollgate nginx nginx-fields; do
		lats=("$TMP"/res/"$1.$tg".open.*.lat)
		[[ -s ${lats[0]} ]] || continue
		f=$TMP/res/$1.$tg.pooled
		bin/bench-loadgen -pool -label "$tg" "${lats[@]}" >"$f" || die "pooling $tg's open-loop latencies failed"
		line+="$tg p99.9/p99.99 $(val c_p999_ms "$f")/$(val c_p9999_ms "$f") ms, $(awk -v n="$(val answered "$f")" \
			-v a="$(val c_over_5ms "$f")" -v b="$(val c_over_10ms "$f")" 'BEGIN {
				printf "%d (%.3f %%) over 5 ms, %d (%.4f %%) over 10 ms of %d", a, n ? 100 * a / n : 0, b, n ? 100 * b / n : 0, n }'); "
	done
	[[ -n $line ]] || return 0
	printf -- '- open loop, %s, pooled over the rounds (corrected; targets: at most 0.1 %% over 5 ms and 0.01 %% over 10 ms): %s\n' "$1" "${line%; }"
}

row_open() {
	local f=$TMP/res/$1.$2.open errs e n u q cells="" r=""
	[[ -s $f ]] || return 0
	e=$(val errors "$f" | sum) n=$(val non2xx "$f" | sum) u=$(val unsent "$f" | sum)
	errs=$((e + n + u))
	if ((errs > 0)); then errs="$errs ($e err, $n non-2xx, $u unsent)"; fi
	for q in p50 p99 p999 p9999; do
		cells+="$(val "c_${q}_ms" "$f" | ms) ($(val "s_${q}_ms" "$f" | ms)) | "
	done
	# Open-loop rows have no req/s ratio (the rate is the offered one).
	r=$(ratio_cells "$1" "$2" open responses_total)
	r="— | ${r//|/| — |}"
	printf '| %s | %s | open loop %s/s %s | %s | %s%s | %s | %s | %s | %s | %s | %s | %s |\n' \
		"$1" "$2" "$RATE" "$DURATION" "$(fmt0 "$(val achieved_rps "$f" | median)")" "$cells" \
		"$errs" "$(cpu_us_per_req "$f" responses_total)" "$(cpu_us_per_req "$f" responses_total upstream_ticks)" \
		"$(cpu_us_per_req "$f" responses_total load_cpu_s)" "$(val other_cpu_pct "$f" | median | fmtd 1)" \
		"$(val idle_pct "$f" | median | fmtd 1)" "$(steal_cell "$f")" "$r"
}

# ---------------------------------------------------------------- run
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
nofile=$(ulimit -n)
if [[ $IDLE == 1 && $nofile != unlimited ]] && ((nofile < IDLE_CONNS + 1000)); then
	log "warning: open-file limit $(ulimit -n) is low for $IDLE_CONNS idle connections"
fi
mkdir -p "$TMP/res"

log "nproc=$NPROC workers=$WORKERS nginx_workers=$NGINX_WORKERS duration=$DURATION rounds=$ROUNDS rate=$RATE targets='$TARGETS' transports='$TRANSPORTS'"
start_upstream
if has_target nginx; then start_nginx; fi
if has_target nginx-fields; then start_nginx nginx-fields "$NGINX_FIELDS_ADDR" 1; fi

PASSES=()
if has_target tollgate; then
	for t in $TRANSPORTS; do PASSES+=("$t"); done
	((${#PASSES[@]})) || die "BENCH_TRANSPORTS is empty"
else
	PASSES=(-)
fi

for pass in "${PASSES[@]}"; do
	targets=()
	if [[ $pass != - ]]; then
		log "[$pass] starting the gateway (TOLLGATE_TRANSPORT=$pass)"
		start_gateway "$pass"
		targets+=(tollgate)
	fi
	for tg in nginx nginx-fields; do
		if has_target $tg; then targets+=("$tg"); fi
	done

	for tg in "${targets[@]}"; do
		log "[$pass] warm-up $tg ($WARMUP)"
		run_wrk "$tg" "$TMP/warmup" "$WARMUP"
	done
	for ((r = 1; r <= ROUNDS; r++)); do
		rotate "$r"
		for tg in "${order[@]}"; do
			run_wrk "$tg" "$TMP/res/$pass.$tg.wrk" "$DURATION"
			log "[$pass] round $r $tg: $(cut -d' ' -f2- "$TMP/res/$pass.$tg.wrk.line")"
		done
	done
	if [[ $OPEN_LOOP == 1 ]]; then
		# Rounds too, in the same rotation: on a shared box one pass's
		# tail is mostly what else ran during those seconds.
		for ((r = 1; r <= OPEN_ROUNDS; r++)); do
			rotate "$r"
			for tg in "${order[@]}"; do
				log "[$pass] open loop round $r $tg at $RATE/s"
				run_loadgen "$tg" "$TMP/res/$pass.$tg.open" "$TMP/res/$pass.$tg.open.$r.lat"
				grep -v '^LOADGEN ' "$TMP/res/$pass.$tg.open.raw" >&2 || true
			done
		done
	fi
	if [[ $pass != - ]]; then
		g=$(curl -fsS --max-time 1 "$GOROUTINES_URL" 2>/dev/null | tr -d '[:space:]' || true)
		[[ $g =~ ^[0-9]+$ ]] || g=n/a
		log "[$pass] gateway after the runs: rss=$(awk '/^VmRSS/{print $2" kB"}' "/proc/${PIDS[tollgate]}/status") goroutines=$g"
		stop_gateway
	fi
done

# Idle keep-alive connections: memory and goroutines per held connection.
IDLE_TABLE=""
if [[ $IDLE == 1 ]]; then
	idle_row() { # label file
		local f=$2
		printf '| %s | %s/%s | %s | %s | %s | %s | %s → %s |\n' "$1" \
			"$(val opened "$f")" "$(val target "$f")" "$(val alive_end "$f")" \
			"$(awk -v v="$(val rss_before_kb "$f")" 'BEGIN{ if (v == "n/a") print v; else printf "%.1f", v/1024 }')" \
			"$(awk -v v="$(val rss_peak_kb "$f")" 'BEGIN{ if (v == "n/a") print v; else printf "%.1f", v/1024 }')" \
			"$(val rss_per_conn_b "$f")" "$(val goroutines_before "$f")" "$(val goroutines_peak "$f")"
	}
	IDLE_TABLE+="| target | connections open | alive at end | RSS before (MiB) | RSS peak (MiB) | bytes/conn | goroutines before → peak |"$'\n'
	IDLE_TABLE+="|---|---|---|---|---|---|---|"$'\n'
	for pass in "${PASSES[@]}"; do
		[[ $pass != - ]] || continue
		log "[$pass] idle: $IDLE_CONNS connections for $IDLE_HOLD"
		start_gateway "$pass"
		bin/bench-idleconns -addr $GATEWAY_ADDR -path "$REQ_PATH" -n "$IDLE_CONNS" -hold "$IDLE_HOLD" -quiet \
			-pid "${PIDS[tollgate]}" -goroutines-url "$GOROUTINES_URL" -label "tollgate-$pass" >"$TMP/idle.$pass" 2>&1 || true
		grep -v '^IDLECONNS ' "$TMP/idle.$pass" >&2 || true
		grep -q '^IDLECONNS ' "$TMP/idle.$pass" || die "idleconns failed against the gateway ($pass)"
		IDLE_TABLE+="$(idle_row "tollgate ($pass)" "$TMP/idle.$pass")"$'\n'
		stop_gateway
	done
	if has_target nginx; then
		log "[nginx] idle: $IDLE_CONNS connections for $IDLE_HOLD"
		npids=$( (echo "${PIDS[nginx]}"; children "${PIDS[nginx]}") | paste -sd, -)
		bin/bench-idleconns -addr $NGINX_ADDR -path "$REQ_PATH" -n "$IDLE_CONNS" -hold "$IDLE_HOLD" -quiet \
			-pid "$npids" -label nginx >"$TMP/idle.nginx" 2>&1 || true
		grep -v '^IDLECONNS ' "$TMP/idle.nginx" >&2 || true
		grep -q '^IDLECONNS ' "$TMP/idle.nginx" || die "idleconns failed against nginx"
		IDLE_TABLE+="$(idle_row "nginx ($NGINX_WORKERS workers)" "$TMP/idle.nginx")"$'\n'
	fi
fi

# ---------------------------------------------------------------- report
TABLE="| pass | target | load | req/s | p50 ms | p99 ms | p99.9 ms | p99.99 ms | errors | CPU µs/req | upstream CPU µs/req | load CPU µs/req | other CPU % | idle % | steal % | req/s ÷ nginx | CPU/req ÷ nginx |"
RULE="|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
if has_target nginx-fields; then
	TABLE+=" req/s ÷ nginx-fields | CPU/req ÷ nginx-fields |"
	RULE+="---|---|"
fi
TABLE+=$'\n'"$RULE"$'\n'
TAILS=""
for pass in "${PASSES[@]}"; do
	for tg in tollgate nginx nginx-fields; do
		[[ -s $TMP/res/$pass.$tg.wrk ]] && TABLE+="$(row_wrk "$pass" "$tg")"$'\n'
	done
	for tg in tollgate nginx nginx-fields; do
		[[ -s $TMP/res/$pass.$tg.open ]] && TABLE+="$(row_open "$pass" "$tg")"$'\n'
	done
	t=$(tails_open "$pass")
	if [[ -n $t ]]; then TAILS+="$t"$'\n'; fi
done
t=$(steal_note)
if [[ -n $t ]]; then TAILS+="$t"$'\n'; fi

NGINX_VERSION="nginx not used"
if [[ -n $NGINX_BIN ]]; then NGINX_VERSION=$("$NGINX_BIN" -v 2>&1 || true); fi
WRK_VERSION=$( (wrk -v 2>&1 || true) | head -n1 | cut -d' ' -f1-2)
GO_VERSION=$(go version)
HOST_LINE="$(date -u) · nproc $NPROC · $GO_VERSION · $NGINX_VERSION · $WRK_VERSION"
NOTES="gateway workers $WORKERS, nginx worker_processes $NGINX_WORKERS, body $BODY_BYTES B, path $REQ_PATH; latencies are medians over rounds; open-loop cells are corrected (service), slack $SLACK."

echo
echo "$HOST_LINE"
echo "$NOTES"
echo
printf '%s' "$TABLE"
if [[ -n $TAILS ]]; then
	echo
	printf '%s' "$TAILS"
fi
if [[ -n $IDLE_TABLE ]]; then
	echo
	printf '%s' "$IDLE_TABLE"
fi

if [[ $RECORD == 1 ]]; then
	results=bench/RESULTS.md
	# shellcheck disable=SC2016 # the backquotes are markdown
	[[ -s $results ]] || printf '# Benchmark results\n\nAppended by `BENCH_RECORD=1 make bench`; see bench/README.md for how to read the tables.\n' >"$results"
	{
		echo
		echo "## $(date -u)"
		echo
		echo "- command: \`$COMMAND\`"
		echo "- host: nproc $NPROC; $GO_VERSION; $NGINX_VERSION; $WRK_VERSION"
		echo "- commit: $COMMIT"
		echo "- $NOTES"
		echo
		printf '%s' "$TABLE"
		if [[ -n $TAILS ]]; then
			echo
			printf '%s' "$TAILS"
		fi
		if [[ -n $IDLE_TABLE ]]; then
			echo
			printf '%s' "$IDLE_TABLE"
		fi
	} >>"$results"
	log "appended to $results"
fi
