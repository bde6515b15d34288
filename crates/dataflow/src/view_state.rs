//! A view's state (keyspace `vidx.NAME`: row hash → multiplicity and
//! offset, [`crate::view_index`]) is an index of its changelog, and the
//! changelog is its write-ahead log.
//!
//! Every changelog record carries a row's multiplicity after its epoch (a
//! tombstone for 0), so the state is a pure function of the changelog's
//! committed prefix: the last record of each row. A commit therefore only
//! waits for the changelog's sync and the (small) synced meta batch; the
//! view's operator keeps its unapplied rows in memory, and after the commit is
//! published [`apply_step`] writes the store from the changelog records
//! the commit made durable, in unsynced batches (RocksDB's WAL on, so a
//! crash keeps a prefix of them; the next synced commit makes them
//! durable), each with a marker: the changelog offset the keyspace is
//! applied through (keyspace `checkpoint.indexed`, key: the changelog
//! topic, value: the end offset, postcard `u64`). At startup the same
//! replay ([`catch_up_all`]) runs from each marker to the committed end;
//! an index without a marker (a new view, a lost index, or a directory
//! from before view index layout 1, whose `view.NAME` keyspaces and
//! `checkpoint.applied` markers are dropped) is replayed from offset 0.
//!
//! Invariants:
//! - the marker is written in the same batch as the state writes it covers,
//!   so the keyspace always equals the changelog applied through it; no
//!   marker means nothing is known to be applied (replay from offset 0);
//! - the marker is never past the committed end, and never more than one
//!   commit behind it once the next commit is durable (each commit's
//!   synced batch makes the previous commit's state batch durable);
//! - so compaction, bounded by a commit before the newest one
//!   ([`crate::checkpoint`]), never touches a record above the marker:
//!   replay sees every tombstone it needs;
//! - until an epoch's state writes are applied, the view's operator reads
//!   them from its unapplied rows (the committed epoch they are pruned by
//!   is raised only after the apply).

use std::collections::BTreeMap;

use millpond_log::Log;

use crate::checkpoint::CheckpointMeta;
use crate::codec::{decode, encode};
use crate::error::{Error, Result};
use crate::state::{Keyspace, StateStore, WriteBatch};
use crate::view_index::{
    HASHER_ENTRY, Head, IndexEntry, ROW_KEY_BYTES, RowHasher, head, head_or_create, index_keyspace,
};

/// The keyspace of the markers: changelog topic → offset applied through.
pub(crate) const APPLIED_KEYSPACE: &str = "checkpoint.indexed";
/// The markers of the layout before view index layout 1 (row → count in
/// `view.NAME`), dropped when a directory of that layout opens.
pub(crate) const APPLIED_KEYSPACE_BEFORE_INDEX: &str = "checkpoint.applied";
/// Bytes per fetch while replaying, and writes per replay batch.
const REPLAY_FETCH_BYTES_MAX: usize = 1 << 20;
/// A fetch is sized to the records still wanted at this many bytes each
/// (at least [`REPLAY_FETCH_BYTES_MIN`]): a read validates every batch it
/// returns, so a 2048-record step must not read (and check) a MiB past
/// its end. Rows larger than this take more fetches, never fewer records.
const REPLAY_FETCH_BYTES_PER_RECORD: usize = 64;
const REPLAY_FETCH_BYTES_MIN: usize = 16 << 10;
const REPLAY_BATCH_WRITES_MAX: usize = 50_000;

/// The offset `topic`'s view state is applied through (0 without a marker).
pub(crate) fn applied(store: &dyn StateStore, markers: Keyspace, topic: &str) -> Result<u64> {
    let what = format!("the applied marker of {topic}");
    store.get(markers, topic.as_bytes())?.map_or(Ok(0), |bytes| decode(&bytes, &what))
}

/// Adds the marker `topic → end` to `batch` (the batch of the writes it covers).
fn mark(batch: &mut WriteBatch, markers: Keyspace, topic: &str, end: u64) {
    batch.put_owned(markers, topic.as_bytes().to_vec(), encode(&end));
}

