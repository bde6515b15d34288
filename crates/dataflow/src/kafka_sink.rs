//! A transactional Kafka sink: ships a view's committed changes to a topic
//! of an external Kafka cluster, exactly once.
//!
//! The sink follows the view's committed changelog (a [`Subscription`]), so
//! only epochs Millpond has committed are ever shipped: no Kafka
//! transaction is prepared before Millpond's own commit, and none is left
//! waiting on it across a crash (the hazard of a two-phase sink). Each
//! committed epoch with changes becomes one Kafka transaction of the sink's
//! stable transactional id ([`transactional_id`]): one record per change,
//! and a progress record `{"sink", "view", "epoch"}` (key: the sink's name)
//! in the progress topic. On start the sink fences any older instance
//! (`init_transactions`, which also ends what that instance left open),
//! reads its last progress record with read_committed, and resumes after
//! the epoch it names (a fresh sink starts with the view's snapshot at its
//! last committed epoch, shipped as that epoch's transaction). So a
//! read_committed consumer of the topic sees every change once, each
//! epoch's changes together.
//!
//! A change's record: key the row as JSON (a row's changes stay in one
//! partition, in epoch order), value `{"epoch":E,"diff":D,"row":{…}}`, as
//! `millpond subscribe` prints it. These are sent as the committed epoch is
//! read (its transaction begins at its first change and commits at its
//! progress event); the keyed envelopes gather an epoch first.
//!
//! Invariants: a transaction holds exactly one epoch's changes and that
//! epoch's progress record; epochs are shipped in increasing order, each
//! once; nothing of an epoch is sent before the epoch is committed in
//! Millpond. A progress epoch the changelog no longer reaches back to (its
//! history compacted) is an error that says to re-create the sink's topic,
//! never a silent gap.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use crate::view::{RawEvent, Subscription};
use crate::{Epoch, Error, Result};

/// The progress topic by default (compacted, one partition).
pub const PROGRESS_TOPIC_DEFAULT: &str = "_millpond_sink_progress";
/// How long one Kafka call (init, commit, a progress read) may take.
const CALL_TIMEOUT_MS: u64 = 30_000;
/// How long the sink waits before it looks at the view's changelog again
/// (and at `stop`): the most it adds to a change's latency.
const POLL_MS: u64 = 20;
/// How long one wait for delivery reports lasts before commit.
const DELIVERY_POLL_MS: u64 = 1;
/// Changes one transaction may hold (a larger epoch is refused, not split:
/// a transaction is one epoch).
pub const CHANGES_PER_EPOCH_MAX: usize = 10_000_000;

/// A sink of a view into a topic of an external Kafka cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaSink {
    /// The sink's name: its transactional id and its progress key.
    pub name: String,
    pub view: String,
    pub brokers: String,
    pub topic: String,
    /// Where progress records go ([`PROGRESS_TOPIC_DEFAULT`]).
    pub progress_topic: String,
    /// More librdkafka producer properties (security, timeouts).
    pub properties: Vec<(String, String)>,
    pub envelope: Envelope,
}

/// How a sink writes an epoch's changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Envelope {
    /// One record per change: key the row, value `{"epoch","diff","row"}`.
    #[default]
    Changes,
    /// One record per key changed in the epoch: key `{col: value, …}` of
    /// these columns, value the key's row after the epoch or a tombstone
    /// when it has none. The columns must identify a row (a key with two
    /// rows after an epoch stops the sink with an error).
    Upsert { key: Vec<String> },
    /// One record per key changed in the epoch, as Debezium writes them:
    /// key as for `Upsert`, value `{"before","after","op","epoch"}` (`op`
    /// "c" create, "u" update, "d" delete).
    Debezium { key: Vec<String> },
}

