#!/usr/bin/env bash
# Millpond's Kafka endpoint beside Apache Kafka (KRaft, one node, from the
# 4.4.0 jars of benches/kafka/pom.xml) on the same disk, driven by the same
# client: Kafka's own ProducerPerformance, ConsumerPerformance and
# EndToEndLatency. One topic of one partition on each; Millpond's both as
# created by default (every append synced before it is acknowledged) and with
# Kafka's flushing (flush.messages and flush.ms large: the page cache, synced
# in the background), which is what Kafka itself does.
#
#   bash benches/kafka/bench.sh MILLPOND_BINARY [RECORDS_100B] [RECORDS_1KIB]
#
# With BENCH_PASSES_ONLY=1, only the consume passes run again, on the data
# an earlier full run left in BENCH_DIR.
#
# Prints one line per run: target, record size, acks, records/s, MB/s,
# latency p50/p99 ms (produce), then consume MB/s and end-to-end p50/p99 ms.
# Then the consume passes: the acks=all topics read again by Kafka's
# ConsumerPerformance, by kcat (librdkafka) and by raw_fetch.py (Fetch
# requests whose answers are thrown away: the server's send path alone),
# from Kafka and from Millpond serving Fetch with sendfile and buffered
# (`--kafka-fetch-buffered`, a restart of the same data directory),
# alternating, two rounds.
set -euo pipefail
bin=${1:?the millpond binary}
n_small=${2:-2000000}
n_large=${3:-500000}
work=${BENCH_DIR:-/tmp/kafka-bench}
passes_only=${BENCH_PASSES_ONLY:-0}
[ "$passes_only" = 1 ] || { rm -rf "$work" && mkdir -p "$work"; }
# shellcheck source=benches/kafka/broker.sh
. "$(dirname "$0")/broker.sh"
kafka_pid= millpond_pid=
trap 'kill $kafka_pid $millpond_pid 2>/dev/null; wait 2>/dev/null' EXIT
kafka_broker_start "$work" "$([ "$passes_only" = 1 ] && echo 0 || echo 1)"
start_millpond() { # [serve flags...]
  # No initial rebalance delay, as the Kafka broker above (its 3 s default would be in every consume figure).
  "$bin" --data-dir "$work/millpond-data" serve --pg-listen 127.0.0.1:26875 --kafka-listen 127.0.0.1:19092 \
    --kafka-group-initial-rebalance-delay-ms 0 "$@" \
    >> "$work/millpond.log" 2>&1 &
  millpond_pid=$!
  for _ in $(seq 1 100); do
    (exec 3<>/dev/tcp/127.0.0.1/19092) 2>/dev/null && return
    sleep 0.1
  done
  echo "millpond did not start: $work/millpond.log" >&2; exit 1
}
stop_millpond() { kill "$millpond_pid" 2>/dev/null; wait "$millpond_pid" 2>/dev/null || true; }
start_millpond

topic() { # server name [configs...]
  local server=$1 name=$2; shift 2
  local configs=()
  for c in "$@"; do configs+=(--config "$c"); done
  java_run org.apache.kafka.tools.TopicCommand --bootstrap-server "$server" --create --topic "$name" \
    --partitions 1 "${configs[@]}" > "$work/topic-$name.log" 2>&1 \
    || { echo "creating $name on $server failed: $work/topic-$name.log" >&2; exit 1; }
}

produce() { # server topic records size acks -> "records/s MB/s p50 p99"
  java_run org.apache.kafka.tools.ProducerPerformance --topic "$2" --num-records "$3" --record-size "$4" \
    --throughput -1 --producer-props bootstrap.servers="$1" acks="$5" linger.ms=5 batch.size=262144 2>/dev/null \
    | tail -1 | sed -E 's/.* ([0-9.]+) records\/sec \(([0-9.]+) MB\/sec\).* ([0-9]+) ms 50th, [0-9]+ ms 95th, ([0-9]+) ms 99th.*/\1 \2 \3 \4/'
}

