# Shell helpers shared by bench/run.sh, bench/chaos.sh and bench/signload.sh,
# which source this file: source "$(dirname "$0")/lib.sh"
#
# The sourcing script sets PROG (the prefix of its messages) and runs from
# the repository root. It calls make_tmp before it starts any process:
# every process started with `start` is then stopped on exit, Ctrl-C
# included, and its output goes to $TMP/<name>.log.
# shellcheck shell=bash

# ---------------------------------------------------------------- messages
die() { echo "$PROG: $*" >&2; exit 1; }
log() { echo "$PROG: $*" >&2; }

# command_line prefixes exclude script: the command that reproduces this run,
# for the record: every variable in the environment whose name starts with
# one of prefixes (an extended regexp such as 'BENCH|TOLLGATE') and a '_',
# except those whose name matches the regexp exclude (secrets), and then
# "bash script".
command_line() {
	local k cmd=""
	while IFS='=' read -r k _; do
		[[ $k =~ $2 ]] && continue
		cmd+="$k=$(printf '%q' "${!k}") "
	done < <(env | grep -E "^($1)_[A-Z0-9_]*=" | sort)
	echo "${cmd}bash $3"
}

# ---------------------------------------------------------------- prerequisites
# missing command...: prints those of the commands that are not on PATH.
missing() {
	local c
	for c; do command -v "$c" >/dev/null 2>&1 || echo "$c"; done
}

# apt_install package...: installs the packages with apt-get, after one
# apt-get update; nothing when no package is given. Only root can.
apt_install() {
	(($#)) || return 0
	[[ $(id -u) == 0 ]] || die "missing $*; install them or run as root so apt-get can"
	command -v apt-get >/dev/null 2>&1 || die "missing $* and no apt-get to install them"
	log "installing $*"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# ---------------------------------------------------------------- build
# build program...: go build bin/<program>: bin/tollgate from ./cmd/tollgate,
# bin/bench-NAME from ./bench/cmd/NAME.
build() {
	local p
	mkdir -p bin
	for p; do
		case $p in
		tollgate) go build -o bin/tollgate ./cmd/tollgate ;;
		bench-*) go build -o "bin/$p" "./bench/cmd/${p#bench-}" ;;
		*) die "build: no program $p" ;;
		esac
	done
}

# ---------------------------------------------------------------- processes
declare -A PIDS=() # name -> pid of every process started and not yet stopped

# make_tmp name: creates the temp dir $TMP (logs, generated configs) and
# sets the exit trap that stops every process and removes $TMP. On failure,
# or with KEEP_TMP=1, $TMP is kept and its path printed.
make_tmp() {
	TMP=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-$1.XXXXXX")
	# A trap may fire while a redirected command is running, so cleanup
	# writes to a copy of the original stderr.
	exec 9>&2
	trap cleanup EXIT
	trap 'exit 130' INT TERM
}

cleanup() {
	local rc=$? name
	trap - EXIT INT TERM
	for name in "${!PIDS[@]}"; do stop "$name"; done
	if ((rc == 0)) && [[ ${KEEP_TMP:-0} != 1 ]]; then
		rm -rf "$TMP"
	elif ((rc == 0)); then
		echo "$PROG: logs and configs kept in $TMP" >&9
	else
		echo "$PROG: stopped (exit $rc); logs kept in $TMP" >&9
	fi
	exit "$rc"
}

# start name cmd...: runs cmd in the background, its output in $TMP/name.log;
# exec makes the recorded pid the program itself, not a wrapping subshell.
start() {
	local name=$1
	shift
	exec_bg "$@" >"$TMP/$name.log" 2>&1 &
	PIDS[$name]=$!
}
exec_bg() { exec "$@"; }

