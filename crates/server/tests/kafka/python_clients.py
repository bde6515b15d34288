"""Python's Kafka clients against Millpond's Kafka endpoint, unmodified:
confluent-kafka (librdkafka), kafka-python and aiokafka. Each produces keyed
records in every codec (none, gzip, snappy, lz4, zstd: a fifth of the
records each, in order), consumes them back by offset and by time and in a
consumer group that commits, and a second consumer of the group resumes
after the commit; three consumers of one group share a topic of three
partitions, and when one leaves the other two take its partition over from
its committed offset (confluent-kafka, kafka-python, aiokafka); run again with
`after-restart` once the server has
restarted, each client's group resumes at its committed offset.
Run by crates/server/tests/kafka_clients.rs: python3 python_clients.py HOST:PORT [after-restart]
Exits non-zero, saying what differed, on the first wrong answer."""

import asyncio
import sys
import threading
import time

import aiokafka
import kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

BOOTSTRAP = sys.argv[1]
N = 200
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def codec_of(i):
    """The codec record i is produced with: a fifth of the records each."""
    return CODECS[i * len(CODECS) // N]


def check(what, got, expected):
    if got != expected:
        sys.exit(f"{what}: got {got!r}, expected {expected!r}")


def confluent():
    topic = "confluent"
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True, "linger.ms": 5,
                             "compression.type": codec})
        for i in (i for i in range(N) if codec_of(i) == codec):
            producer.produce(topic, key=f"k{i}", value=f"v{i}", timestamp=1_000 + i)
        check(f"confluent flush ({codec}): messages left", producer.flush(20), 0)

    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "g-confluent",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = poll_confluent(consumer, N)
    check("confluent group consumer: keys", sorted(k for _, _, k in got), sorted(f"k{i}".encode() for i in range(N)))
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    check("confluent committed offset", committed[0].offset, N)
    consumer.close()

    # By time: the first record at or after 1_000 + 150 is offset 150.
    by_time = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "g-confluent-time"})
    offsets = by_time.offsets_for_times([TopicPartition(topic, 0, 1_150)], timeout=10)
    check("confluent offsets_for_times", offsets[0].offset, 150)
    by_time.assign([TopicPartition(topic, 0, 195)])
    tail = poll_confluent(by_time, 5)
    check("confluent assign at an offset", [o for _, o, _ in tail], list(range(195, 200)))
    by_time.close()

    # The group resumes after its commit: only what came later.
    producer.produce(topic, key="late", value="x")
    producer.flush(10)
    again = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "g-confluent", "auto.offset.reset": "earliest"})
    again.subscribe([topic])
    check("confluent resumed group", [(o, k) for _, o, k in poll_confluent(again, 1)], [(N, b"late")])
    again.close()


def poll_confluent(consumer, count):
    got, deadline = [], time.time() + 30
    while len(got) < count and time.time() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error():
            sys.exit(f"confluent consumer error: {message.error()}")
        got.append((message.partition(), message.offset(), message.key()))
    return got


def kafka_python():
    topic = "kafkapython"
    offsets = []
    for codec in CODECS:
        compression = None if codec == "none" else codec
        producer = kafka.KafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all", compression_type=compression)
        futures = [producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), timestamp_ms=5_000 + i)
                   for i in range(N) if codec_of(i) == codec]
        producer.flush()
        offsets.extend(f.get(timeout=10).offset for f in futures)
        producer.close()
    check("kafka-python produced offsets", offsets, list(range(N)))
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=BOOTSTRAP, group_id="g-kafka-python",
                                   auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=5000)
    got = [(m.offset, m.key) for m in consumer]
    check("kafka-python group consumer", got, [(i, f"k{i}".encode()) for i in range(N)])
    consumer.commit()
    consumer.close()
    probe = kafka.KafkaConsumer(bootstrap_servers=BOOTSTRAP)
    partition = kafka.TopicPartition(topic, 0)
    found = probe.offsets_for_times({partition: 5_100})[partition]
    check("kafka-python offsets_for_times", (found.offset, found.timestamp), (100, 5_100))
    check("kafka-python end offsets", probe.end_offsets([partition])[partition], N)
    check("kafka-python committed", probe_committed(topic, "g-kafka-python"), N)
    probe.close()


