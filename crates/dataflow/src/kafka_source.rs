//! A source that reads a topic of an external Apache Kafka cluster
//! (librdkafka, through `rdkafka`) with the exactly-once promise of the
//! embedded log's sources: the offsets it read live in Millpond's own
//! checkpoint, beside operator state and sink positions, so after a crash
//! it resumes exactly after the records the committed views reflect.
//!
//! The consumer is assigned its partitions (no group membership, nothing
//! committed to Kafka) and reads with `isolation.level=read_committed`:
//! aborted transactions and markers never reach a view. Worker w reads the
//! partitions p with `p % workers == w`; partitions added to the topic are
//! found (metadata every [`DISCOVERY_INTERVAL_MS`]) and read from their
//! start. A broker that is down is waited for, not a failure: the source
//! reads nothing until it answers. A checkpointed offset that Kafka's
//! retention passed is a retention gap, handled as the job's policy says.
//!
//! In the checkpoint the reader's topic is [`label`] (`kafka:TOPIC`), a
//! name no log topic can have, so a reader cannot move between a Kafka
//! topic and a log topic unnoticed.
//!
//! Invariants: a record is emitted once per run and reader, at one epoch,
//! in partition order; a partition's recorded offset is one past the last
//! record emitted from it (or where it resumed); offsets only move forward.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use millpond_log::batch::{EncodeRecord, encode_batch};
use millpond_log::{BatchView, RecordView};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{Offset, TopicPartitionList};

use crate::config::RetentionGap;
use crate::context::{Shared, WorkerContext};
use crate::dead_letter::DeadLetter;
use crate::kafka_fetch::{BrokerAddress, Fetcher, RETRY_BACKOFF_MS};
use crate::kafka_queue::{BatchConsumer, Taken};
use crate::source::{Position, Tailer, advance, record_positions};
use crate::{Collection, Epoch};

/// How often the topic's partitions are looked up again.
pub const DISCOVERY_INTERVAL_MS: u64 = 5_000;
/// How long one metadata or watermark request may take.
const METADATA_TIMEOUT_MS: u64 = 2_000;
/// Messages one read takes at most (then the operator yields).
const READ_MESSAGES_MAX: usize = 10_000;
/// Records read between looks at the sockets, on the source's own fetch
/// path (a response arrives only as fast as its socket is drained).
const RECEIVE_EVERY_RECORDS: usize = 2_000;
/// librdkafka's `fetch.queue.backoff.ms` for the source's consumer.
const FETCH_QUEUE_BACKOFF_MS: &str = "10";
/// The source's own property (not librdkafka's) choosing how records are
/// fetched: `direct` (the source's own Fetch requests, `kafka_fetch`; the
/// default over PLAINTEXT) or `librdkafka` (its consumer queue; the
/// default, and the only way, for TLS and SASL).
pub const FETCH_PROPERTY: &str = "millpond.fetch";

/// The topic of an external Kafka cluster to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaTopic {
    /// `bootstrap.servers`: `host:port[,host:port…]`.
    pub brokers: String,
    pub topic: String,
    /// More librdkafka consumer properties (security, timeouts); those the
    /// source relies on (isolation, offset handling) are its own.
    pub properties: Vec<(String, String)>,
}

/// The reader's topic as the checkpoint names it: `kafka:TOPIC`.
pub fn label(topic: &str) -> String {
    format!("{LABEL_PREFIX}{topic}")
}

/// The prefix of [`label`]s (a log topic name has no ':').
pub const LABEL_PREFIX: &str = "kafka:";

/// Whether `topic` is a Kafka source's [`label`].
pub fn is_label(topic: &str) -> bool {
    topic.starts_with(LABEL_PREFIX)
}