/// Brings every view's state of `meta` up to its committed changelog end.
/// A view that cannot be caught up (its changelog lost records it needs)
/// does not stop the others: its error is returned, for the job to report
/// if it still declares the view (a job may be dropping it).
pub(crate) fn catch_up_all(
    store: &dyn StateStore,
    log: &Log,
    meta: &CheckpointMeta,
) -> Result<BTreeMap<String, Error>> {
    let markers = store.keyspace(APPLIED_KEYSPACE)?;
    let mut failures = BTreeMap::new();
    for (view, topic) in &meta.views {
        let Some(&end) = meta.sinks.get(topic) else { continue };
        let from = applied(store, markers, topic)?;
        if from > end {
            return Err(Error::CorruptState {
                what: format!("view '{view}'"),
                reason: format!("its state is applied through offset {from} of {topic}, past the committed end {end}"),
            });
        }
        if from < end {
            let keyspace = store.keyspace(&index_keyspace(view))?;
            let what = format!("the index of view '{view}'");
            // A lost index is rebuilt holding rows (replayed from offset 0).
            let caught_up = head_or_create(store, keyspace, &what, true)
                .and_then(|head| catch_up(store, log, (keyspace, markers, head), topic, from, end));
            if let Err(error) = caught_up {
                failures.insert(view.clone(), error);
            }
        }
    }
    Ok(failures)
}

/// Brings view `view`'s state toward offset `end` of its changelog `topic`
/// (after a commit: the records it just made durable), a step at a time:
/// applies at most `records_max` more records (one batch with its marker);
/// returns whether the state now reaches `end`. The state applier's unit
/// of work ([`crate::applier`]), so that a commit that needs the apply
/// done can take the next step itself.
pub(crate) fn apply_step(
    store: &dyn StateStore,
    log: &Log,
    (view, topic): (&str, &str),
    end: u64,
    records_max: u64,
) -> Result<bool> {
    let markers = store.keyspace(APPLIED_KEYSPACE)?;
    let from = applied(store, markers, topic)?;
    assert!(from <= end, "view '{view}' is applied through {from}, past its committed end {end}");
    if from == end {
        return Ok(true);
    }
    let to = end.min(from.saturating_add(records_max.max(1)));
    let keyspace = store.keyspace(&index_keyspace(view))?;
    let what = format!("the index of view '{view}'");
    let head = head(store, keyspace, &what)?.ok_or_else(|| Error::CorruptState {
        what,
        reason: "it has no hash key, but its view has records to apply".into(),
    })?;
    catch_up(store, log, (keyspace, markers, head), topic, from, to)?;
    Ok(to == end)
}

/// Makes the index in `keyspace`, which holds no row entries, hold them:
/// replays its changelog `topic` from offset 0 to the committed end `end`
/// into row entries, then marks the index as holding rows (synced). For a
/// replacement of the view's definition, which retracts every row held,
/// or a view that reads its index again.
///
/// The replay starts from an emptied keyspace (a synced batch that deletes
/// whatever an earlier replay cut short by a crash wrote, and puts the head
/// back): an entry it left for a row whose records compaction has since
/// removed would otherwise outlive the replay. Compaction of the changelog
/// is held off while it runs (the bound set to 0, then put back), so it
/// sees every tombstone: a tombstone expired mid-replay could otherwise be
/// dropped after the replay read the row's earlier record. The caller holds
/// the lock that makes every worker wait for it (a long changelog stalls
/// the other views' builds meanwhile).
pub(crate) fn index_rows(
    store: &dyn StateStore,
    log: &Log,
    (keyspace, topic): (Keyspace, &str),
    end: u64,
    what: &str,
) -> Result<()> {
    let markers = store.keyspace(APPLIED_KEYSPACE)?;
    let head = head(store, keyspace, what)?.ok_or_else(|| Error::CorruptState {
        what: what.to_owned(),
        reason: "it has no hash key, but its rows are to be indexed".into(),
    })?;
    if head.holds_rows {
        return Ok(());
    }
    let mut emptied = WriteBatch::new();
    emptied.delete_keyspace(keyspace);
    emptied.put_owned(keyspace, HASHER_ENTRY.to_vec(), head.encode());
    store.commit(emptied, true)?;
    let bound = log.cleanable_below(topic, 0)?;
    log.set_cleanable_below(topic, 0, 0)?;
    let rows = Head { holds_rows: true, ..head };
    let replayed = catch_up(store, log, (keyspace, markers, rows), topic, 0, end);
    log.set_cleanable_below(topic, 0, bound)?;
    replayed?;
    let mut batch = WriteBatch::new();
    batch.put_owned(keyspace, HASHER_ENTRY.to_vec(), rows.encode());
    mark(&mut batch, markers, topic, end);
    store.commit(batch, true)
}

