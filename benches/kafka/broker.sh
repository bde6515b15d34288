# Sourced by bench.sh and produce_rounds.sh: Apache Kafka 4.4.0 from the
# jars of pom.xml, a KRaft broker and controller in one JVM on
# 127.0.0.1:29092, its data in $work/kafka-data.
#   kafka_broker_start WORK FORMAT   (FORMAT 1: a new cluster; 0: the data kept)
# sets kafka_pid (the JVM's, for the caller's trap) and waits until it answers.
jars="$HOME/.cache/millpond/kafka-4.4.0"
[ -f "$jars/kafka-tools-4.4.0.jar" ] \
  || mvn -q -f "$(dirname "${BASH_SOURCE[0]}")/pom.xml" dependency:copy-dependencies -DoutputDirectory="$jars"
java_run() { java -Xmx1g -cp "$jars/*" "$@"; }

kafka_broker_start() {
  local work=$1 format=$2
  cat > "$work/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:29093
listeners=PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:29093
advertised.listeners=PLAINTEXT://127.0.0.1:29092
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$work/kafka-data
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
  if [ "$format" = 1 ]; then
    java_run kafka.tools.StorageTool format -t "$(java_run kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)" \
      -c "$work/server.properties" > "$work/format.log" 2>&1
  fi
  # Not through java_run: $! must be the JVM's pid for the caller's trap to stop it.
  java -Xmx2g -cp "$jars/*" kafka.Kafka "$work/server.properties" > "$work/kafka.log" 2>&1 &
  kafka_pid=$!
  for _ in $(seq 1 60); do
    java_run org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:29092 --list > /dev/null 2>&1 && return
    sleep 1
  done
  echo "Kafka did not start: $work/kafka.log" >&2
  exit 1
}
