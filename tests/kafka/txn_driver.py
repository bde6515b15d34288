"""A transactional producer (confluent-kafka) that keeps going while the
server it writes to is killed with SIGKILL and restarted.

python3 txn_driver.py DATA_DIR TOPIC run SECONDS OUTCOMES
python3 txn_driver.py DATA_DIR TOPIC create PARTITIONS
python3 txn_driver.py DATA_DIR TOPIC dump ISOLATION   (each record's value, one per line)

Transaction n writes RECORDS records {"n": n, "j": j} (keys spread over the
topic's partitions) and is aborted when n % 3 == 2, committed otherwise.
Each outcome is appended to OUTCOMES as "<n> committed", "<n> aborted" or,
when the server died before the answer, "<n> unknown" (then a new producer
of the same transactional.id fences the old one and goes on). The server's
Kafka address is read from DATA_DIR/server.json each time a producer starts
(it changes with every restart)."""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

DATA_DIR, TOPIC, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
RECORDS = 5
END = time.time() + (float(sys.argv[4]) if MODE == "run" else 60)


def address():
    try:
        with open(f"{DATA_DIR}/server.json") as f:
            return json.load(f)["kafka"]
    except (OSError, ValueError, KeyError):
        return None


def new_producer():
    while time.time() < END:
        kafka = address()
        if kafka is None:
            time.sleep(0.1)
            continue
        try:
            p = Producer({"bootstrap.servers": kafka, "transactional.id": "killed", "transaction.timeout.ms": 10000,
                          "message.timeout.ms": 4000, "socket.timeout.ms": 2000, "reconnect.backoff.max.ms": 200,
                          "linger.ms": 2})
            p.init_transactions(4)
            return p
        except KafkaException:
            time.sleep(0.1)
    return None


def create(partitions):
    admin = AdminClient({"bootstrap.servers": address()})
    for future in admin.create_topics([NewTopic(TOPIC, partitions)]).values():
        future.result(20)


def dump(isolation):
    """Prints every record's value, reading each partition to its end, once
    a new producer of the transactional id has ended whatever the last one
    left open."""
    if new_producer() is None:
        sys.exit("no producer could start")
    c = Consumer({"bootstrap.servers": address(), "group.id": f"dump-{time.time()}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True})
    c.subscribe([TOPIC])
    eof, deadline = set(), time.time() + 60
    while time.time() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() != -191:  # _PARTITION_EOF
                sys.exit(f"consumer error: {m.error()}")
            eof.add(m.partition())
            if c.assignment() and len(eof) == len(c.assignment()):
                break
            continue
        print(m.value().decode())
    else:
        sys.exit("the topic was not read to its end within 60 s")
    c.close()


def run(outcomes):
    out = open(outcomes, "a", buffering=1)
    p, n = new_producer(), 0
    while p is not None and time.time() < END:
        commit = n % 3 != 2
        try:
            p.begin_transaction()
            for j in range(RECORDS):
                p.produce(TOPIC, key=f"{n}-{j}", value=json.dumps({"n": n, "j": j}))
            if commit:
                p.commit_transaction(4)
            else:
                p.flush(4)
                p.abort_transaction(4)
            out.write(f"{n} {'committed' if commit else 'aborted'}\n")
        except KafkaException:
            out.write(f"{n} unknown\n")
            p = new_producer()
        n += 1
    out.close()


if MODE == "run":
    run(sys.argv[5])
elif MODE == "create":
    create(int(sys.argv[4]))
else:
    dump(sys.argv[4])
