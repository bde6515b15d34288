#!/usr/bin/env bash
# `millpond bench kafka` against Apache Kafka 4.4.0 on this machine: a KRaft
# broker from the jars (broker.sh) on 127.0.0.1:29092, then bid_stats with
# the Kafka source and the transactional Kafka sink against the same job on
# the embedded log, and the pipeline's end-to-end latency.
#
#   bash benches/kafka/pipeline.sh MILLPOND_BINARY [millpond bench kafka options, e.g. --bids 5000000]
set -euo pipefail
bin=${1:?the millpond binary}
shift
work=${BENCH_DIR:-/tmp/kafka-pipeline}
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=benches/kafka/broker.sh
. "$(dirname "$0")/broker.sh"
kafka_pid=
trap 'kill $kafka_pid 2>/dev/null; wait 2>/dev/null' EXIT
kafka_broker_start "$work" 1
"$bin" --data-dir "$work/millpond-data" bench kafka --brokers 127.0.0.1:29092 "$@"