/// Applies the records of `topic` in `[from, end)` to `keyspace`, in
/// batches each with its marker; returns the records applied. Every record
/// of the range must still be there (compaction stays below it). An index
/// that holds no rows ([`Head::holds_rows`]) only has its marker moved.
fn catch_up(
    store: &dyn StateStore,
    log: &Log,
    (keyspace, markers, head): (Keyspace, Keyspace, Head),
    topic: &str,
    from: u64,
    end: u64,
) -> Result<u64> {
    if !head.holds_rows {
        let mut batch = WriteBatch::new();
        mark(&mut batch, markers, topic, end);
        store.commit(batch, false)?;
        return Ok(0);
    }
    let hasher = head.hasher;
    let low = log.low_watermark(topic, 0)?;
    if low > from {
        return Err(Error::CorruptChangelog {
            view: topic.to_owned(),
            offset: from,
            reason: format!("the view's state needs records from offset {from}, but the changelog starts at {low}"),
        });
    }
    let mut next = from;
    let mut applied = 0;
    let mut batch = WriteBatch::new();
    while next < end {
        let fetch = log.fetch(topic, 0, next, replay_fetch_bytes(end - next))?;
        for record in fetch.records().take_while(|r| r.offset < end) {
            match index_write(hasher, topic, &record)? {
                (key, None) => batch.delete(keyspace, &key),
                (key, Some(entry)) => batch.put_owned(keyspace, key.to_vec(), entry.encode()),
            }
            applied += 1;
        }
        let reached = fetch.next_offset().min(end);
        if reached <= next {
            return Err(Error::CorruptChangelog {
                view: topic.to_owned(),
                offset: next,
                reason: format!("the changelog ends before its committed end {end}"),
            });
        }
        next = reached;
        if batch.len() >= REPLAY_BATCH_WRITES_MAX || next == end {
            mark(&mut batch, markers, topic, next);
            store.commit(std::mem::take(&mut batch), false)?;
        }
    }
    Ok(applied)
}

/// The bytes to fetch for `records` more records.
fn replay_fetch_bytes(records: u64) -> usize {
    usize::try_from(records)
        .unwrap_or(usize::MAX)
        .saturating_mul(REPLAY_FETCH_BYTES_PER_RECORD)
        .clamp(REPLAY_FETCH_BYTES_MIN, REPLAY_FETCH_BYTES_MAX)
}

/// A write to the index: a row's key and its entry (`None`: deleted).
type IndexWrite = ([u8; ROW_KEY_BYTES], Option<IndexEntry>);

