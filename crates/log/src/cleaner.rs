//! Compaction: rewrites closed segments keeping only the latest record per
//! key, preserving offsets.
//!
//! Invariants:
//! - The active segment is never touched; only closed segments are cleaned,
//!   and "latest" is decided over the closed segments alone.
//! - Surviving records keep their offsets; each batch keeps its base offset
//!   and last offset delta, so offsets are never reused (gaps are allowed).
//! - A tombstone is kept until `timestamp + delete_retention_ms <= now`.
//! - Nothing at or past the last stable offset is cleaned; records of
//!   aborted transactions and transaction markers are removed, committed
//!   transactional records are kept like any other (without producer
//!   fields, as every rewritten batch).
//! - The swap is crash-atomic. Steps: write `<first>.log.cleaned` and sync
//!   it; rename it to `<first>-<end>.swap` and sync the directory (the commit
//!   point); delete the old segments with base offsets in `[first, end)`;
//!   rename the swap to `<first>.log`. Recovery deletes `*.cleaned` files and
//!   finishes any `*.swap` it finds (see `partition::recover_directory`).

use std::collections::HashMap;
use std::sync::Arc;

use crate::batch::{self, Batches, EncodeRecord};
use crate::error::{Error, Result};
use crate::partition::{self, Partition};
use crate::segment::{self, OffsetRules, Segment};
use crate::storage::OpenMode;

/// Bytes read from a segment at a time while cleaning.
const READ_CHUNK_BYTES: usize = 1 << 20;
/// Distinct keys the cleaner holds in memory for one partition.
pub(crate) const OFFSET_MAP_KEYS_MAX: usize = 16 << 20;

/// What one cleaning pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionStats {
    pub segments_rewritten: usize,
    pub records_removed: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// Calls `f` on every batch of `segment`, in order.
fn for_each_batch(
    partition: &Partition,
    segment: &Segment,
    mut f: impl FnMut(&batch::BatchView<'_>) -> Result<()>,
) -> Result<()> {
    let mut offset = segment.base_offset;
    loop {
        let bytes = match segment.read(offset, READ_CHUNK_BYTES) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Ok(()),
            Err((offset, position, reason)) => {
                return Err(Error::CorruptBatch {
                    topic: partition.topic.clone(),
                    partition: partition.id,
                    offset,
                    segment: segment.path.clone(),
                    position,
                    reason,
                });
            }
        };
        // Compressed batches are read decompressed (and written back so).
        let bytes = batch::normalized(&bytes).map_err(|reason| Error::CorruptBatch {
            topic: partition.topic.clone(),
            partition: partition.id,
            offset,
            segment: segment.path.clone(),
            position: 0,
            reason,
        })?;
        for batch in Batches::new(&bytes) {
            f(&batch)?;
            offset = batch.last_offset() + 1;
        }
    }
}

/// Cleans the closed segments of `partition` once.
pub(crate) fn compact(partition: &Partition) -> Result<CompactionStats> {
    let mut stats = CompactionStats::default();
    if !partition.config().cleanup_policy.compacts() {
        return Ok(stats);
    }
    let _maintenance = partition.maintenance.lock().expect("maintenance lock");
    if partition.is_retired() {
        return Ok(stats);
    }
    let segments = partition.segments();
    // Closed segments that end at or below the cleanable limit and the last
    // stable offset (an open transaction's records are not yet decided).
    let limit =
        partition.cleanable_below.load(std::sync::atomic::Ordering::Acquire).min(partition.last_stable_offset());
    let cleanable = (0..segments.len() - 1).take_while(|&i| segments[i + 1].base_offset <= limit).count();
    let (closed, rest) = segments.split_at(cleanable);
    if closed.is_empty() {
        return Ok(stats);
    }
    // Aborted transactions' records are removed and never count as a key's
    // latest; markers are removed (kept data is rewritten without producer
    // fields, so no reader needs them).
    let aborted = partition.aborted_in(closed[0].base_offset, rest[0].base_offset);
    let decided = |batch: &batch::BatchView<'_>| !batch.is_control() && !aborted.iter().any(|a| a.covers(batch));
    let mut latest: HashMap<Vec<u8>, u64> = HashMap::new();
    for segment in closed {
        for_each_batch(partition, segment, |batch| {
            if !decided(batch) {
                return Ok(());
            }
            for record in batch.records() {
                // Appends to compacted topics need keys, but a topic switched
                // to compaction by hand may hold unkeyed records: refuse.
                let Some(key) = record.key else {
                    return Err(Error::KeyRequired(format!(
                        "{} (unkeyed record at {}/{} offset {}; cannot compact)",
                        partition.topic, partition.topic, partition.id, record.offset
                    )));
                };
                match latest.get_mut(key) {
                    Some(offset) => *offset = record.offset,
                    None => {
                        if latest.len() >= OFFSET_MAP_KEYS_MAX {
                            return Err(Error::InvalidConfig {
                                field: "cleanup_policy",
                                reason: format!(
                                    "more than {OFFSET_MAP_KEYS_MAX} distinct keys in one partition's closed segments"
                                ),
                            });
                        }
                        latest.insert(key.to_vec(), record.offset);
                    }
                }
            }
            Ok(())
        })?;
    }
    let now = partition.now_ms();
    let delete_retention_ms = partition.config().delete_retention_ms as i64;
    let keep = |record: &batch::RecordView<'_>| {
        let Some(key) = record.key else { return true }; // not reached: the map pass refuses unkeyed records
        latest.get(key) == Some(&record.offset)
            && (record.value.is_some() || record.timestamp_ms.saturating_add(delete_retention_ms) > now)
    };

    // Group consecutive closed segments so that each group's cleaned output
    // fits one segment.
    let mut start = 0;
    while start < closed.len() {
        // A group also spans at most 2^32 offsets: relative offsets are u32.
        let first = closed[start].base_offset;
        let base_after = |i: usize| segments.get(i).map_or(rest[0].base_offset, |s| s.base_offset);
        let mut end = start + 1;
        let mut group_bytes = closed[start].visible_bytes();
        while end < closed.len()
            && group_bytes + closed[end].visible_bytes() <= partition.config().segment_bytes
            && base_after(end + 1) - first <= u64::from(u32::MAX)
        {
            group_bytes += closed[end].visible_bytes();
            end += 1;
        }
        let end_offset = base_after(end);
        clean_group(partition, &closed[start..end], end_offset, &decided, &keep, &mut stats)?;
        start = end;
    }
    Ok(stats)
}