def probe_committed(topic, group):
    consumer = kafka.KafkaConsumer(bootstrap_servers=BOOTSTRAP, group_id=group, enable_auto_commit=False)
    committed = consumer.committed(kafka.TopicPartition(topic, 0))
    consumer.close()
    return committed


async def aio():
    topic = "aio"
    for codec in CODECS:
        compression = None if codec == "none" else codec
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, enable_idempotence=True,
                                             compression_type=compression)
        await producer.start()
        try:
            for i in (i for i in range(N) if codec_of(i) == codec):
                await producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
            await producer.flush()
        finally:
            await producer.stop()
    consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=BOOTSTRAP, group_id="g-aio",
                                         auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    got = []
    try:
        deadline = time.time() + 30
        while len(got) < N and time.time() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                got.extend((r.offset, r.key) for r in records)
        await consumer.commit()
    finally:
        await consumer.stop()
    check("aiokafka group consumer", got, [(i, f"k{i}".encode()) for i in range(N)])
    # By time (aiokafka stamps records with its clock: the middle record's
    # own timestamp finds it) and by offset.
    probe = aiokafka.AIOKafkaConsumer(bootstrap_servers=BOOTSTRAP, enable_auto_commit=False)
    await probe.start()
    try:
        partition = aiokafka.TopicPartition(topic, 0)
        probe.assign([partition])
        probe.seek(partition, 100)
        records = (await probe.getmany(partition, timeout_ms=5000, max_records=1))[partition]
        check("aiokafka seek to an offset", [(r.offset, r.key) for r in records], [(100, b"k100")])
        found = await probe.offsets_for_times({partition: records[0].timestamp})
        check("aiokafka offsets_for_times", found[partition].offset <= 100, True)
        check("aiokafka offsets_for_times: the first at that time", found[partition].timestamp, records[0].timestamp)
    finally:
        await probe.stop()


def admin():
    client = AdminClient({"bootstrap.servers": BOOTSTRAP})
    settings = {"retention.ms": "60000", "cleanup.policy": "compact", "max.message.bytes": "100000"}
    for future in client.create_topics([NewTopic("adm", 3, 1, config=settings)]).values():
        future.result(10)
    metadata = client.list_topics(timeout=10)
    check("admin: partitions of the created topic", len(metadata.topics["adm"].partitions), 3)
    described = client.describe_configs([ConfigResource("topic", "adm")])
    configs = list(described.values())[0].result(10)
    check("admin: settings read back", {k: configs[k].value for k in settings}, settings)
    try:
        client.create_topics([NewTopic("adm", 1, 1)])["adm"].result(10)
        sys.exit("admin: creating an existing topic was not refused")
    except Exception as error:
        check("admin: an existing topic", "TOPIC_ALREADY_EXISTS" in str(error) or "already exists" in str(error), True)
    for future in client.delete_topics(["adm"]).values():
        future.result(10)
    check("admin: deleted", "adm" in client.list_topics(timeout=10).topics, False)


def trio_topic(name):
    """A topic of three partitions."""
    client = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in client.create_topics([NewTopic(name, 3, 1)]).values():
        future.result(10)


def produce_keys(topic, numbers):
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"})
    keys = [f"k{i}".encode() for i in numbers]
    for key in keys:
        producer.produce(topic, key=key, value=b"v")
    check("trio: messages left", producer.flush(20), 0)
    return keys