consume() { # server topic records -> "MB/s"
  java_run org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$1" --topic "$2" --messages "$3" \
    --timeout 60000 2>/dev/null | tail -1 | awk -F', *' '{print $4}'
}

kcat_consume() { # server topic records size -> "MB/s" (MiB, as ConsumerPerformance counts)
  local start end
  start=$(date +%s%N)
  kcat -C -b "$1" -t "$2" -o beginning -e -q -c "$3" -f '%s' -X fetch.max.bytes=52428800 > /dev/null
  end=$(date +%s%N)
  awk -v n="$3" -v s="$4" -v ns=$((end - start)) 'BEGIN { printf "%.1f", n * s / 1048576 / (ns / 1e9) }'
}

latency() { # server topic -> "p50 p99" (ms), 10 000 round trips of 100 B at acks=all
  java_run org.apache.kafka.tools.EndToEndLatency "$1" "$2" 10000 all 100 2>/dev/null \
    | awk '/Percentiles/ {gsub(/,/, ""); print $4, $10}'
}

if [ "$passes_only" != 1 ]; then
  printf '%-22s %6s %5s %12s %8s %8s %8s %12s %10s %10s\n' target size acks 'records/s' 'MB/s' 'p50 ms' 'p99 ms' 'consume MB/s' 'e2e p50' 'e2e p99'
  run=0
  : > "$work/passes.txt"
  for size in 100 1024; do
    records=$([ "$size" = 100 ] && echo "$n_small" || echo "$n_large")
    for acks in 1 all; do
      for target in kafka millpond-durable millpond-flushing; do
        run=$((run + 1))
        name="t$run"
        case $target in
          kafka) server=127.0.0.1:29092; topic "$server" "$name" ;;
          millpond-durable) server=127.0.0.1:19092; topic "$server" "$name" ;;
          millpond-flushing) server=127.0.0.1:19092; topic "$server" "$name" flush.messages=1000000000 flush.ms=1000 ;;
        esac
        produced=$(produce "$server" "$name" "$records" "$size" "$acks") \
          || { echo "producing to $name on $server failed" >&2; exit 1; }
        consumed=$(consume "$server" "$name" "$records")
        e2e=$( [ "$size" = 100 ] && [ "$acks" = all ] && latency "$server" "e2e$run" || echo "- -")
        read -r rps mbps p50 p99 <<< "$produced"
        read -r e50 e99 <<< "$e2e"
        printf '%-22s %6s %5s %12s %8s %8s %8s %12s %10s %10s\n' "$target" "$size" "$acks" "$rps" "$mbps" "$p50" "$p99" "$consumed" "$e50" "$e99"
        if [ "$acks" = all ]; then echo "$target $name $size $records" >> "$work/passes.txt"; fi
      done
    done
  done
fi

# The consume passes: each acks=all topic read whole again, by both clients.
echo
mapfile -t passes < "$work/passes.txt"
raw_fetch="$(dirname "$0")/raw_fetch.py"
printf '%-8s %-22s %6s %-10s %12s %12s %12s\n' round target size fetch 'java MB/s' 'kcat MB/s' 'raw MB/s'
for round in 1 2; do
  for mode in sendfile buffered; do
    stop_millpond
    if [ "$mode" = buffered ]; then start_millpond --kafka-fetch-buffered; else start_millpond; fi
    for pass in "${passes[@]}"; do
      read -r target name size records <<< "$pass"
      case $target in
        kafka) server=127.0.0.1:29092; [ "$mode" = sendfile ] || continue; fetch=sendfile ;;
        *) server=127.0.0.1:19092; fetch=$mode ;;
      esac
      printf '%-8s %-22s %6s %-10s %12s %12s %12s\n' "$round" "$target" "$size" "$fetch" \
        "$(consume "$server" "$name" "$records")" "$(kcat_consume "$server" "$name" "$records" "$size")" \
        "$(python3 "$raw_fetch" "$server" "$name" 8388608)"
    done
  done
done
