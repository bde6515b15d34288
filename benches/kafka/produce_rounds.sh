#!/usr/bin/env bash
# Produce throughput of Millpond's Kafka endpoint beside Apache Kafka, in
# alternating rounds so that a figure is a median, not one draw: the full
# bench (bench.sh) moves by up to 2 x between runs of one configuration.
# Each round writes RECORDS records of SIZE bytes to a fresh topic on each
# target (Kafka; Millpond flushing as Kafka does; Millpond durable), at
# acks=1 and acks=all, with Kafka's ProducerPerformance.
#
#   bash benches/kafka/produce_rounds.sh MILLPOND_BINARY [SIZE] [RECORDS] [ROUNDS]
#
# Prints one line per run, then per target and acks the median records/s
# and its ratio to Kafka's.
set -euo pipefail
bin=${1:?the millpond binary}
size=${2:-1024}
records=${3:-500000}
rounds=${4:-5}
work=${BENCH_DIR:-/tmp/kafka-produce-rounds}
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=benches/kafka/broker.sh
. "$(dirname "$0")/broker.sh"
kafka_pid= millpond_pid=
trap 'kill $kafka_pid $millpond_pid 2>/dev/null; wait 2>/dev/null' EXIT
kafka_broker_start "$work" 1
"$bin" --data-dir "$work/millpond-data" serve --pg-listen 127.0.0.1:26875 --kafka-listen 127.0.0.1:19092 \
  > "$work/millpond.log" 2>&1 &
millpond_pid=$!
sleep 2

results="$work/results.txt"
: > "$results"
run=0
for round in $(seq 1 "$rounds"); do
  for acks in 1 all; do
    for target in kafka millpond-flushing millpond-durable; do
      run=$((run + 1))
      configs=()
      case $target in
        kafka) server=127.0.0.1:29092 ;;
        millpond-flushing) server=127.0.0.1:19092; configs=(--config flush.messages=1000000000 --config flush.ms=1000) ;;
        millpond-durable) server=127.0.0.1:19092 ;;
      esac
      java_run org.apache.kafka.tools.TopicCommand --bootstrap-server "$server" --create --topic "r$run" \
        --partitions 1 "${configs[@]}" > /dev/null 2>&1
      rps=$(java_run org.apache.kafka.tools.ProducerPerformance --topic "r$run" --num-records "$records" \
        --record-size "$size" --throughput -1 \
        --producer-props bootstrap.servers="$server" acks="$acks" linger.ms=5 batch.size=262144 2>/dev/null \
        | tail -1 | sed -E 's/.* ([0-9.]+) records\/sec.*/\1/')
      echo "$round $target $acks $rps" | tee -a "$results"
    done
  done
done
echo
for acks in 1 all; do
  kafka=$(awk -v a="$acks" '$2 == "kafka" && $3 == a { print $4 }' "$results" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  for target in kafka millpond-flushing millpond-durable; do
    median=$(awk -v t="$target" -v a="$acks" '$2 == t && $3 == a { print $4 }' "$results" | sort -n \
      | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    awk -v t="$target" -v a="$acks" -v m="$median" -v k="$kafka" -v s="$size" \
      'BEGIN { printf "%-18s %5s B acks=%-3s median %10.0f records/s  %5.2f x Kafka\n", t, s, a, m, m / k }'
  done
done