/// Tails `source`'s topic as the reader `reader`.
pub(crate) fn tail<'s, T, F>(
    scope: timely::dataflow::Scope<'s, Epoch>,
    ctx: &Rc<WorkerContext>,
    reader: &str,
    source: &KafkaTopic,
    decode: F,
) -> Collection<'s, Result<T, Box<DeadLetter>>>
where
    T: Clone + 'static,
    F: Fn(u32, &RecordView<'_>) -> Result<T, String> + 'static,
{
    let label = label(&source.topic);
    let resumed = ctx.shared.checkpoints.resumed();
    if let Some(read) = resumed.readers.get(reader)
        && *read != label
    {
        ctx.build_error(format!(
            "reader '{reader}' has committed offsets in topic '{read}', so it cannot read {label}: a reader reads \
             one topic; give the reader of {label} another name"
        ));
    }
    let direct = match direct_fetch(source) {
        Ok(direct) => direct,
        Err(message) => {
            ctx.build_error(format!("Kafka source {label} on {}: {message}", source.brokers));
            false
        }
    };
    let consumer = match consumer(source, reader).map(BatchConsumer::new) {
        Ok(Some(consumer)) => Some(consumer),
        Ok(None) => {
            ctx.build_error(format!("Kafka source {label} on {}: librdkafka gave no consumer queue", source.brokers));
            None
        }
        Err(e) => {
            ctx.build_error(format!("Kafka source {label} on {}: {e}", source.brokers));
            None
        }
    };
    let committed = resumed.sources.get(reader).cloned().unwrap_or_default();
    let tailer = KafkaReader {
        reader: reader.to_owned(),
        topic: source.topic.clone(),
        label: label.clone(),
        consumer,
        fetcher: direct.then(|| Fetcher::new(&source.topic, &format!("millpond-{reader}"))),
        owner: (scope.index(), scope.peers()),
        committed,
        positions: Vec::new(),
        eof: Vec::new(),
        discovered: None,
        found: false,
        topic_id: None,
        decode,
        buffer: Vec::new(),
    };
    let lineage = Rc::new(std::collections::BTreeSet::from([reader.to_owned()]));
    crate::source::operate(scope, ctx, &format!("source:{reader}"), tailer, lineage)
}

/// Whether `source` is read with the source's own Fetch requests: asked
/// for, or by default when the cluster is spoken to in PLAINTEXT.
fn direct_fetch(source: &KafkaTopic) -> Result<bool, String> {
    let property = |name: &str| source.properties.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let plaintext = property("security.protocol").is_none_or(|p| p.eq_ignore_ascii_case("plaintext"));
    match property(FETCH_PROPERTY) {
        None => Ok(plaintext),
        Some("librdkafka") => Ok(false),
        Some("direct") if plaintext => Ok(true),
        Some("direct") => Err(format!("{FETCH_PROPERTY}=direct speaks only PLAINTEXT; use librdkafka for TLS or SASL")),
        Some(other) => Err(format!("{FETCH_PROPERTY} is 'direct' or 'librdkafka', not '{other}'")),
    }
}

fn consumer(source: &KafkaTopic, reader: &str) -> Result<BaseConsumer, KafkaError> {
    let mut config = ClientConfig::new();
    for (key, value) in source.properties.iter().filter(|(key, _)| key != FETCH_PROPERTY) {
        config.set(key, value);
    }
    config
        .set("bootstrap.servers", &source.brokers)
        .set("group.id", format!("millpond-{reader}"))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "error")
        // librdkafka 2.x waits this long before fetching a partition again
        // once its local queue passed its thresholds (1000 ms by default):
        // a worker that empties the queue then starves for most of a second.
        .set("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS)
        .create()
}

struct KafkaReader<F> {
    reader: String,
    topic: String,
    label: String,
    /// Metadata and watermarks; the records too, without a fetcher.
    consumer: Option<BatchConsumer>,
    /// The records, when read with the source's own Fetch requests.
    fetcher: Option<Fetcher>,
    /// This worker's index and the number of workers.
    owner: (usize, usize),
    /// The checkpoint's offsets, partition to next offset.
    committed: std::collections::BTreeMap<u32, u64>,
    /// Owned partitions, sorted by partition.
    positions: Vec<Position>,
    /// Whether each position's partition was read to its end lately.
    eof: Vec<bool>,
    discovered: Option<Instant>,
    /// The topic's partitions were found at least once.
    found: bool,
    /// The Kafka topic id read (direct fetch path only).
    topic_id: Option<String>,
    decode: F,
    buffer: Vec<u8>,
}

impl<F> KafkaReader<F> {
    /// Looks the topic's partitions up, when due, and assigns the owned
    /// ones: resumed at their checkpointed offsets, new ones at their start.
    fn discover(&mut self, shared: &Shared) {
        let since = self.discovered.map(|at| at.elapsed());
        let wanted = self.fetcher.as_ref().is_some_and(Fetcher::wants_metadata);
        let due = since.is_none_or(|since| {
            since >= Duration::from_millis(DISCOVERY_INTERVAL_MS)
                || (wanted && since >= Duration::from_millis(RETRY_BACKOFF_MS))
        });
        let Some(consumer) = self.consumer.as_ref().filter(|_| due).map(BatchConsumer::consumer) else { return };
        self.discovered = Some(Instant::now());
        let timeout = Duration::from_millis(METADATA_TIMEOUT_MS);
        let Ok(metadata) = consumer.fetch_metadata(Some(&self.topic), timeout) else { return };
        let Some(topic) = metadata.topics().iter().find(|t| t.name() == self.topic) else { return };
        if topic.error().is_some() || topic.partitions().is_empty() {
            return; // Unknown yet (or the broker is not ready): looked up again later.
        }
        self.found = true;
        let brokers: Vec<BrokerAddress> = metadata
            .brokers()
            .iter()
            .map(|b| BrokerAddress { id: b.id(), address: format!("{}:{}", b.host(), b.port()) })
            .collect();
        let leaders: Vec<(u32, Option<i32>)> =
            topic.partitions().iter().map(|p| (p.id() as u32, (p.leader() >= 0).then_some(p.leader()))).collect();
        if self.fetcher.is_some()
            && let Some(broker) = brokers.first()
            && !self.check_topic_id(shared, &broker.address)
        {
            return;
        }
        let (index, peers) = self.owner;
        let mut added = false;
        for partition in 0..topic.partitions().len() as u32 {
            if partition as usize % peers != index || self.positions.iter().any(|p| p.partition == partition) {
                continue;
            }
            let next_offset = self.committed.get(&partition).copied();
            let position =
                Position { partition, next_offset: next_offset.unwrap_or(0), target: 0, recorded: next_offset };
            self.positions.push(position);
            self.eof.push(false);
            added = true;
        }
        if added {
            self.positions.sort_by_key(|p| p.partition);
            self.assign(shared);
        }
        if let Some(fetcher) = self.fetcher.as_mut() {
            fetcher.set_leaders(&brokers, &leaders);
        }
    }

    /// Assigns every owned partition at its next offset (a fresh partition
    /// at the beginning).
    fn assign(&mut self, shared: &Shared) {
        self.eof.iter_mut().for_each(|eof| *eof = false);
        if let Some(fetcher) = self.fetcher.as_mut() {
            for position in &self.positions {
                fetcher.seek(position.partition, position.next_offset);
            }
            return;
        }
        let Some(consumer) = self.consumer.as_ref().map(BatchConsumer::consumer) else { return };
        let mut list = TopicPartitionList::new();
        for position in &self.positions {
            let offset = match position.recorded {
                None if position.next_offset == 0 => Offset::Beginning,
                _ => Offset::Offset(position.next_offset as i64),
            };
            if list.add_partition_offset(&self.topic, position.partition as i32, offset).is_err() {
                shared.fail(self.error(format!("partition {} cannot be assigned", position.partition)));
                return;
            }
        }
        if let Err(e) = consumer.assign(&list) {
            shared.fail(self.error(format!("assigning partitions: {e}")));
        }
    }

    /// Checks that the topic is the incarnation the checkpoint's offsets
    /// belong to (Kafka's topic id), and registers it; false when it is
    /// not (the job fails). A broker without topic ids, or a lookup that
    /// fails (looked up again at the next discovery), checks nothing.
    fn check_topic_id(&mut self, shared: &Shared, broker: &str) -> bool {
        let client_id = format!("millpond-{}", self.reader);
        let Ok(Some(id)) = crate::kafka_fetch::topic_id(broker, &self.topic, &client_id) else { return true };
        let resumed = shared.checkpoints.resumed();
        let committed = self
            .topic_id
            .clone()
            .or_else(|| resumed.topic_ids.get(&self.reader).filter(|_| !resumed.is_fresh(&self.reader)).cloned());
        if let Some(committed) = committed.filter(|committed| *committed != id) {
            let message = format!(
                "the offsets read belong to topic id {committed}, but '{}' now has id {id}: it was deleted and \
                 created again, so those offsets mean other records. Drop and re-create the views that read it (or \
                 give them a new reader), which read the new topic from its start",
                self.topic
            );
            shared.fail(self.error(message));
            return false;
        }
        if self.topic_id.is_none() && self.owner.0 == 0 {
            shared.checkpoints.register_topic_id(&self.reader, &id);
        }
        self.topic_id = Some(id);
        true
    }

    fn error(&self, message: String) -> crate::Error {
        crate::Error::Kafka { what: format!("Kafka source {} (reader '{}')", self.label, self.reader), message }
    }

    /// Librdkafka found a position out of range: a checkpointed offset
    /// that retention passed (a retention gap: the job's policy fails it,
    /// or skips to the log start and reports it), or one past the
    /// partition's end (the topic lost records the views reflect, or was
    /// re-created: the job fails). Returns whether the source goes on.
    fn out_of_range(&mut self, shared: &Shared) -> bool {
        let Some(consumer) = self.consumer.as_ref().map(BatchConsumer::consumer) else { return false };
        let timeout = Duration::from_millis(METADATA_TIMEOUT_MS);
        let mut moved = false;
        for i in 0..self.positions.len() {
            let (partition, next) = (self.positions[i].partition, self.positions[i].next_offset);
            let Ok((low, high)) = consumer.fetch_watermarks(&self.topic, partition as i32, timeout) else { continue };
            let (low, high) = (low.max(0) as u64, high.max(0) as u64);
            if next > high {
                let message = format!(
                    "partition {partition}: the checkpoint read to offset {next}, but the partition ends at {high}:                      records the views reflect are gone (or the topic was re-created). Drop and re-create the views                      that read it"
                );
                shared.fail(self.error(message));
                return false;
            }
            if next < low && next == 0 && self.positions[i].recorded.is_none() {
                // A partition read from its start, which retention moved.
                self.positions[i].next_offset = low;
                moved = true;
            } else if next < low {
                let gap = RetentionGap {
                    reader: self.reader.clone(),
                    topic: self.label.clone(),
                    partition,
                    from: next,
                    to: low,
                };
                if !shared.retention_gap(gap) {
                    return false;
                }
                self.positions[i].next_offset = low;
                moved = true;
            }
        }
        if moved {
            self.assign(shared);
        }
        true
    }
}

impl<T, F> KafkaReader<F>
where
    F: Fn(u32, &RecordView<'_>) -> Result<T, String>,
{
    /// Reads librdkafka's consumer queue. Returns the records given and
    /// whether a position was found out of range.
    fn read_queue(&mut self, mut give: impl FnMut(Result<T, Box<DeadLetter>>)) -> (usize, bool) {
        let (mut read, mut out_of_range) = (0usize, false);
        let Some(consumer) = self.consumer.as_mut() else { return (0, false) };
        let mut reading = Reading {
            positions: &mut self.positions,
            eof: &mut self.eof,
            label: &self.label,
            decode: &self.decode,
            buffer: &mut self.buffer,
        };
        while read < READ_MESSAGES_MAX {
            let taken = consumer.take(|message| match reading.step(message, &mut give) {
                Step::Given => read += 1,
                Step::Skipped => {}
                Step::OutOfRange => out_of_range = true,
            });
            if taken == 0 || out_of_range {
                break;
            }
        }
        (read, out_of_range)
    }

    /// Reads the fetched chunks, whole batches at a time, then sends the
    /// fetches now due. `None` when the job failed.
    fn read_fetched(
        &mut self,
        shared: &Shared,
        mut give: impl FnMut(Result<T, Box<DeadLetter>>),
    ) -> Option<(usize, bool)> {
        let fetcher = self.fetcher.as_mut().expect("a fetcher");
        if let Err(e) = fetcher.poll() {
            shared.fail(self.error(e.to_string()));
            return None;
        }
        let out_of_range = !fetcher.take_out_of_range().is_empty();
        let (decode, label, scratch) = (&self.decode, self.label.as_str(), &mut self.buffer);
        let mut read = 0usize;
        if fetcher.front().is_none()
            && let Err(e) = fetcher.wait_for_response(Duration::from_millis(crate::source::IDLE_POLL_MS))
        {
            shared.fail(self.error(e.to_string()));
            return None;
        }
        let mut polled_at = 0usize;
        while read < READ_MESSAGES_MAX {
            if read - polled_at >= RECEIVE_EVERY_RECORDS {
                // Drains the sockets, so the broker's next answer keeps coming.
                polled_at = read;
                if let Err(e) = fetcher.poll() {
                    shared.fail(self.error(e.to_string()));
                    return None;
                }
            }
            let Some(chunk) = fetcher.front() else { break };
            if chunk.is_done() {
                fetcher.pop_front();
                continue;
            }
            let partition = chunk.partition;
            let Some(position) = self.positions.iter_mut().find(|p| p.partition == partition) else {
                fetcher.pop_front();
                continue;
            };
            let from = position.next_offset;
            let at = chunk.next_base_offset();
            let batch = chunk.read_batch(scratch, |record| {
                if record.offset >= from {
                    give(
                        decode(partition, record)
                            .map_err(|error| Box::new(DeadLetter::of(label, partition, record, error))),
                    );
                    read += 1;
                }
            });
            match batch.expect("a chunk not done has a batch") {
                Ok(next_offset) => {
                    advance(position, next_offset.max(from));
                }
                Err(e) => {
                    let at = at.map_or_else(|| "?".to_owned(), |at| at.to_string());
                    let message = format!("partition {partition}: the batch at offset {at} is not valid: {e}");
                    shared.fail(self.error(message));
                    return None;
                }
            }
        }
        if let Err(e) = fetcher.poll() {
            shared.fail(self.error(e.to_string()));
            return None;
        }
        Some((read, out_of_range))
    }
}

/// Gives `message` to `decode` as a record view: a message with headers as
/// the one record of a batch in `buffer` (the view reads headers from batch
/// bytes), one without as [`RecordView::headerless`].
fn decoded<T>(message: &Taken<'_>, buffer: &mut Vec<u8>, decode: impl Fn(&RecordView<'_>) -> T) -> T {
    let offset = message.offset().max(0) as u64;
    let timestamp_ms = message.timestamp_ms().unwrap_or(0);
    let Some(headers) = message.headers() else {
        return decode(&RecordView::headerless(offset, timestamp_ms, message.key(), message.payload()));
    };
    let record =
        EncodeRecord { offset_delta: 0, timestamp_ms, key: message.key(), value: message.payload(), headers: &headers };
    buffer.clear();
    encode_batch(buffer, offset, 0, [record]);
    let batch = BatchView::from_validated(buffer);
    decode(&batch.records().next().expect("one record"))
}

/// What one taken message did to the read.
enum Step {
    /// A record was given out.
    Given,
    /// Nothing to give (an end of partition, a record already given, a
    /// transient error that librdkafka retries).
    Skipped,
    /// A position is out of range.
    OutOfRange,
}

/// The parts of a [`KafkaReader`] one read changes, apart from its consumer.
struct Reading<'r, F> {
    positions: &'r mut Vec<Position>,
    eof: &'r mut Vec<bool>,
    label: &'r str,
    decode: &'r F,
    buffer: &'r mut Vec<u8>,
}

