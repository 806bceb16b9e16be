#!/usr/bin/env bash
# The ResourceManager's resident memory at scale (docs/performance.md, "RM memory at scale").
#
#   scripts/rm-memory.sh [--nodes N] [--apps A] [--kill K] [--steps S] [--small] [--build]
#
# Starts a release `resourcemanager` on a free loopback port (127.0.0.1:0) with its own
# temporary configuration (a copy of conf/ with the limits raised so that A applications are
# accepted and K finished ones kept, a long NM expiry, a fresh cluster secret) and state store,
# then, with `spindle bench http` over the real REST and node-tracker APIs:
#   1. registers N benchmark nodes (8 GB, 8 vcores, as conf/'s NodeManager; no NM behind
#      them) and leaves them registered;
#   2. submits A applications, in S equal steps, to the default queue, whose
#      max-parallel-apps is 0: each waits ACCEPTED, not activated (as the pending
#      applications of a busy queue wait for its AM limit), so no AM is placed;
#   3. kills the first K submitted, so that they end KILLED and are retained;
# and after each stage reads the RM's VmRSS and VmHWM from /proc/<pid>/status. Prints a table
# (stage, nodes, apps, finished apps, RSS and peak RSS in MB) and the growth per node, per
# pending application and per application killed. The RM is killed and its temporary
# directory removed on exit.
#
# Defaults: N=10000, A=100000, K=50000, S=5; --small divides N, A and K by 10. The same
# settings are read from NODES, APPS, KILL and STEPS in the environment (flags win).
# Environment:
#   BIN_DIR=DIR   where `resourcemanager` and `spindle` are (default target/release)
#   SETTLE=SECS   pause after each stage before reading the memory (default 3)
#   KEEP_LOG=FILE copy the RM's log there on exit
#   HEAP_STATS=1  also read, after each stage, what glibc's malloc has in use and holds from
#                 the system (gdb calls malloc_stats() in the RM, which prints it to its log):
#                 RSS less heap in use is the allocator's free memory and the binary
#   RM_WRAPPER="CMD ARGS"  start the RM under CMD (a profiler: "heaptrack -o /tmp/rm-heap");
#                 the memory read is still the RM's own process, which is stopped with
#                 SIGTERM at the end, and the wrapper waited for (at most 10 minutes)
# --build runs `cargo build --release -p spindle --bins` first (into $CARGO_TARGET_DIR, if set,
# and then BIN_DIR defaults to its release directory); otherwise nothing is built.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

nodes=${NODES:-10000}
apps=${APPS:-100000}
kills=${KILL:-50000}
steps=${STEPS:-5}
build=0
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --apps) apps=$2; shift 2 ;;
    --kill) kills=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --small) nodes=$((nodes / 10)); apps=$((apps / 10)); kills=$((kills / 10)); shift ;;
    --build) build=1; shift ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "rm-memory: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
for v in nodes apps kills steps; do
  case "${!v}" in
    ''|*[!0-9]*) echo "rm-memory: $v must be a whole number, got '${!v}'" >&2; exit 2 ;;
  esac
done
[ "$steps" -ge 1 ] || steps=1
[ "$kills" -le "$apps" ] || { echo "rm-memory: cannot kill $kills of $apps applications" >&2; exit 2; }
settle=${SETTLE:-3}

if [ "$build" = 1 ]; then
  cargo build --release -q -p spindle --bins
  bin_dir=${BIN_DIR:-${CARGO_TARGET_DIR:-target}/release}
else
  bin_dir=${BIN_DIR:-target/release}
