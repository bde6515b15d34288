"""Kafka transactions against Millpond's Kafka endpoint with an unmodified
client (confluent-kafka, librdkafka's transactional producer).

Phases (python3 transactions.py HOST:PORT PHASE):
- commit-abort: three transactions on a three-partition topic, the middle
  one aborted; a read_committed consumer reads exactly the committed ones,
  in order per partition; a read_uncommitted one reads all three.
- fencing: a second producer with the same transactional.id fences the
  first, whose open transaction is aborted and whose commit fails as fenced.
- offsets: consume-transform-produce: offsets sent to the transaction are
  committed with a commit and not with an abort.
- zombie: a consumer that left its group (a newer generation has its
  partitions) cannot commit offsets through a transaction with its old
  group metadata (KIP-447): ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID, and
  the transaction must abort; the current member's metadata commits.
- hanging: a producer that dies inside a transaction (os._exit) holds
  read_committed consumers back until the transaction times out; then its
  records are aborted and later committed records are read.
- after-restart: the committed reads are unchanged and the transactional
  ids go on.
Exits non-zero, saying what differed, on the first wrong answer."""

import json
import subprocess
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = sys.argv[1]


def check(what, got, expected):
    if got != expected:
        sys.exit(f"{what}: got {got!r}, expected {expected!r}")


def create(topic, partitions):
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in admin.create_topics([NewTopic(topic, partitions)]).values():
        try:
            future.result(20)
        except KafkaException as e:
            if e.args[0].code() != 36:  # TOPIC_ALREADY_EXISTS: made by the test's source
                raise


def producer(transactional_id, timeout_ms=60000):
    p = Producer({"bootstrap.servers": BOOTSTRAP, "transactional.id": transactional_id,
                  "transaction.timeout.ms": timeout_ms, "linger.ms": 5})
    p.init_transactions(20)
    return p


def read(topic, isolation, until_values=None, seconds=20, group=None):
    """Every record of `topic` (value strings, per partition in order)."""
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group or f"read-{topic}-{isolation}-{time.time()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": isolation,
                  "enable.partition.eof": True})
    c.subscribe([topic])
    got, eof, deadline = {}, set(), time.time() + seconds
    while time.time() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eof.add(m.partition())
                if until_values is None and len(eof) == len(c.assignment() or [0]) and c.assignment():
                    break
                continue
            sys.exit(f"consumer error: {m.error()}")
        got.setdefault(m.partition(), []).append(m.value().decode())
        if until_values is not None and sum(len(v) for v in got.values()) >= until_values:
            break
    c.close()
    return got


def commit_abort():
    topic = "txn-ca"
    create(topic, 3)
    p = producer("ca")
    for t, fate in enumerate(["commit", "abort", "commit"]):
        p.begin_transaction()
        for i in range(30):
            p.produce(topic, key=f"k{i}", value=f'{{"t":{t},"i":{i}}}')
        if fate == "commit":
            p.commit_transaction(20)
        else:
            p.flush(20)  # the aborted records are in the log before the abort
            p.abort_transaction(20)
    committed = read(topic, "read_committed")
    parsed = {p: [tuple(json.loads(v).values()) for v in vs] for p, vs in committed.items()}
    values = sorted(v for vs in parsed.values() for v in vs)
    check("read_committed values", values, sorted((t, i) for t in (0, 2) for i in range(30)))
    for partition, vs in parsed.items():
        check(f"partition {partition} order", vs, sorted(vs))
    everything = read(topic, "read_uncommitted")
    check("read_uncommitted count", sum(len(v) for v in everything.values()), 90)
    print("commit-abort: ok")


def fencing():
    topic = "txn-fence"
    create(topic, 1)
    a = producer("zombie")
    a.begin_transaction()
    a.produce(topic, value="zombie-1")
    a.flush(20)
    b = producer("zombie")  # fences a, aborting its open transaction
    try:
        a.produce(topic, value="zombie-2")
        a.commit_transaction(20)
        sys.exit("the fenced producer committed")
    except KafkaException as e:
        error = e.args[0]
        if not (error.fatal() or error.txn_requires_abort()):
            sys.exit(f"the fenced producer's error is neither fatal nor abortable: {error}")
    b.begin_transaction()
    b.produce(topic, value="live-1")
    b.commit_transaction(20)
    got = read(topic, "read_committed")
    check("after fencing, read_committed", got.get(0), ["live-1"])
    print("fencing: ok")