impl Envelope {
    /// The records of one epoch's `changes` (row JSON text, diff): key and
    /// value (`None`: a tombstone), or why the key columns do not identify
    /// a row.
    fn records(
        &self,
        epoch: Epoch,
        changes: &[(String, i64)],
    ) -> std::result::Result<Vec<(String, Option<String>)>, String> {
        let (Envelope::Upsert { key } | Envelope::Debezium { key }) = self else {
            let records = changes
                .iter()
                .map(|(row, diff)| (row.clone(), Some(format!(r#"{{"epoch":{epoch},"diff":{diff},"row":{row}}}"#))));
            return Ok(records.collect());
        };
        // Per key: rows retracted and rows inserted in the epoch (after consolidation).
        let mut by_key: std::collections::BTreeMap<String, (Vec<&str>, Vec<&str>)> = Default::default();
        for (row, diff) in changes {
            let value: serde_json::Value = serde_json::from_str(row).map_err(|e| format!("a changelog row: {e}"))?;
            let mut fields = serde_json::Map::new();
            for column in key {
                let field = value.get(column).ok_or_else(|| format!("the view has no column \"{column}\""))?;
                fields.insert(column.clone(), field.clone());
            }
            let entry = by_key.entry(serde_json::Value::Object(fields).to_string()).or_default();
            let side = if *diff < 0 { &mut entry.0 } else { &mut entry.1 };
            side.extend(std::iter::repeat_n(row.as_str(), diff.unsigned_abs() as usize));
        }
        let mut out = Vec::with_capacity(by_key.len());
        for (key_text, (before, after)) in by_key {
            if before.len() > 1 || after.len() > 1 {
                return Err(format!(
                    "key {key_text} has {} rows before and {} after epoch {epoch}: the envelope's key columns must \
                     identify a row of the view",
                    before.len(),
                    after.len()
                ));
            }
            let value = match self {
                Envelope::Upsert { .. } => after.first().map(|row| (*row).to_owned()),
                _ => {
                    let op = match (before.first(), after.first()) {
                        (None, Some(_)) => "c",
                        (Some(_), Some(_)) => "u",
                        _ => "d",
                    };
                    let (b, a) = (before.first().copied().unwrap_or("null"), after.first().copied().unwrap_or("null"));
                    Some(format!(r#"{{"before":{b},"after":{a},"op":"{op}","epoch":{epoch}}}"#))
                }
            };
            out.push((key_text, value));
        }
        Ok(out)
    }
}

/// A progress record's value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Progress {
    sink: String,
    view: String,
    epoch: Epoch,
}

/// What a run of the sink shipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkStats {
    pub transactions: u64,
    pub changes: u64,
    /// The last epoch Kafka holds (`None`: nothing shipped yet).
    pub last_epoch: Option<Epoch>,
    /// Producers started again after a retriable failure, and the last failure.
    pub retries: u64,
    pub last_retry: Option<String>,
}

/// The sink's transactional id: stable across runs, one per sink name.
pub fn transactional_id(sink: &str) -> String {
    format!("millpond-sink.{sink}")
}

impl KafkaSink {
    fn error(&self, message: impl Into<String>) -> Error {
        Error::Kafka {
            what: format!("Kafka sink '{}' of view '{}' ({})", self.name, self.view, self.brokers),
            message: message.into(),
        }
    }

    fn client(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config.set("bootstrap.servers", &self.brokers);
        config
    }

    /// Runs the sink until `stop` is set (then returns what it shipped) or
    /// an error that needs a person: another instance fenced this one, the
    /// view was dropped, its history no longer reaches the last shipped
    /// epoch. A broker that is down is waited for.
    pub fn run(&self, data_dir: &std::path::Path, stop: &AtomicBool) -> Result<SinkStats> {
        let mut stats = SinkStats::default();
        while !stop.load(Ordering::Relaxed) {
            match self.run_once(data_dir, stop, &mut stats) {
                Ok(()) => return Ok(stats),
                // A transaction that failed in a retriable way: start over
                // from Kafka's progress (exactly once either way).
                Err(Retry::Again(error)) => {
                    stats.retries += 1;
                    stats.last_retry = Some(error.to_string());
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(Retry::Fatal(error)) => return Err(error),
            }
        }
        Ok(stats)
    }

    /// One producer's life: fence, read progress, ship epochs.
    fn run_once(
        &self,
        data_dir: &std::path::Path,
        stop: &AtomicBool,
        stats: &mut SinkStats,
    ) -> std::result::Result<(), Retry> {
        self.ensure_progress_topic();
        let producer: BaseProducer = self
            .client()
            .set("transactional.id", transactional_id(&self.name))
            .set("enable.idempotence", "true")
            .set("linger.ms", "5")
            .create()
            .map_err(|e| Retry::Fatal(self.error(format!("creating the producer: {e}"))))?;
        let timeout = Duration::from_millis(CALL_TIMEOUT_MS);
        producer.init_transactions(timeout).map_err(|e| self.kafka("fencing older instances", e))?;
        let last = self.read_progress().map_err(|e| self.kafka("reading progress", e))?;
        stats.last_epoch = last;
        let mut subscription = match Subscription::open(data_dir, &self.view, last, last.is_none()) {
            Ok(subscription) => subscription,
            Err(Error::UnknownView(_)) if last.is_none() => {
                // Not committed yet: looked for again.
                std::thread::sleep(Duration::from_millis(POLL_MS));
                return Err(Retry::Again(self.error("the view has no committed epoch yet")));
            }
            Err(e) => return Err(Retry::Fatal(self.error(format!("reading the view after epoch {last:?}: {e}")))),
        };
        // One epoch's changes for an envelope that needs them all (the row's
        // JSON text as the changelog holds it, checked, and its diff); the
        // `Changes` envelope streams them instead.
        let mut pending: Vec<(String, i64)> = Vec::new();
        let mut streaming = Streaming::default();
        while !stop.load(Ordering::Relaxed) {
            let Some(event) = subscription.next_raw() else {
                if let Err(e) = subscription.poll() {
                    return Err(Retry::Fatal(self.error(format!("reading the view: {e}"))));
                }
                if subscription.queued_len() == 0 {
                    std::thread::sleep(Duration::from_millis(POLL_MS));
                }
                continue;
            };
            match event {
                RawEvent::Change { epoch, diff, row } => {
                    if last.is_some_and(|l| epoch <= l) {
                        continue; // Kafka holds it (the subscription starts after `last`).
                    }
                    if streaming.sent + pending.len() >= CHANGES_PER_EPOCH_MAX {
                        let message = format!("an epoch with more than {CHANGES_PER_EPOCH_MAX} changes");
                        return Err(Retry::Fatal(self.error(message)));
                    }
                    if self.envelope == Envelope::Changes {
                        self.stream(&producer, &mut streaming, epoch, diff, row.get())?;
                    } else {
                        pending.push((row.get().to_owned(), diff));
                    }
                }
                RawEvent::Progress { epoch, .. } => {
                    let changes = streaming.sent + pending.len();
                    if changes > 0 {
                        if streaming.sent == 0 {
                            producer.begin_transaction().map_err(|e| self.kafka("beginning a transaction", e))?;
                            self.send_all(&producer, epoch, &pending)?;
                        }
                        self.commit(&producer, epoch)?;
                        stats.transactions += 1;
                        stats.changes += changes as u64;
                        stats.last_epoch = Some(epoch);
                    }
                    pending.clear();
                    streaming.sent = 0;
                }
            }
        }
        Ok(())
    }

    /// Sends one change of a committed epoch in the `Changes` envelope,
    /// beginning the epoch's transaction at its first change: the epoch is
    /// shipped while it is read, and committed at its progress event.
    fn stream(
        &self,
        producer: &BaseProducer,
        streaming: &mut Streaming,
        epoch: Epoch,
        diff: i64,
        row: &str,
    ) -> std::result::Result<(), Retry> {
        if streaming.sent == 0 {
            producer.begin_transaction().map_err(|e| self.kafka("beginning a transaction", e))?;
        }
        streaming.value.clear();
        let _ = write!(streaming.value, r#"{{"epoch":{epoch},"diff":{diff},"row":{row}}}"#);
        send(producer, BaseRecord::<str, str>::to(&self.topic).key(row).payload(streaming.value.as_str()))
            .map_err(|e| self.kafka("sending", e))?;
        streaming.sent += 1;
        Ok(())
    }

    /// Sends one epoch's `changes` in the sink's envelope (in an open transaction).
    fn send_all(
        &self,
        producer: &BaseProducer,
        epoch: Epoch,
        changes: &[(String, i64)],
    ) -> std::result::Result<(), Retry> {
        let records = self.envelope.records(epoch, changes).map_err(|e| Retry::Fatal(self.error(e)))?;
        for (key, value) in &records {
            let record = BaseRecord::<str, str>::to(&self.topic).key(key.as_str());
            let record = match value {
                Some(value) => record.payload(value.as_str()),
                None => record,
            };
            send(producer, record).map_err(|e| self.kafka("sending", e))?;
        }
        Ok(())
    }

    /// Adds the epoch's progress record to the open transaction and commits it.
    fn commit(&self, producer: &BaseProducer, epoch: Epoch) -> std::result::Result<(), Retry> {
        let timeout = Duration::from_millis(CALL_TIMEOUT_MS);
        let progress = Progress { sink: self.name.clone(), view: self.view.clone(), epoch };
        let value = serde_json::to_string(&progress).expect("progress encodes");
        send(
            producer,
            BaseRecord::<str, str>::to(&self.progress_topic).key(self.name.as_str()).payload(value.as_str()),
        )
        .map_err(|e| self.kafka("sending progress", e))?;
        if let Err(e) = delivered(producer, timeout).and_then(|()| producer.commit_transaction(timeout)) {
            let _ = producer.abort_transaction(timeout);
            return Err(self.kafka(&format!("committing epoch {epoch}"), e));
        }
        Ok(())
    }

    /// A Kafka error: fencing is fatal (another instance runs), the rest
    /// is retried from Kafka's progress.
    fn kafka(&self, doing: &str, error: KafkaError) -> Retry {
        let fenced = error.rdkafka_error_code().is_some_and(|code| {
            matches!(code, rdkafka::types::RDKafkaErrorCode::Fenced | rdkafka::types::RDKafkaErrorCode::ProducerFenced)
        });
        let error = self.error(format!("{doing}: {error}"));
        if fenced { Retry::Fatal(error) } else { Retry::Again(error) }
    }

    /// The epoch of the sink's last progress record, read with read_committed.
    fn read_progress(&self) -> std::result::Result<Option<Epoch>, KafkaError> {
        let consumer: BaseConsumer = self
            .client()
            .set("group.id", format!("{}-progress", transactional_id(&self.name)))
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .set("enable.partition.eof", "true")
            .create()?;
        let timeout = Duration::from_millis(CALL_TIMEOUT_MS);
        let metadata = consumer.fetch_metadata(Some(&self.progress_topic), timeout)?;
        let partitions = metadata.topics().first().map_or(0, |t| t.partitions().len()) as i32;
        let mut last = None;
        for partition in 0..partitions {
            let (low, high) = consumer.fetch_watermarks(&self.progress_topic, partition, timeout)?;
            if high <= low {
                continue;
            }
            let mut list = TopicPartitionList::new();
            list.add_partition_offset(&self.progress_topic, partition, Offset::Beginning)?;
            consumer.assign(&list)?;
            let deadline = Instant::now() + timeout;
            loop {
                if Instant::now() >= deadline {
                    // Never go on with a progress that may be older than Kafka's.
                    return Err(KafkaError::MessageConsumption(rdkafka::types::RDKafkaErrorCode::OperationTimedOut));
                }
                match consumer.poll(Duration::from_millis(POLL_MS)) {
                    // The committed end (the last stable offset).
                    Some(Err(KafkaError::PartitionEOF(_))) => break,
                    Some(Ok(message)) if message.key() == Some(self.name.as_bytes()) => {
                        let progress: Option<Progress> = message.payload().and_then(|p| serde_json::from_slice(p).ok());
                        if let Some(progress) = progress.filter(|p| p.view == self.view) {
                            last = last.max(Some(progress.epoch));
                        }
                    }
                    Some(Ok(_)) | None => {}
                    Some(Err(e)) => return Err(e),
                }
            }
        }
        Ok(last)
    }

    /// Creates the progress topic (compacted, one partition) if it is missing.
    fn ensure_progress_topic(&self) {
        let Ok(admin) = self.client().create::<AdminClient<DefaultClientContext>>() else { return };
        let topic = NewTopic::new(&self.progress_topic, 1, TopicReplication::Fixed(1)).set("cleanup.policy", "compact");
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_millis(CALL_TIMEOUT_MS)));
        // An existing topic, or a cluster that creates topics itself, is fine.
        let _ = futures::executor::block_on(admin.create_topics([&topic], &options));
    }
}

/// The epoch being streamed in the `Changes` envelope.
#[derive(Default)]
struct Streaming {
    /// Changes of the epoch sent so far (0: no transaction begun).
    sent: usize,
    /// The value being written (reused).
    value: String,
}

/// Waits until every message sent is delivered (or `timeout` passes).
/// `BaseProducer::flush` polls in 100 ms steps and each poll lasts its
/// whole step, so a flush (and `commit_transaction`, which flushes first)
/// took at least 100 ms: a transaction per 100 ms at most. Here the
/// delivery reports are served in 1 ms steps; the commit's own flush then
/// finds nothing left.
fn delivered(producer: &BaseProducer, timeout: Duration) -> std::result::Result<(), KafkaError> {
    let deadline = std::time::Instant::now() + timeout;
    while producer.in_flight_count() > 0 {
        if std::time::Instant::now() >= deadline {
            return Err(KafkaError::Flush(rdkafka::types::RDKafkaErrorCode::MessageTimedOut));
        }
        producer.poll(Duration::from_millis(DELIVERY_POLL_MS));
    }
    Ok(())
}

/// Sends `record`, waiting while the producer's queue is full.
fn send(producer: &BaseProducer, mut record: BaseRecord<'_, str, str>) -> std::result::Result<(), KafkaError> {
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull), back)) => {
                producer.poll(Duration::from_millis(10));
                record = back;
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// Why a producer's life ended.
enum Retry {
    /// Start over from Kafka's progress.
    Again(Error),
    /// Stop the sink.
    Fatal(Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes() -> Vec<(String, i64)> {
        vec![
            (r#"{"k":1,"n":1}"#.into(), -1),
            (r#"{"k":1,"n":2}"#.into(), 1),
            (r#"{"k":2,"n":5}"#.into(), 1),
            (r#"{"k":3,"n":7}"#.into(), -1),
        ]
    }

    #[test]
    fn envelopes_write_one_record_per_change_or_per_key() {
        let plain = Envelope::Changes.records(9, &changes()).unwrap();
        assert_eq!(plain.len(), 4);
        assert_eq!(plain[0], (r#"{"k":1,"n":1}"#.into(), Some(r#"{"epoch":9,"diff":-1,"row":{"k":1,"n":1}}"#.into())));
        let key = vec!["k".to_owned()];
        let upsert = Envelope::Upsert { key: key.clone() }.records(9, &changes()).unwrap();
        assert_eq!(
            upsert,
            vec![
                (r#"{"k":1}"#.into(), Some(r#"{"k":1,"n":2}"#.into())),
                (r#"{"k":2}"#.into(), Some(r#"{"k":2,"n":5}"#.into())),
                (r#"{"k":3}"#.into(), None),
            ]
        );
        let debezium = Envelope::Debezium { key: key.clone() }.records(9, &changes()).unwrap();
        let ops: Vec<String> = debezium
            .iter()
            .map(|(_, v)| serde_json::from_str::<serde_json::Value>(v.as_ref().unwrap()).unwrap()["op"].to_string())
            .collect();
        assert_eq!(ops, [r#""u""#, r#""c""#, r#""d""#]);
        let mut twice = changes();
        twice.push((r#"{"k":2,"n":6}"#.into(), 1));
        let error = Envelope::Upsert { key }.records(9, &twice).unwrap_err();
        assert!(error.contains(r#"key {"k":2} has 0 rows before and 2 after epoch 9"#), "{error}");
        let error = Envelope::Upsert { key: vec!["x".into()] }.records(9, &changes()).unwrap_err();
        assert!(error.contains("no column \"x\""), "{error}");
    }
}