def confluent_trio():
    """Three consumers of one group share three partitions; one leaves, the
    other two take its partition over from its committed offset."""
    topic = "trio-confluent"
    trio_topic(topic)
    members = [Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "g-trio-confluent",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False}) for _ in range(3)]
    for member in members:
        member.subscribe([topic])
    # Records come once the group is formed, so no rebalance rereads them.
    wait_for("confluent trio: each member has a partition",
             lambda: poll_round_robin(members, 0) == [] and [len(m.assignment()) for m in members] == [1, 1, 1])
    first = produce_keys(topic, range(300))
    got = poll_round_robin(members, len(first))
    check("confluent trio: the first records, once each", sorted(got), sorted(first))
    check("confluent trio: each member has a partition", [len(m.assignment()) for m in members], [1, 1, 1])
    for member in members:
        member.commit(asynchronous=False)
    members.pop().close()
    # The new records come after the two took the partitions over (records
    # read but not committed before a rebalance are read again: at least once).
    wait_for("confluent trio: two members hold the three partitions",
             lambda: poll_round_robin(members, 0) == [] and sum(len(m.assignment()) for m in members) == 3)
    second = produce_keys(topic, range(300, 600))
    got = poll_round_robin(members, len(second))
    check("confluent trio after one left: the new records, once each", sorted(got), sorted(second))
    check("confluent trio: two members hold the three partitions", sum(len(m.assignment()) for m in members), 3)
    for member in members:
        member.close()


def wait_for(what, done):
    deadline = time.time() + 60
    while not done():
        if time.time() > deadline:
            sys.exit(f"{what}: not within 60 s")


def poll_round_robin(members, count):
    """Polls each member in turn until `count` records came (once with 0)."""
    got, deadline = [], time.time() + 60
    while True:
        for member in members:
            message = member.poll(0.05)
            if message is not None and not message.error():
                got.append(message.key())
        if len(got) >= count or time.time() > deadline:
            return got


class KafkaPythonMember(threading.Thread):
    """A kafka-python consumer of a trio on a thread of its own: its poll
    blocks in a group join until the round is over, so one thread polling
    three members would hold up the round it waits for."""

    def __init__(self, topic):
        super().__init__(daemon=True)
        self.consumer = kafka.KafkaConsumer(topic, bootstrap_servers=BOOTSTRAP, group_id="g-trio-kafka-python",
                                            auto_offset_reset="earliest", enable_auto_commit=False)
        self.lock, self.got, self.partitions, self.error = threading.Lock(), [], 0, None
        self.commit, self.stop, self.committed = threading.Event(), threading.Event(), threading.Event()
        self.start()

    def run(self):
        try:
            while not self.stop.is_set():
                records = self.consumer.poll(timeout_ms=50)
                with self.lock:
                    self.got.extend(r.key for batch in records.values() for r in batch)
                    self.partitions = len(self.consumer.assignment())
                if self.commit.is_set() and not self.committed.is_set():
                    try:
                        self.consumer.commit()
                        self.committed.set()
                    except kafka.errors.RebalanceInProgressError:
                        pass  # polled again, then retried, as kafka-python's message says
        except Exception as error:  # reported by the main thread
            self.error = error
        finally:
            self.consumer.close()

    def take(self):
        with self.lock:
            if self.error is not None:
                sys.exit(f"kafka-python trio member: {self.error!r}")
            got, self.got = self.got, []
            return got


def kafka_python_trio():
    """confluent_trio with kafka-python's consumers."""
    topic = "trio-kafka-python"
    trio_topic(topic)
    members = [KafkaPythonMember(topic) for _ in range(3)]
    wait_for("kafka-python trio: each member has a partition",
             lambda: sum(len(m.take()) for m in members) == 0 and [m.partitions for m in members] == [1, 1, 1])
    first = produce_keys(topic, range(300))
    got = []
    wait_for("kafka-python trio: the first records",
             lambda: len(got.__iadd__(sum((m.take() for m in members), []))) >= len(first))
    check("kafka-python trio: the first records, once each", sorted(got), sorted(first))
    for member in members:
        member.commit.set()
    wait_for("kafka-python trio: commits", lambda: all(m.committed.is_set() for m in members))
    leaving = members.pop()
    leaving.stop.set()
    leaving.join(30)
    wait_for("kafka-python trio: two members hold the three partitions",
             lambda: sum(len(m.take()) for m in members) == 0 and sum(m.partitions for m in members) == 3
             and all(m.partitions > 0 for m in members))
    second = produce_keys(topic, range(300, 600))
    got = []
    wait_for("kafka-python trio: the new records",
             lambda: len(got.__iadd__(sum((m.take() for m in members), []))) >= len(second))
    check("kafka-python trio after one left: the new records, once each", sorted(got), sorted(second))
    for member in members:
        member.stop.set()
        member.join(30)