stop() { # name: TERM, then KILL after 5 s
	local name=$1 pid=${PIDS[$1]:-} i
	[[ -n $pid ]] || return 0
	unset "PIDS[$name]"
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# ---------------------------------------------------------------- measuring
# proc_ticks pid: utime+stime (clock ticks) of pid and its direct children
# (nginx's workers).
proc_ticks() {
	local total=0 p f
	for p in "$1" $(pgrep -P "$1" 2>/dev/null || true); do
		f=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		f=${f##*) } # drop "pid (comm) "; field 3 (state) becomes $1
		# shellcheck disable=SC2086
		set -- $f
		total=$((total + ${12} + ${13})) # fields 14 (utime) and 15 (stime)
	done
	echo "$total"
}

# pinned cpus cmd...: runs cmd under taskset when cpus is set.
pinned() {
	local cpus=$1
	shift
	if [[ -n $cpus ]]; then taskset -c "$cpus" "$@"; else "$@"; fi
}

# ---------------------------------------------------------------- ports
port_busy() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

# wait_for name what cmd...: runs cmd every 0.1 s until it succeeds, for up
# to 15 s. Dies with the end of $TMP/name.log when the process name exits
# first or the time is up ("name did not <what> within 15 s").
wait_for() {
	local name=$1 what=$2 i
	shift 2
	for ((i = 0; i < 150; i++)); do
		"$@" && return 0
		if ! kill -0 "${PIDS[$name]}" 2>/dev/null; then
			tail -n 30 "$TMP/$name.log" >&2 || true
			die "$name exited during start-up (log above)"
		fi
		sleep 0.1
	done
	tail -n 30 "$TMP/$name.log" >&2 || true
	die "$name did not $what within 15 s"
}

wait_port() { wait_for "$1" "listen on $2" port_busy "$2"; } # name addr

start_pinned() {
	local name=$1 cpus=$2
	shift 2
	if [[ -n $cpus ]]; then start "$name" taskset -c "$cpus" "$@"; else start "$name" "$@"; fi
}

http_ok() { curl -fsS -o /dev/null --max-time 1 "$1" 2>/dev/null; }

wait_http() { wait_for "$1" "answer $2" http_ok "$2"; } # name url: wait up to 15 s for a 2xx answer

wait_port_free() { # addr: up to 10 s
	local i
	for ((i = 0; i < 100; i++)); do
		port_busy "$1" || return 0
		sleep 0.1
	done
	die "$1 is still in use"
}

# start_tollgate cpus transport workers bin config: starts the gateway as
# "tollgate" (pinned when cpus is a list) on a generated config, without the
# inherited TOLLGATE_* settings that would override it.
start_tollgate() {
	start_pinned tollgate "$1" env -u TOLLGATE_LISTEN -u TOLLGATE_CONFIG -u TOLLGATE_ACCESS_LOG \
		-u TOLLGATE_REDIS -u TOLLGATE_NODES TOLLGATE_TRANSPORT="$2" TOLLGATE_WORKERS="$3" GOMAXPROCS="$3" \
		"$4" run -c "$5"
}

# plain_config file listen admin upstream: the gateway config of the plain
# proxy benches: every path to one upstream, no access log (admin "off" for
# none), with the gateway's defaults otherwise. Idle upstream connections
# are then kept 60 s, as nginx keeps them (nginx.conf.tmpl,
# keepalive_timeout): the bench upstream keeps them 120 s and does not say
# so. At 4 s, the default before the pool learned backends' timeouts, the
# connections a burst opened were closed before the next and dialled again
# while its requests waited: with 1 worker at 13,000 req/s, up to 104 dials
# in an 8 s round, and 2.2–6.8 times the requests over 5 ms
# (bench/RESULTS.md, "Idle upstream connections kept as long as nginx
# keeps them").
plain_config() {
	cat >"$1" <<-EOF
		listen: "$2"
		workers: 0
		watch: false
		admin: {listen: "$3"}
		access_log: {path: "off"}
		services:
		  bench:
		    instances: [{addr: "$4"}]
		routes:
		  - {name: plain, match: {prefix: /}, service: bench}
	EOF
	# BENCH_CONFIG_EXTRA: a file of more top-level settings (a tracing
	# section, say) for the gateway.
	if [[ -n ${BENCH_CONFIG_EXTRA:-} ]]; then cat "$BENCH_CONFIG_EXTRA" >>"$1"; fi
}

# start_nginx [name addr fields]: runs nginx as the reference proxy
# (bench/nginx.conf.tmpl) on addr (default $NGINX_ADDR) to $UPSTREAM_ADDR with
# $NGINX_WORKERS workers, files in $TMP/name (default nginx). With fields=1 it
# also adds the fields the gateway adds (bench/nginx-fields-*.inc).
start_nginx() {
	local name=${1:-nginx} addr=${2:-$NGINX_ADDR} fields=${3:-0} prefix user_line="" http_fields="" location_fields=""
	prefix=$TMP/$name
	port_busy "$addr" && die "$addr is already in use; stop whatever listens there"
	mkdir -p "$prefix"
	if [[ $(id -u) == 0 ]]; then user_line="user nobody $(id -gn nobody 2>/dev/null || echo nogroup);"; fi
	if [[ $fields == 1 ]]; then
		http_fields="include $PWD/bench/nginx-fields-http.inc;"
		location_fields="include $PWD/bench/nginx-fields-location.inc;"
	fi
	sed -e "s|@PREFIX@|$prefix|g" -e "s|@WORKERS@|$NGINX_WORKERS|g" \
		-e "s|@UPSTREAM@|$UPSTREAM_ADDR|g" -e "s|@LISTEN@|$addr|g" \
		-e "s|@USER_LINE@|$user_line|g" -e "s|@HTTP_FIELDS@|$http_fields|g" \
		-e "s|@LOCATION_FIELDS@|$location_fields|g" bench/nginx.conf.tmpl >"$prefix/nginx.conf"
	start_pinned "$name" "$PROXY_CPUS" "$NGINX_BIN" -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log" -g 'daemon off;'
	wait_http "$name" "http://$addr$REQ_PATH"
}

# ---------------------------------------------------------------- reports
# ratio a b: a ÷ b to two places, 0 when b is not above 0.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

# cpu_per ticks n: CPU µs per request of ticks (clock ticks) over n requests.
cpu_per() { awk -v t="$1" -v hz="$(getconf CLK_TCK)" -v n="$2" 'BEGIN { printf "%.2f", (n > 0 ? t / hz * 1e6 / n : 0) }'; }

# record_report title: with RECORD=1, appends $TMP/report.md to
# bench/RESULTS.md under "## title, date" and the command that made it.
record_report() {
	[[ $RECORD == 1 ]] || return 0
	{
		echo
		echo "## $1, $(date -u)"
		echo
		echo "\`$COMMAND\`"
		cat "$TMP/report.md"
	} >>bench/RESULTS.md
	log "appended to bench/RESULTS.md"
}

# wrk_pass name path backend script: wrk (2 threads, $CONNS connections,
# the wrk script) at $GATEWAY_ADDR$path, $WARMUP unmeasured then
# $DURATION measured; notes into the caller's arrays RPS, P99, ERR and,
# per request, the gateway's CPU (CPU) and the backend's (UPCPU).
wrk_pass() {
	local name=$1 path=$2 backend=$3 script=$4 out t0 t1 u0 u1 n
	wrk -t2 -c"$CONNS" -d"$WARMUP" -s "$script" "http://$GATEWAY_ADDR$path" >/dev/null 2>&1 || true
	t0=$(proc_ticks "${PIDS[tollgate]}")
	u0=$(proc_ticks "${PIDS[$backend]}")
	out=$(wrk -t2 -c"$CONNS" -d"$DURATION" --latency -s "$script" "http://$GATEWAY_ADDR$path")
	t1=$(proc_ticks "${PIDS[tollgate]}")
	u1=$(proc_ticks "${PIDS[$backend]}")
	n=$(awk '/requests in/ { print $1 }' <<<"$out")
	RPS[$name]=$(awk '/Requests\/sec/ { printf "%.0f", $2 }' <<<"$out")
	P99[$name]=$(awk '$1 == "99%" { print $2 }' <<<"$out")
	ERR[$name]=$(awk '/Socket errors|Non-2xx/ { s = s $0 " " } END { print (s == "" ? 0 : s) }' <<<"$out")
	CPU[$name]=$(cpu_per "$((t1 - t0))" "$n")
	UPCPU[$name]=$(cpu_per "$((u1 - u0))" "$n")
	log "$name: ${RPS[$name]} req/s, p99 ${P99[$name]}, gateway ${CPU[$name]} µs CPU/req, backend ${UPCPU[$name]}, errors ${ERR[$name]}"
}