impl<T, F> Reading<'_, F>
where
    F: Fn(u32, &RecordView<'_>) -> Result<T, String>,
{
    fn step(&mut self, message: &Taken<'_>, give: &mut impl FnMut(Result<T, Box<DeadLetter>>)) -> Step {
        let position = self.positions.iter().position(|p| p.partition as i32 == message.partition());
        match message.error() {
            None => {}
            Some(RDKafkaErrorCode::PartitionEOF) => {
                if let Some(i) = position {
                    self.eof[i] = true;
                }
                return Step::Skipped;
            }
            Some(RDKafkaErrorCode::AutoOffsetReset) => return Step::OutOfRange,
            // Transient (a broker down, a rebalance of leaders): librdkafka retries.
            Some(_) => return Step::Skipped,
        }
        let Some(i) = position else { return Step::Skipped };
        let offset = message.offset().max(0) as u64;
        if offset < self.positions[i].next_offset {
            return Step::Skipped; // Already emitted (a seek's overlap).
        }
        let (decode, label, partition) = (self.decode, self.label, message.partition() as u32);
        give(decoded(message, self.buffer, |record| {
            decode(partition, record).map_err(|error| Box::new(DeadLetter::of(label, partition, record, error)))
        }));
        self.positions[i].next_offset = offset + 1;
        self.eof[i] = false;
        Step::Given
    }
}

impl<T, F> Tailer for KafkaReader<F>
where
    T: Clone + 'static,
    F: Fn(u32, &RecordView<'_>) -> Result<T, String> + 'static,
{
    type Item = Result<T, Box<DeadLetter>>;

    fn record(&mut self, shared: &Shared, epoch: Epoch) {
        record_positions(shared, &self.reader, &self.label, epoch, &mut self.positions);
    }

    fn read(&mut self, shared: &Shared, give: impl FnMut(Self::Item)) -> Option<bool> {
        self.discover(shared);
        let (read, out_of_range) =
            if self.fetcher.is_some() { self.read_fetched(shared, give)? } else { self.read_queue(give) };
        if out_of_range && !self.out_of_range(shared) {
            return None;
        }
        shared.records.fetch_add(read as u64, Ordering::Relaxed);
        if shared.failed() {
            return None;
        }
        Some(read > 0)
    }

    fn caught_up(&self) -> bool {
        let at_end = |(i, position): (usize, &Position)| match self.fetcher.as_ref() {
            Some(fetcher) => fetcher.end(position.partition).is_some_and(|end| position.next_offset >= end),
            None => self.eof[i],
        };
        self.found && self.positions.iter().enumerate().all(at_end)
    }
}
