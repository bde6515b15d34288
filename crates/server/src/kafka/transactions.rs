//! The transaction coordinator (Kafka's, transaction.version 1): a
//! transactional id's producer id and epoch, the partitions and groups its
//! open transaction touches, its offsets to commit, and its completion.
//!
//! Each transactional id's state is one record in the compacted internal
//! topic [`STATE_TOPIC`] (key: the id; value: [`TxnRecord`] as JSON),
//! appended and synced before any answer that depends on it. Ending a
//! transaction is: record `PrepareCommit` (with the offsets to commit) or
//! `PrepareAbort`; append a marker to every partition of the transaction
//! (each synced, `Topics::append_control`); commit the offsets; record
//! `CompleteCommit` or `CompleteAbort`. The answer comes after the last
//! step. On start ([`Coordinator::recover`]) a `Prepare*` state is finished
//! and an `Ongoing` one is aborted with a bumped epoch (its producer is
//! fenced, as by a timeout), so no transaction stays open across a
//! restart, kill -9 included. [`Coordinator::expire`] aborts, with a bumped
//! epoch, a transaction open longer than its timeout.
//!
//! Invariants: a partition is written by a transaction only after the
//! record naming it is durable, so recovery knows every partition that may
//! hold its batches; a transactional Produce checks and appends under the
//! transactional id's lock, and an end writes its markers under the same
//! lock, so no batch of a transaction lands after its marker; a state's
//! epoch never decreases; a producer id is given to one transactional id.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use kafka_protocol::ResponseError;
use millpond_dataflow::{ControlMarker, ControlType, LogError, TopicRecord, TopicSpec};
use serde::{Deserialize, Serialize};

use super::errors::{WireError, wire};
use super::producers::{BatchProducer, Producers};
use crate::engine::Engine;

/// The internal topic that holds each transactional id's state.
pub(crate) const STATE_TOPIC: &str = "__kafka_transactions";
/// The longest transaction timeout a producer may ask for (Kafka's
/// `transaction.max.timeout.ms` default: 15 minutes).
pub(crate) const TIMEOUT_MS_MAX: i32 = 900_000;
/// Partitions one transaction may touch.
pub(crate) const PARTITIONS_PER_TXN_MAX: usize = 10_000;
/// Transactional ids the coordinator keeps.
pub(crate) const TRANSACTIONAL_IDS_MAX: usize = 100_000;
/// The version of [`TxnRecord`] written.
const RECORD_VERSION: u32 = 1;

/// Where a transactional id's transaction stands (Kafka's states).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

/// One offset a transaction commits for a group.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct TxnOffset {
    pub(crate) group: String,
    pub(crate) topic: String,
    pub(crate) partition: u32,
    pub(crate) offset: u64,
}

/// A transactional id's state as [`STATE_TOPIC`] holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TxnRecord {
    pub(crate) version: u32,
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    pub(crate) timeout_ms: i32,
    pub(crate) state: TxnState,
    /// Partitions the open (or ending) transaction wrote or may write.
    pub(crate) partitions: BTreeSet<(String, u32)>,
    pub(crate) groups: BTreeSet<String>,
    /// The offsets an ending commit applies (in `PrepareCommit` only).
    pub(crate) offsets: Vec<TxnOffset>,
    /// When the open transaction began (ms since the epoch).
    pub(crate) started_ms: i64,
}

/// A transactional id's state in memory, with the offsets its open
/// transaction will commit (kept in memory: an open transaction is aborted
/// on recovery, so they are needed on disk only from `PrepareCommit`).
#[derive(Debug)]
pub(crate) struct Txn {
    record: TxnRecord,
    pending: BTreeMap<(String, String, u32), u64>,
}

/// Every transactional id's state.
#[derive(Debug, Default)]
pub(crate) struct Coordinator {
    txns: Mutex<HashMap<String, Arc<Mutex<Txn>>>>,
}