async def aio_trio():
    """confluent_trio with aiokafka's consumers, in one event loop."""
    topic = "trio-aio"
    trio_topic(topic)
    members = [aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=BOOTSTRAP, group_id="g-trio-aio",
                                         auto_offset_reset="earliest", enable_auto_commit=False) for _ in range(3)]
    await asyncio.gather(*(m.start() for m in members))
    try:
        await aio_wait("aiokafka trio: each member has a partition", members, [1, 1, 1])
        first = produce_keys(topic, range(300))
        got = await aio_take(members, len(first))
        check("aiokafka trio: the first records, once each", sorted(got), sorted(first))
        for member in members:
            await member.commit()
        await members.pop().stop()
        await aio_wait("aiokafka trio: two members hold the three partitions", members, None)
        second = produce_keys(topic, range(300, 600))
        got = await aio_take(members, len(second))
        check("aiokafka trio after one left: the new records, once each", sorted(got), sorted(second))
    finally:
        for member in members:
            await member.stop()


async def aio_take(members, count):
    """Records from every member until `count` came (0: one round)."""
    got, deadline = [], time.time() + 60
    while True:
        batches = await asyncio.gather(*(m.getmany(timeout_ms=100) for m in members))
        got.extend(r.key for batch in batches for records in batch.values() for r in records)
        if len(got) >= count or time.time() > deadline:
            return got


async def aio_wait(what, members, each):
    """Until the members' assignments are `each` (None: all three partitions between them)."""
    deadline = time.time() + 60
    while True:
        check(f"{what}: no records yet", await aio_take(members, 0), [])
        sizes = [len(m.assignment()) for m in members]
        if sizes == each or (each is None and sum(sizes) == 3 and all(sizes)):
            return
        if time.time() > deadline:
            sys.exit(f"{what}: not within 60 s ({sizes})")


def after_restart():
    """Each client's group, in a restarted server, reads only a record
    produced after its commit: the commits outlived the restart."""
    producer = Producer({"bootstrap.servers": BOOTSTRAP})
    for topic in ["confluent", "kafkapython", "aio"]:
        producer.produce(topic, key="after", value="restart")
    check("after restart: messages left", producer.flush(20), 0)
    # confluent's group committed N and then read the late record (auto-commit on).
    again = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "g-confluent", "auto.offset.reset": "earliest"})
    again.subscribe(["confluent"])
    check("confluent after restart", [(o, k) for _, o, k in poll_confluent(again, 1)], [(N + 1, b"after")])
    again.close()
    consumer = kafka.KafkaConsumer("kafkapython", bootstrap_servers=BOOTSTRAP, group_id="g-kafka-python",
                                   auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=5000)
    check("kafka-python after restart", [(m.offset, m.key) for m in consumer], [(N, b"after")])
    consumer.close()
    asyncio.run(aio_after_restart())


async def aio_after_restart():
    consumer = aiokafka.AIOKafkaConsumer("aio", bootstrap_servers=BOOTSTRAP, group_id="g-aio",
                                         auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    got, deadline = [], time.time() + 30
    try:
        while not got and time.time() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                got.extend((r.offset, r.key) for r in records)
    finally:
        await consumer.stop()
    check("aiokafka after restart", got, [(N, b"after")])


if sys.argv[2:] == ["after-restart"]:
    after_restart()
    print("after restart: ok")
    sys.exit(0)
confluent()
admin()
confluent_trio()
print("confluent-kafka: ok")
kafka_python()
kafka_python_trio()
print("kafka-python: ok")
asyncio.run(aio())
asyncio.run(aio_trio())
print("aiokafka: ok")