fi
rm_bin=$bin_dir/resourcemanager
spindle=$bin_dir/spindle
for b in "$rm_bin" "$spindle"; do
  [ -x "$b" ] || { echo "rm-memory: no $b (build with cargo build --release --bins, or pass --build / BIN_DIR)" >&2; exit 2; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/spindle-rm-memory.XXXXXX")
rm_pid=
wrapper_pid=
cleanup() {
  if [ -n "$rm_pid" ] && kill -0 "$rm_pid" 2>/dev/null; then
    kill "$rm_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$rm_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$rm_pid" 2>/dev/null || true
  fi
  if [ -n "$wrapper_pid" ]; then
    # A profiler writes its report after the RM exits.
    for _ in $(seq 6000); do kill -0 "$wrapper_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$wrapper_pid" 2>/dev/null || true
  fi
  wait 2>/dev/null || true
  if [ -n "${KEEP_LOG:-}" ] && [ -f "$tmp/rm.log" ]; then cp "$tmp/rm.log" "$KEEP_LOG"; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# set_prop FILE NAME VALUE: sets a Hadoop-style property, replacing its value if the file
# names it, else adding it before </configuration>.
set_prop() {
  local f=$1 n=$2 v=$3
  if grep -q "<name>$n</name>" "$f"; then
    awk -v n="<name>$n</name>" -v v="<value>$v</value>" '
      index($0, n) { found = 1 }
      found && /<value>.*<\/value>/ { sub(/<value>.*<\/value>/, v); found = 0 }
      { print }' "$f" >"$f.new"
  else
    awk -v n="$n" -v v="$v" '
      /<\/configuration>/ { print "  <property><name>" n "</name><value>" v "</value></property>" }
      { print }' "$f" >"$f.new"
  fi
  mv "$f.new" "$f"
  grep -q "<value>$v</value>" "$f" || { echo "rm-memory: could not set $n in $f" >&2; exit 1; }
}

conf=$tmp/conf
cp -r "$root/conf" "$conf"
"$spindle" cluster-secret -generate "$tmp/cluster-secret" >/dev/null
cap=$((apps > 100000 ? apps : 100000))
ys=$conf/yarn-site.xml
set_prop "$ys" yarn.resourcemanager.webapp.address 127.0.0.1:0
set_prop "$ys" spindle.resourcemanager.state-store.path "$tmp/rm/rmstore.sqlite"
set_prop "$ys" spindle.cluster.secret-file "$tmp/cluster-secret"
set_prop "$ys" hadoop.tmp.dir "$tmp/hadoop"
set_prop "$ys" yarn.resourcemanager.max-completed-applications "$cap"
# One hour: no benchmark node expires during the run (the container-token key's rolling
# interval, 1 day by default, must stay above 3 times this).
set_prop "$ys" yarn.nm.liveness-monitor.expiry-interval-ms 3600000
cs=$conf/capacity-scheduler.xml
set_prop "$cs" yarn.scheduler.capacity.maximum-applications "$cap"
set_prop "$cs" yarn.scheduler.capacity.root.default.maximum-applications "$cap"
# No application is activated, so no AM is placed on a node where no NM listens. (The nodes
# cannot be too small for an AM instead: the RM refuses an AM larger than its largest node.)
set_prop "$cs" yarn.scheduler.capacity.root.default.max-parallel-apps 0

# shellcheck disable=SC2086 # RM_WRAPPER is a command and its arguments
SPINDLE_WORK_DIR=$tmp ${RM_WRAPPER:-} "$rm_bin" --conf-dir "$conf" --address-file "$tmp/address" \
  >"$tmp/rm.log" 2>&1 &
started_pid=$!
addr=
for _ in $(seq 300); do
  if [ -s "$tmp/address" ]; then addr=$(cat "$tmp/address"); break; fi
  kill -0 "$started_pid" 2>/dev/null || { echo "rm-memory: the RM exited:" >&2; tail -20 "$tmp/rm.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$addr" ] || { echo "rm-memory: the RM did not start within 30 s" >&2; exit 1; }
if [ -z "${RM_WRAPPER:-}" ]; then
  rm_pid=$started_pid
else
  # The RM is a descendant of the wrapper: the process running our binary with our
  # (unique) address file.
  wrapper_pid=$started_pid
  rm_exe=$(readlink -f "$rm_bin")
  for p in $(pgrep -f -- "--address-file $tmp/address" || true); do
    if [ "$(readlink -f "/proc/$p/exe" 2>/dev/null)" = "$rm_exe" ]; then rm_pid=$p; fi
  done
  [ -n "$rm_pid" ] || { echo "rm-memory: cannot find the RM under $RM_WRAPPER" >&2; exit 1; }
fi

kb() { awk "BEGIN { printf \"%.2f\", $1 }"; }
rows=()
declare -A rss_at heap_at
measure() {
  local stage=$1 rss hwm m
  sleep "$settle"
  kill -0 "$rm_pid" 2>/dev/null || { echo "rm-memory: the RM died:" >&2; tail -20 "$tmp/rm.log" >&2; exit 1; }
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$rm_pid/status")
  hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$rm_pid/status")
  local heap='' held=''
  if [ "${HEAP_STATS:-0}" = 1 ]; then
    gdb -p "$rm_pid" -batch -ex 'call (void) malloc_stats()' >/dev/null 2>&1 || true
    sleep 0.5
    # The last "Total (incl. mmap):" block of the log: system bytes, then in use bytes.
    read -r held heap < <(awk '/^Total \(incl\. mmap\):/ { t = 1; next }
      t && /^system bytes/ { s = $4 } t && /^in use bytes/ { u = $5; t = 0 }
      END { print s, u }' "$tmp/rm.log")
    if [ -n "$heap" ]; then
      heap=$(kb "$heap / 1048576") held=$(kb "$held / 1048576")
    else
      heap='?' held='?'
    fi
  fi
  # After the memory is read: the call itself costs the RM a little.
  m=$(curl -sf "http://$addr/ws/v1/cluster/metrics")
  field() { grep -o "\"$1\":[0-9]*" <<<"$m" | head -1 | cut -d: -f2; }
  local n a fin
  n=$(field activeNodes)
  a=$(field appsSubmitted)
  fin=$(field appsCompleted) # every final application (FINISHED, FAILED and KILLED)
  rss_at[$stage]=$rss
  heap_at[$stage]=$heap
  if [ "${HEAP_STATS:-0}" = 1 ]; then
    rows+=("$(printf '| %s | %s | %s | %s | %s | %s | %s | %s |' "$stage" "$n" "$a" "$fin" \
      "$(kb "$rss / 1024")" "$(kb "$hwm / 1024")" "$heap" "$held")")
  else
    rows+=("$(printf '| %s | %s | %s | %s | %s | %s |' "$stage" "$n" "$a" "$fin" \
      "$(kb "$rss / 1024")" "$(kb "$hwm / 1024")")")
  fi
  printf 'rm-memory: %-22s nodes %6s apps %7s finished %7s RSS %8s MB (peak %s MB)%s\n' \
    "$stage" "$n" "$a" "$fin" "$(kb "$rss / 1024")" "$(kb "$hwm / 1024")" \
    "${heap:+, heap in use $heap MB of $held MB}" >&2
}
bench() {
  "$spindle" bench http --rm-address "$addr" --conf-dir "$conf" --heartbeats 0 "$@" \
    | tee -a "$tmp/bench.jsonl" >&2
}

echo "rm-memory: RM pid $rm_pid at $addr; $nodes nodes, $apps applications in $steps steps, $kills killed" >&2
measure started
if [ "$nodes" -gt 0 ]; then
  bench --nodes "$nodes" --node-memory 8192 --node-vcores 8 --submissions 0
fi
measure "$nodes nodes"
done_apps=0
for s in $(seq "$steps"); do
  n=$((apps * s / steps - done_apps))
  [ "$n" -gt 0 ] || continue
  bench --submissions "$n"
  done_apps=$((done_apps + n))
  measure "$done_apps apps"
done
if [ "$kills" -gt 0 ]; then
  bench --submissions 0 --kill "$kills"
  measure "$kills killed"
fi

echo
if [ "${HEAP_STATS:-0}" = 1 ]; then
  echo "| stage | nodes | apps | finished apps | RSS MB | peak RSS (VmHWM) MB | heap in use MB | malloc holds MB |"
  echo "|---|---|---|---|---|---|---|---|"
else
  echo "| stage | nodes | apps | finished apps | RSS MB | peak RSS (VmHWM) MB |"
  echo "|---|---|---|---|---|---|"
fi
printf '%s\n' "${rows[@]}"
echo
base=${rss_at[started]}
after_nodes=${rss_at["$nodes nodes"]}
after_apps=${rss_at["$done_apps apps"]:-$after_nodes}
[ "$nodes" -gt 0 ] && echo "per node: $(kb "($after_nodes - $base) / $nodes") KB"
[ "$apps" -gt 0 ] && echo "per pending application: $(kb "($after_apps - $after_nodes) / $apps") KB"
if [ "$kills" -gt 0 ]; then
  after_kill=${rss_at["$kills killed"]}
  echo "per application killed (change on finishing): $(kb "($after_kill - $after_apps) / $kills") KB"
fi
echo "total: $(kb "${after_kill:-$after_apps} / 1024") MB (target: under 300 MB)"
# The heap in use, unlike RSS, falls when records are freed: what a finished application
# keeps, taking each still pending one to cost what it did before the kills.
if [ "${HEAP_STATS:-0}" = 1 ] && [ "$apps" -gt 0 ] && [ "$kills" -gt 0 ] \
  && [ "${heap_at[started]}" != '?' ] && [ "${heap_at["$kills killed"]}" != '?' ]; then
  h0=${heap_at["$nodes nodes"]} h1=${heap_at["$done_apps apps"]} h2=${heap_at["$kills killed"]}
  [ "$nodes" -gt 0 ] && echo "heap per node: $(kb "($h0 - ${heap_at[started]}) * 1024 / $nodes") KB"
  echo "heap per pending application: $(kb "($h1 - $h0) * 1024 / $apps") KB"
  echo "heap per finished application: $(kb "(($h2 - $h0) * 1024 - ($apps - $kills) * ($h1 - $h0) * 1024 / $apps) / $kills") KB"
fi
