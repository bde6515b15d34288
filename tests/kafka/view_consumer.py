"""A consumer of a view's changelog over the Kafka endpoint that keeps the
view's rows, exactly once: it reads with isolation.level=read_committed,
applies each record's `diff` header to its row (the record's key), and after
each poll saves its rows with the next offset in one file (written whole,
then renamed over the old one), then commits that offset to its group. It
starts from the group's committed offset, checked against its file's. Run
(and killed with SIGKILL at any moment) by tests/kafka_kill9.rs:

    python3 view_consumer.py STATE_FILE HOST:PORT TOPIC GROUP SECONDS

Exits non-zero, saying why, if a record would take a row below zero or the
group's offset is past what its file holds."""

import json
import os
import struct
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

state_file, bootstrap, topic, group, seconds = sys.argv[1:6]
state = {"offset": 0, "rows": {}}
if os.path.exists(state_file):
    with open(state_file) as f:
        state = json.load(f)

consumer = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "reconnect.backoff.max.ms": 200,
})
try:
    committed = consumer.committed([TopicPartition(topic, 0)], timeout=5)[0].offset
except KafkaException:
    committed = -1001  # the server is down: the file alone says where to start
# The file is saved before the commit: the group may be behind it, never ahead.
if committed >= 0 and committed > state["offset"]:
    sys.exit(f"the group's offset {committed} is past the saved rows' {state['offset']}")
consumer.assign([TopicPartition(topic, 0, state["offset"])])

deadline = time.time() + float(seconds)
while time.time() < deadline:
    messages = consumer.consume(500, timeout=0.2)
    applied = False
    for message in messages:
        if message.error():
            continue
        if message.offset() < state["offset"]:
            continue  # the start of a batch before the asked offset
        if message.offset() != state["offset"]:
            sys.exit(f"offset {message.offset()} read where {state['offset']} was next")
        headers = dict(message.headers() or [])
        diff = struct.unpack(">q", headers["diff"])[0]
        row = message.key().decode()
        count = state["rows"].get(row, 0) + diff
        if count < 0:
            sys.exit(f"row {row} at offset {message.offset()} would be held {count} times")
        # The record's value is the row's multiplicity after its epoch: what
        # this consumer holds must agree (a change applied twice or missed would not).
        value = message.value()
        after = struct.unpack(">q", value)[0] if value else 0
        if count != after:
            sys.exit(f"row {row} at offset {message.offset()}: held {count}, the view says {after}")
        if count == 0:
            state["rows"].pop(row, None)
        else:
            state["rows"][row] = count
        state["offset"] = message.offset() + 1
        applied = True
    if applied:
        with open(state_file + ".tmp", "w") as f:
            json.dump(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(state_file + ".tmp", state_file)
        try:
            consumer.commit(offsets=[TopicPartition(topic, 0, state["offset"])], asynchronous=False)
        except KafkaException:
            pass  # the server is down; the next run starts from the file
consumer.close()
print(json.dumps({"offset": state["offset"], "rows": len(state["rows"])}))