def offsets():
    source, sink, group = "txn-in", "txn-out", "copier"
    create(source, 1)
    create(sink, 1)
    plain = Producer({"bootstrap.servers": BOOTSTRAP})
    for i in range(20):
        plain.produce(source, value=f"in-{i}")
    plain.flush(20)
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.subscribe([source])
    p = producer("copier")
    for fate, count in (("commit", 10), ("abort", 5)):
        p.begin_transaction()
        taken = 0
        deadline = time.time() + 20
        while taken < count and time.time() < deadline:
            m = consumer.poll(0.2)
            if m is None or m.error():
                continue
            p.produce(sink, value=m.value().decode().replace("in", "out"))
            taken += 1
        check(f"records taken for {fate}", taken, count)
        p.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 20)
        if fate == "commit":
            p.commit_transaction(20)
        else:
            p.abort_transaction(20)
    committed = consumer.committed([TopicPartition(source, 0)], timeout=10)
    check("the group's committed offset (the aborted transaction's offsets dropped)", committed[0].offset, 10)
    consumer.close()
    got = read(sink, "read_committed")
    check("copied records", got.get(0), [f"out-{i}" for i in range(10)])
    print("offsets: ok")


def assigned(consumer, seconds=30):
    deadline = time.time() + seconds
    while not consumer.assignment() and time.time() < deadline:
        consumer.poll(0.2)
    check("an assignment", bool(consumer.assignment()), True)


def zombie():
    source, group = "txn-zombie", "zombie-group"
    create(source, 1)
    config = {"bootstrap.servers": BOOTSTRAP, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    old = Consumer(config)
    old.subscribe([source])
    assigned(old)
    stale = old.consumer_group_metadata()
    old.close()  # It leaves; the group goes on without it.
    current = Consumer(config)
    current.subscribe([source])
    assigned(current)
    p = producer("zombie")
    p.begin_transaction()
    try:
        p.send_offsets_to_transaction([TopicPartition(source, 0, 3)], stale, 20)
        sys.exit("offsets of a generation the group left behind were accepted")
    except KafkaException as e:
        check("the zombie's error code", e.args[0].code() in (22, 25), True)  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID
    p.abort_transaction(20)
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition(source, 0, 3)], current.consumer_group_metadata(), 20)
    p.commit_transaction(20)
    committed = current.committed([TopicPartition(source, 0)], timeout=10)
    check("the current member's offset", committed[0].offset, 3)
    current.close()
    print("zombie: ok")


def hanging():
    topic = "txn-hang"
    create(topic, 1)
    # A producer that dies inside its transaction, its records in the log.
    code = (
        "import os, sys\n"
        "from confluent_kafka import Producer\n"
        f"p = Producer({{'bootstrap.servers': '{BOOTSTRAP}', 'transactional.id': 'dies', "
        "'transaction.timeout.ms': 3000})\n"
        "p.init_transactions(20)\n"
        "p.begin_transaction()\n"
        f"p.produce('{topic}', value='orphan')\n"
        "p.flush(20)\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    started = time.time()
    live = Producer({"bootstrap.servers": BOOTSTRAP})
    live.produce(topic, value="after")
    live.flush(20)
    # Held back by the open transaction, then released by its timeout.
    got = read(topic, "read_committed", until_values=1, seconds=30)
    waited = time.time() - started
    check("read_committed after the timeout", got.get(0), ["after"])
    if waited < 2.0:
        sys.exit(f"the open transaction held nothing back ({waited:.1f} s)")
    everything = read(topic, "read_uncommitted")
    check("read_uncommitted sees the orphan", everything.get(0), ["orphan", "after"])
    print(f"hanging: ok ({waited:.1f} s)")


def after_restart():
    """After a server restart: the committed reads are as before, and the
    transactional ids go on with new epochs."""
    committed = read("txn-ca", "read_committed")
    check("txn-ca read_committed after restart", sum(len(v) for v in committed.values()), 60)
    p = producer("ca")
    p.begin_transaction()
    for i in range(5):
        p.produce("txn-ca", key=f"k{i}", value=f'{{"t":3,"i":{i}}}')
    p.commit_transaction(20)
    committed = read("txn-ca", "read_committed")
    check("txn-ca read_committed after one more commit", sum(len(v) for v in committed.values()), 65)
    check("txn-hang after restart", read("txn-hang", "read_committed").get(0), ["after"])
    print("after-restart: ok")


PHASES = {"commit-abort": commit_abort, "fencing": fencing, "offsets": offsets, "zombie": zombie, "hanging": hanging,
          "after-restart": after_restart}

if __name__ == "__main__":
    for phase in sys.argv[2:]:
        PHASES[phase]()