fn clean_group(
    partition: &Partition,
    group: &[Arc<Segment>],
    end_offset: u64,
    decided: &dyn Fn(&batch::BatchView<'_>) -> bool,
    keep: &dyn Fn(&batch::RecordView<'_>) -> bool,
    stats: &mut CompactionStats,
) -> Result<()> {
    let dir = &partition.dir;
    let first = group[0].base_offset;
    let mut output = Vec::new();
    let mut removed = 0u64;
    let mut before = 0u64;
    for segment in group {
        before += segment.visible_bytes();
        for_each_batch(partition, segment, |batch| {
            let decided = decided(batch);
            let survivors: Vec<_> = batch.records().filter(|r| decided && keep(r)).collect();
            removed += (batch.record_count() as usize - survivors.len()) as u64;
            if survivors.is_empty() {
                return Ok(());
            }
            let headers: Vec<_> = survivors.iter().map(|r| r.headers()).collect();
            batch::encode_batch(
                &mut output,
                batch.base_offset(),
                batch.last_offset_delta() as u32,
                survivors.iter().zip(&headers).map(|(r, headers)| EncodeRecord {
                    offset_delta: (r.offset - batch.base_offset()) as u32,
                    timestamp_ms: r.timestamp_ms,
                    key: r.key,
                    value: r.value,
                    headers,
                }),
            );
            Ok(())
        })?;
    }
    if removed == 0 {
        return Ok(()); // already clean
    }
    // Assert before writing: the output is valid batches in offset order within the group.
    let mut previous_end = first;
    for batch in Batches::new(&output) {
        assert!(
            batch.base_offset() >= previous_end && batch.last_offset() < end_offset,
            "cleaned batches stay in range"
        );
        previous_end = batch.last_offset() + 1;
    }

    let cleaned_path = dir.join(format!("{first:020}.log.cleaned"));
    let st = &*partition.storage;
    let file = st.open(&cleaned_path, OpenMode::Truncate).map_err(Error::io("creating", &cleaned_path))?;
    file.write_all_at(&output, 0).and_then(|()| file.sync_all()).map_err(Error::io("writing", &cleaned_path))?;
    drop(file);
    let swap_path = segment::swap_path(dir, first, end_offset);
    st.rename(&cleaned_path, &swap_path).map_err(Error::io("renaming to swap", &cleaned_path))?;
    partition::sync_dir(st, dir)?; // commit point
    for segment in group {
        partition::delete_segment_files(st, dir, segment.base_offset)?;
    }
    // The deletions must be durable before the rename: otherwise a crash could
    // keep the rename but resurrect an old segment beside the cleaned one.
    partition::sync_dir(st, dir)?;
    st.rename(&swap_path, &segment::log_path(dir, first)).map_err(Error::io("completing swap", &swap_path))?;
    partition::sync_dir(st, dir)?;
    let rules = OffsetRules { contiguous: false, limit: end_offset };
    let (cleaned, _, _) =
        Segment::open(st, dir, first, false, segment::Tail::Keep, partition.config().index_interval_bytes, rules)?;
    assert_eq!(cleaned.visible_bytes(), output.len() as u64, "the cleaned segment reads back whole");
    partition.replace_segments(first, end_offset, Arc::new(cleaned));
    stats.segments_rewritten += group.len();
    stats.records_removed += removed;
    stats.bytes_before += before;
    stats.bytes_after += output.len() as u64;
    Ok(())
}
