#!/bin/bash
# bid_stats in Flink with Kafka on both sides, beside `millpond bench kafka`
# (which runs this script itself with --flink; see KafkaFlink.java).
#
# usage: run.sh BROKERS INPUT_TOPIC SINK_TOPIC EVENTS [PARALLELISM]
#   BROKERS      the Kafka cluster's bootstrap.servers
#   INPUT_TOPIC  the bids (JSON), EVENTS of them, read to the offsets at the start
#   SINK_TOPIC   where the view goes (upsert-kafka, exactly-once); created by
#                the caller or by the broker's auto-creation
#   PARALLELISM  Flink's parallelism (cores), default 1
#
# Builds target/kafka-flink.jar and target/lib/ with Maven if missing or older
# than the sources, runs the job in a fresh JVM (a MiniCluster: RocksDB state,
# exactly-once checkpoints every second, mini-batch aggregation of 1 s) and
# prints the job's RESULT line followed by process_seconds= and cpu_used=
# (cores the JVM used over its life) and others= (cores the rest of the
# machine used: the Kafka broker, and anything that disturbs the run).
#
# Environment: JAVA, JAVA_HEAP (default 4g), FLINK_CONF (more -Dkey=value),
# MVN_ARGS, as in benches/flink/run.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 4 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 2
fi
export FLINK_JAR=kafka-flink FLINK_MAIN=millpond.bench.KafkaFlink FLINK_TMP=/tmp/flink-kafka-tmp
flink=$here/../../flink
# shellcheck source=../../flink/common.sh
. "$flink/common.sh"
build_jar "$here"
work=/tmp/flink-kafka
rm -rf "$work"; mkdir -p "$work"
log=$work.log
read -r -a cpu0 < <(grep '^cpu ' /proc/stat)
start=$(date +%s.%N)
# shellcheck disable=SC2086
if ! /usr/bin/time -o "$work.cpu" -f '%U %S' \
  bash -c '. "$1/common.sh"; shift; flink_java "$@"' _ "$flink" "$here" "$1" "$2" "$3" "$4" "${5:-1}" ${FLINK_CONF:-} \
  >"$log" 2>&1; then
  echo "Flink failed; see $log:" >&2
  tail -30 "$log" >&2
  exit 1
fi
end=$(date +%s.%N)
read -r -a cpu1 < <(grep '^cpu ' /proc/stat)
process_s=$(echo "$end - $start" | bc)
hz=$(getconf CLK_TCK)
busy=$(( (cpu1[1] + cpu1[2] + cpu1[3] + cpu1[6] + cpu1[7]) - (cpu0[1] + cpu0[2] + cpu0[3] + cpu0[6] + cpu0[7]) ))
used=$(awk '{print $1 + $2}' "$work.cpu")
printf '%s process_seconds=%.2f cpu_used=%.2f others=%.2f\n' "$(grep '^RESULT ' "$log")" "$process_s" \
  "$(echo "$used / $process_s" | bc -l)" "$(echo "($busy / $hz - $used) / $process_s" | bc -l)"
rm -rf "$work" "$work.cpu" "$FLINK_TMP"