/// One changelog record's effect on the index: its row's multiplicity and
/// offset, or no entry. Each epoch's records come in row hash order (the
/// fold sorts them so), so RocksDB's memtable inserts a run of ascending
/// keys from where the last one went; in any other order each insert is a
/// search of its skip list (measured: most of the applier's time).
fn index_write(hasher: RowHasher, topic: &str, record: &millpond_log::RecordView<'_>) -> Result<IndexWrite> {
    let corrupt = |reason: &str| Error::CorruptChangelog {
        view: topic.to_owned(),
        offset: record.offset,
        reason: reason.to_owned(),
    };
    let row = record.key.ok_or_else(|| corrupt("a changelog record has no key"))?;
    let key = hasher.hash(row).key();
    let Some(value) = record.value else { return Ok((key, None)) };
    let count = i64::from_be_bytes(value.try_into().map_err(|_| corrupt("a multiplicity is not 8 bytes"))?);
    if count == 0 {
        return Err(corrupt("a multiplicity of 0 is written as a tombstone"));
    }
    Ok((key, Some(IndexEntry { count, offset: record.offset })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::MemoryStore;

    /// Rows far larger than a fetch's per-record guess take more fetches
    /// per step, never fewer records; records past the committed end (the
    /// next epoch's, already written) are not applied.
    #[test]
    fn steps_over_rows_larger_than_the_fetch_guess_apply_exactly_to_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), millpond_log::LogOptions::default()).unwrap();
        let config = millpond_log::TopicConfig { partitions: 1, ..millpond_log::TopicConfig::default() };
        log.create_topic("view.v", config).unwrap();
        let row = |k: u64| format!("[{k},\"{}\"]", "x".repeat(4 * REPLAY_FETCH_BYTES_PER_RECORD));
        let records: Vec<millpond_log::Record> = (0..600)
            .map(|k| millpond_log::Record::new(Some(row(k).as_bytes()), Some(&1i64.to_be_bytes()), 0))
            .collect();
        log.append("view.v", 0, &records).unwrap();
        let store = MemoryStore::new();
        let keyspace = store.keyspace("vidx.v").unwrap();
        let refused = apply_step(&store, &log, ("v", "view.v"), 1, 128).unwrap_err().to_string();
        assert!(refused.contains("the index of view 'v'") && refused.contains("no hash key"), "{refused}");
        let hasher = crate::view_index::hasher_or_create(&store, keyspace, "v").unwrap();
        let end = 500;
        let mut steps = 0;
        while !apply_step(&store, &log, ("v", "view.v"), end, 128).unwrap() {
            steps += 1;
        }
        assert_eq!(steps, 3, "500 records in steps of 128");
        let markers = store.keyspace(APPLIED_KEYSPACE).unwrap();
        assert_eq!(applied(&store, markers, "view.v").unwrap(), end);
        for k in 0..600 {
            let held = store.get(keyspace, &hasher.hash(row(k).as_bytes()).key()).unwrap();
            let expected = (k < end).then_some(IndexEntry { count: 1, offset: k });
            assert_eq!(held.map(|bytes| IndexEntry::decode(&bytes, "v").unwrap()), expected, "row {k}");
        }
        // The rows come back from the changelog at the offsets the index gives.
        let mut held = Vec::new();
        store
            .scan_prefix(keyspace, b"", &mut |key, value| {
                if let Some(hash) = crate::view_index::RowHash::from_key(key) {
                    let entry = IndexEntry::decode(value, "v").unwrap();
                    held.push((entry.offset, hash, entry.count));
                }
                true
            })
            .unwrap();
        held.sort_unstable();
        let mut rows = Vec::new();
        crate::view_index::read_rows_at(&log, "view.v", &held, |(offset, hash, _), row| {
            assert_eq!(hasher.hash(row), hash);
            rows.push((offset, String::from_utf8(row.to_vec()).unwrap()));
            Ok(())
        })
        .unwrap();
        assert_eq!(rows, (0..end).map(|k| (k, row(k))).collect::<Vec<_>>());
        // An offset the changelog does not hold is named.
        let hash = hasher.hash(b"gone");
        let missing = crate::view_index::read_rows_at(&log, "view.v", &[(900, hash, 1)], |_, _| Ok(()));
        let missing = missing.unwrap_err().to_string();
        assert!(missing.contains("900"), "{missing}");
    }

    #[test]
    fn a_fetch_is_sized_to_the_records_wanted_within_its_bounds() {
        assert_eq!(replay_fetch_bytes(1), REPLAY_FETCH_BYTES_MIN);
        assert_eq!(replay_fetch_bytes(2048), 2048 * REPLAY_FETCH_BYTES_PER_RECORD);
        assert_eq!(replay_fetch_bytes(u64::MAX), REPLAY_FETCH_BYTES_MAX);
    }
}