fn error(code: ResponseError, message: impl Into<String>) -> WireError {
    WireError::new(code, message)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl Coordinator {
    /// Reads every transactional id's last state and finishes what a stop
    /// left: `Prepare*` completed, `Ongoing` aborted with a bumped epoch.
    pub(crate) fn recover(engine: &Engine) -> Result<Coordinator, WireError> {
        let topics = engine.topics();
        topics
            .ensure(STATE_TOPIC, TopicSpec { partitions: 1, compacted: true, compaction_bounded: false })
            .map_err(|e| wire(&e))?;
        let mut latest: HashMap<String, TxnRecord> = HashMap::new();
        for stored in topics.read_all(STATE_TOPIC).map_err(|e| wire(&e))? {
            let (Some(key), Some(value)) = (stored.key, stored.value) else { continue };
            let id = String::from_utf8_lossy(&key).into_owned();
            let record: TxnRecord = serde_json::from_slice(&value).map_err(|e| {
                error(ResponseError::KafkaStorageError, format!("{STATE_TOPIC} offset {}: {e}", stored.offset))
            })?;
            if record.version != RECORD_VERSION {
                let message = format!("{STATE_TOPIC} offset {}: record version {}", stored.offset, record.version);
                return Err(error(ResponseError::KafkaStorageError, message));
            }
            latest.insert(id, record);
        }
        let coordinator = Coordinator::default();
        for (id, record) in latest {
            let mut txn = Txn { record, pending: BTreeMap::new() };
            match txn.record.state {
                TxnState::PrepareCommit => complete(engine, &id, &mut txn, true)?,
                TxnState::PrepareAbort => complete(engine, &id, &mut txn, false)?,
                TxnState::Ongoing => abort_fenced(engine, &id, &mut txn)?,
                _ => {}
            }
            coordinator.txns.lock().expect("txns lock").insert(id, Arc::new(Mutex::new(txn)));
        }
        Ok(coordinator)
    }

    fn entry(&self, id: &str) -> Option<Arc<Mutex<Txn>>> {
        self.txns.lock().expect("txns lock").get(id).cloned()
    }

    /// InitProducerId with a transactional id: a new producer id at epoch 0
    /// the first time; after that the same id with the epoch bumped (a
    /// new id once the epoch is spent), the open transaction aborted first.
    /// A producer that names its id and epoch (KIP-360) must name the
    /// current ones, or is fenced.
    pub(crate) fn init(
        &self,
        engine: &Engine,
        producers: &Producers,
        id: &str,
        timeout_ms: i32,
        current: (i64, i16),
    ) -> Result<(i64, i16), WireError> {
        if !(1..=TIMEOUT_MS_MAX).contains(&timeout_ms) {
            let message = format!("transaction.timeout.ms {timeout_ms}: 1..={TIMEOUT_MS_MAX}");
            return Err(error(ResponseError::InvalidTransactionTimeout, message));
        }
        let storage = |e: std::io::Error| error(ResponseError::KafkaStorageError, e.to_string());
        let entry = {
            let mut txns = self.txns.lock().expect("txns lock");
            match txns.get(id) {
                Some(entry) => entry.clone(),
                None => {
                    if txns.len() >= TRANSACTIONAL_IDS_MAX {
                        let message = format!("more than {TRANSACTIONAL_IDS_MAX} transactional ids");
                        return Err(error(ResponseError::ResourceNotFound, message));
                    }
                    let record = TxnRecord {
                        version: RECORD_VERSION,
                        producer_id: producers.allocate().map_err(storage)?,
                        producer_epoch: -1,
                        timeout_ms,
                        state: TxnState::Empty,
                        partitions: BTreeSet::new(),
                        groups: BTreeSet::new(),
                        offsets: Vec::new(),
                        started_ms: 0,
                    };
                    let entry = Arc::new(Mutex::new(Txn { record, pending: BTreeMap::new() }));
                    txns.insert(id.to_owned(), entry.clone());
                    entry
                }
            }
        };
        let mut txn = entry.lock().expect("txn lock");
        let record = &txn.record;
        if current.0 >= 0 && (current.0, current.1) != (record.producer_id, record.producer_epoch) {
            let message = format!(
                "{id}: producer {} epoch {} is not the current {} epoch {}",
                current.0, current.1, record.producer_id, record.producer_epoch
            );
            return Err(error(ResponseError::ProducerFenced, message));
        }
        match txn.record.state {
            TxnState::Ongoing => abort_fenced(engine, id, &mut txn)?,
            TxnState::PrepareCommit => complete(engine, id, &mut txn, true)?,
            TxnState::PrepareAbort => complete(engine, id, &mut txn, false)?,
            _ => {}
        }
        if txn.record.producer_epoch >= i16::MAX - 1 {
            txn.record.producer_id = producers.allocate().map_err(storage)?;
            txn.record.producer_epoch = 0;
        } else {
            txn.record.producer_epoch += 1;
        }
        txn.record.timeout_ms = timeout_ms;
        txn.record.state = TxnState::Empty;
        persist(engine, id, &txn.record)?;
        Ok((txn.record.producer_id, txn.record.producer_epoch))
    }

    /// The transactional id's state (to lock, then [`check_producer`]); an
    /// unknown id is INVALID_PRODUCER_ID_MAPPING.
    fn known(&self, id: &str) -> Result<Arc<Mutex<Txn>>, WireError> {
        self.entry(id).ok_or_else(|| {
            error(
                ResponseError::InvalidProducerIdMapping,
                format!("{id}: no such transactional id (InitProducerId first)"),
            )
        })
    }

    /// AddPartitionsToTxn: the partitions join the open transaction (one
    /// begins), recorded durably before the answer. Each partition's code.
    pub(crate) fn add_partitions(
        &self,
        engine: &Engine,
        id: &str,
        producer: (i64, i16),
        partitions: &[(String, u32)],
    ) -> Result<Vec<Result<(), WireError>>, WireError> {
        let entry = self.known(id)?;
        let mut txn = entry.lock().expect("txn lock");
        check_producer(id, &txn.record, producer.0, producer.1)?;
        let checks: Vec<Result<(), WireError>> = partitions.iter().map(|(t, p)| writable(engine, t, *p)).collect();
        if checks.iter().any(Result::is_err) {
            // As Kafka answers: the failing partitions' errors, the others not attempted.
            let skipped = || error(ResponseError::OperationNotAttempted, "another partition of the request failed");
            return Ok(checks.into_iter().map(|check| check.and_then(|()| Err(skipped()))).collect());
        }
        if txn.record.partitions.len() + partitions.len() > PARTITIONS_PER_TXN_MAX {
            let message = format!("{id}: a transaction touches at most {PARTITIONS_PER_TXN_MAX} partitions");
            return Err(error(ResponseError::InvalidTxnState, message));
        }
        begin(&mut txn);
        txn.record.partitions.extend(partitions.iter().cloned());
        persist(engine, id, &txn.record)?;
        Ok(checks)
    }

    /// AddOffsetsToTxn: the group's offsets will commit with the transaction.
    pub(crate) fn add_offsets(
        &self,
        engine: &Engine,
        id: &str,
        producer: (i64, i16),
        group: &str,
    ) -> Result<(), WireError> {
        let entry = self.known(id)?;
        let mut txn = entry.lock().expect("txn lock");
        check_producer(id, &txn.record, producer.0, producer.1)?;
        begin(&mut txn);
        if txn.record.groups.insert(group.to_owned()) {
            persist(engine, id, &txn.record)?;
        }
        Ok(())
    }

    /// TxnOffsetCommit: offsets held until the transaction ends, committed
    /// with a commit and dropped with an abort. The group must have been
    /// added (AddOffsetsToTxn).
    pub(crate) fn commit_offsets(
        &self,
        id: &str,
        producer: (i64, i16),
        group: &str,
        offsets: &[(String, u32, u64)],
    ) -> Result<(), WireError> {
        let entry = self.known(id)?;
        let mut txn = entry.lock().expect("txn lock");
        check_producer(id, &txn.record, producer.0, producer.1)?;
        if txn.record.state != TxnState::Ongoing || !txn.record.groups.contains(group) {
            let message = format!("{id}: group {group} is not in the open transaction (AddOffsetsToTxn first)");
            return Err(error(ResponseError::InvalidTxnState, message));
        }
        for (topic, partition, offset) in offsets {
            txn.pending.insert((group.to_owned(), topic.clone(), *partition), *offset);
        }
        Ok(())
    }

    /// EndTxn: commits or aborts the open transaction. Ending with nothing
    /// open, or ending again what just ended the same way, succeeds.
    pub(crate) fn end(&self, engine: &Engine, id: &str, producer: (i64, i16), commit: bool) -> Result<(), WireError> {
        let entry = self.known(id)?;
        let mut txn = entry.lock().expect("txn lock");
        check_producer(id, &txn.record, producer.0, producer.1)?;
        match (txn.record.state, commit) {
            (TxnState::Ongoing, _) | (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                complete(engine, id, &mut txn, commit)
            }
            (TxnState::Empty, _) | (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(()),
            (state, _) => {
                let asked = if commit { "commit" } else { "abort" };
                Err(error(ResponseError::InvalidTxnState, format!("{id}: cannot {asked} in state {state:?}")))
            }
        }
    }

    /// Runs `append` (a Produce of `batch` to `topic`'s `partition`) under
    /// the transactional id's lock, once the producer is found to be the
    /// current one at the current epoch (an older epoch is
    /// INVALID_PRODUCER_EPOCH) with a transaction open that holds the
    /// partition (else INVALID_TXN_STATE).
    pub(crate) fn produce<T>(
        &self,
        id: &str,
        batch: BatchProducer,
        (topic, partition): (&str, u32),
        append: impl FnOnce() -> Result<T, WireError>,
    ) -> Result<T, WireError> {
        let entry = self.known(id)?;
        let txn = entry.lock().expect("txn lock");
        let record = &txn.record;
        if record.producer_id != batch.id {
            let message = format!("{id}: producer {} is not its producer {}", batch.id, record.producer_id);
            return Err(error(ResponseError::InvalidProducerIdMapping, message));
        }
        if batch.epoch != record.producer_epoch {
            let message = format!("{id}: epoch {} is not the current {}", batch.epoch, record.producer_epoch);
            return Err(error(ResponseError::InvalidProducerEpoch, message));
        }
        if record.state != TxnState::Ongoing || !record.partitions.contains(&(topic.to_owned(), partition)) {
            let message = format!("{id}: {topic}/{partition} is not in an open transaction (AddPartitionsToTxn first)");
            return Err(error(ResponseError::InvalidTxnState, message));
        }
        let appended = append();
        drop(txn);
        appended
    }

    /// Aborts, with a bumped epoch, every transaction open longer than its
    /// timeout at `now_ms`. Returns how many.
    pub(crate) fn expire(&self, engine: &Engine, now_ms: i64) -> usize {
        let entries: Vec<(String, Arc<Mutex<Txn>>)> =
            self.txns.lock().expect("txns lock").iter().map(|(id, e)| (id.clone(), e.clone())).collect();
        let mut aborted = 0;
        for (id, entry) in entries {
            let mut txn = entry.lock().expect("txn lock");
            let record = &txn.record;
            if record.state == TxnState::Ongoing
                && record.started_ms.saturating_add(i64::from(record.timeout_ms)) <= now_ms
            {
                aborted += usize::from(abort_fenced(engine, &id, &mut txn).is_ok());
            }
        }
        aborted
    }
}

/// The producer must be the transactional id's: another producer id is
/// INVALID_PRODUCER_ID_MAPPING, an older epoch PRODUCER_FENCED, a newer
/// one INVALID_PRODUCER_EPOCH.
fn check_producer(id: &str, record: &TxnRecord, producer_id: i64, epoch: i16) -> Result<(), WireError> {
    if producer_id != record.producer_id {
        let message = format!("{id}: producer {producer_id} is not its producer {}", record.producer_id);
        return Err(error(ResponseError::InvalidProducerIdMapping, message));
    }
    if epoch < record.producer_epoch {
        let message = format!("{id}: epoch {epoch} was fenced by epoch {}", record.producer_epoch);
        return Err(error(ResponseError::ProducerFenced, message));
    }
    if epoch > record.producer_epoch {
        let message = format!("{id}: epoch {epoch} is newer than the current {}", record.producer_epoch);
        return Err(error(ResponseError::InvalidProducerEpoch, message));
    }
    Ok(())
}

/// Whether a transaction may write `topic`'s `partition`.
fn writable(engine: &Engine, topic: &str, partition: u32) -> Result<(), WireError> {
    super::errors::refuse_protected(topic)?;
    let partitions = engine.topics().partitions(topic).map_err(|e| wire(&e))?;
    if partition >= partitions {
        return Err(error(ResponseError::UnknownTopicOrPartition, format!("{topic}/{partition}")));
    }
    Ok(())
}

/// Opens a transaction if none is open.
fn begin(txn: &mut Txn) {
    if txn.record.state != TxnState::Ongoing {
        txn.record.state = TxnState::Ongoing;
        txn.record.started_ms = now_ms();
        txn.record.partitions.clear();
        txn.record.groups.clear();
        txn.pending.clear();
    }
}

/// Appends `record` as `id`'s state and syncs it.
fn persist(engine: &Engine, id: &str, record: &TxnRecord) -> Result<(), WireError> {
    debug_assert_eq!(record.version, RECORD_VERSION);
    debug_assert!(record.state == TxnState::PrepareCommit || record.offsets.is_empty());
    let value = serde_json::to_vec(record).expect("a transaction record encodes");
    let stored = TopicRecord { key: Some(id.as_bytes().to_vec()), value: Some(value), headers: Vec::new() };
    engine.topics().append(STATE_TOPIC, vec![stored]).map_err(|e| wire(&e))
}

/// Ends `txn`: the prepare state recorded, a marker in every partition,
/// the offsets committed (a commit), the complete state recorded.
fn complete(engine: &Engine, id: &str, txn: &mut Txn, commit: bool) -> Result<(), WireError> {
    let record = &mut txn.record;
    if record.state == TxnState::Ongoing {
        record.state = if commit { TxnState::PrepareCommit } else { TxnState::PrepareAbort };
        record.offsets = match commit {
            true => txn
                .pending
                .iter()
                .map(|((group, topic, partition), offset)| TxnOffset {
                    group: group.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                    offset: *offset,
                })
                .collect(),
            false => Vec::new(),
        };
        persist(engine, id, record)?;
    }
    assert!(matches!(record.state, TxnState::PrepareCommit | TxnState::PrepareAbort), "only a prepared end completes");
    let control = if commit { ControlType::Commit } else { ControlType::Abort };
    let topics = engine.topics();
    for (topic, partition) in &record.partitions {
        let marker = ControlMarker {
            producer_id: record.producer_id,
            producer_epoch: record.producer_epoch,
            control,
            coordinator_epoch: 0,
            timestamp_ms: now_ms(),
        };
        match topics.append_control(topic, *partition, marker) {
            Ok(_) => {}
            // A topic deleted since holds nothing of the transaction.
            Err(millpond_dataflow::Error::Log(LogError::UnknownTopic(_) | LogError::UnknownPartition { .. })) => {}
            Err(e) => return Err(wire(&e)),
        }
    }
    for offset in &record.offsets {
        match topics.commit_group_offset(&offset.group, &offset.topic, offset.partition, offset.offset) {
            Ok(()) | Err(millpond_dataflow::Error::Log(LogError::UnknownTopic(_))) => {}
            Err(e) => return Err(wire(&e)),
        }
    }
    record.state = if commit { TxnState::CompleteCommit } else { TxnState::CompleteAbort };
    record.partitions.clear();
    record.groups.clear();
    record.offsets.clear();
    txn.pending.clear();
    persist(engine, id, &txn.record)
}

/// Aborts `txn` with its epoch bumped first, so that its producer is
/// fenced (a timeout, a restart, or a new InitProducerId).
fn abort_fenced(engine: &Engine, id: &str, txn: &mut Txn) -> Result<(), WireError> {
    assert_eq!(txn.record.state, TxnState::Ongoing);
    txn.record.producer_epoch = txn.record.producer_epoch.saturating_add(1).min(i16::MAX - 1);
    complete(engine, id, txn, false)
}
