#!/bin/bash
# Runs the Nexmark queries in Flink over the events of a Millpond data
# directory, for a side-by-side with `millpond bench nexmark`.
#
# usage: run.sh MILLPOND_BINARY DATA_DIR [PARALLELISMS [QUERY...]]
#   MILLPOND_BINARY  a millpond binary (to dump the topics)
#   DATA_DIR         a data directory with the topics person, auction and bid
#                    (`millpond gen nexmark`, or bench-nexmark/input-N)
#   PARALLELISMS     comma-separated Flink parallelisms (cores); default 1,2
#   QUERY            stems of queries/*.sql; default q0 q1 q2 q4 by_auction
#
# 1. Copies DATA_DIR (so that a millpond process holding it is not
#    disturbed) and dumps each topic partition's record values to
#    $FLINK_INPUT/TOPIC/part-P.json (JSON lines), once: a dump whose
#    .complete names the same DATA_DIR is reused.
# 2. Builds target/nexmark-flink.jar and target/lib/ with Maven if missing or
#    older than the sources.
# 3. Runs each query at each parallelism in a fresh JVM (a Flink MiniCluster:
#    RocksDB state, exactly-once checkpoints every second) and prints one line
#    per run: query, parallelism, seconds (Flink's net job run time),
#    events/s/core (input events / seconds / parallelism), startup_s (SQL
#    planning, MiniCluster start, submission), process_s and its events/s/core
#    (the whole JVM, as `millpond bench nexmark` times its child process),
#    the completed checkpoints, and over the process's life the cores this JVM
#    used (cpu_used; events/cpu_s = input events / its CPU seconds, start-up
#    included), the cores the rest of the machine used (others) and the
#    cores stolen by the hypervisor (steal): others and steal should be ~0.
#
# Environment:
#   FLINK_INPUT   where the JSON-lines dump goes (default /tmp/flink-input/<DATA_DIR's name>)
#   JAVA          the java binary (default: java on PATH; Java 17 or newer)
#   JAVA_HEAP     the JVM heap (default 4g)
#   FLINK_CONF    extra Flink options, space-separated -Dkey=value
#                 (e.g. "-Dtable.exec.mini-batch.enabled=true ...")
#   MVN_ARGS      extra Maven arguments (e.g. -Dmaven.repo.local=...)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 2 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 2
fi
bin=$(realpath "$1"); data=$(realpath "$2"); shift 2
parallelisms=${1:-1,2}; [ $# -gt 0 ] && shift
queries=("$@"); [ ${#queries[@]} -eq 0 ] && queries=(q0 q1 q2 q4 by_auction)
input=${FLINK_INPUT:-/tmp/flink-input/$(basename "$data")}
work=/tmp/flink-nexmark # checkpoints and RocksDB files of the current run

# shellcheck source=common.sh
. "$here/common.sh"
dump_input "$bin" "$data" "$input"
build_jar "$here"

# The runs.
IFS=, read -r -a ps <<<"$parallelisms"
events=$(cat "$input"/{person,auction,bid}/*.json | wc -l)
echo "Flink $(basename "$(ls "$here"/target/lib/flink-core-[0-9]*.jar)" .jar | sed 's/flink-core-//') over $events events ($input), RocksDB state, exactly-once checkpoints every 1 s; events/s/core = input events / seconds / parallelism"
printf '%-18s %11s %9s %14s %10s %10s %16s %11s %9s %12s %8s %8s\n' query parallelism seconds events/s/core startup_s process_s process_ev/s/core checkpoints cpu_used events/cpu_s others steal
for q in "${queries[@]}"; do
  sql=$here/queries/$q.sql
  [ -f "$sql" ] || { echo "no $sql" >&2; exit 1; }
  for p in "${ps[@]}"; do
    rm -rf "$work"; mkdir -p "$work"
    log=$work.$q.$p.log
    read -r -a cpu0 < <(grep '^cpu ' /proc/stat)
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    if ! /usr/bin/time -o "$work.cpu" -f '%U %S' \
      bash -c '. "$1/common.sh"; shift; flink_java "$@"' _ "$here" "$here" "$sql" "$input" "$p" ${FLINK_CONF:-} \
      >"$log" 2>&1; then
      echo "$q with parallelism $p failed; see $log:" >&2
      tail -30 "$log" >&2
      exit 1
    fi
    end=$(date +%s.%N)
    read -r -a cpu1 < <(grep '^cpu ' /proc/stat)
    line=$(grep '^RESULT ' "$log")
    field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
    process_s=$(echo "$end - $start" | bc)
    # Cores busy over the whole process: this JVM's, everything else's, and stolen by the hypervisor
    # (/proc/stat: user nice system idle iowait irq softirq steal, in 1/100 s).
    hz=$(getconf CLK_TCK)
    busy=$(( (cpu1[1] + cpu1[2] + cpu1[3] + cpu1[6] + cpu1[7]) - (cpu0[1] + cpu0[2] + cpu0[3] + cpu0[6] + cpu0[7]) ))
    steal=$(( cpu1[8] - cpu0[8] ))
    used=$(awk '{print $1 + $2}' "$work.cpu")
    printf '%-18s %11s %9s %14s %10s %10.2f %16.0f %11s %9.2f %12.0f %8.2f %8.2f\n' "$q" "$p" "$(field seconds)" \
      "$(field events_per_s_per_core)" "$(field startup_seconds)" "$process_s" "$(echo "$events / $process_s / $p" | bc -l)" \
      "$(grep -c 'Completed checkpoint' "$log")" "$(echo "$used / $process_s" | bc -l)" "$(echo "$events / $used" | bc -l)" \
      "$(echo "($busy / $hz - $used) / $process_s" | bc -l)" "$(echo "$steal / $hz / $process_s" | bc -l)"
  done
done
rm -rf "$work" "$work.cpu" "${FLINK_TMP:-/tmp/flink-nexmark-tmp}"
