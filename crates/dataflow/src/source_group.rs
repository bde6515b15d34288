//! Source groups: one tail of a topic for several readers, so that each
//! record is read and decoded once however many views read it.
//!
//! Readers stay what [`crate::source`] says they are: names with offsets
//! committed per reader, one lineage each. A group is only how they read:
//! it holds **cursors**, each a set of the group's readers that stand at the
//! same position on every partition the worker owns. A cursor decodes each
//! record it reads once and emits it once, tagged with its readers (a bit
//! mask); each reader's collection keeps the records tagged with it.
//!
//! Readers at different positions (a view created after the others, still
//! catching up) start in cursors of their own. A cursor behind the leader
//! of a partition (the cursor furthest on it) reads that partition only up
//! to where the leader stands after its read in the same step, so a
//! catching-up cursor meets the leader and the two merge; from then on their
//! records are decoded once for both.
//!
//! Invariants:
//! - Each reader gets exactly what [`crate::source`] would emit for it alone:
//!   every record once per run, at the epoch current when it is read, in
//!   partition order; its positions are recorded under its own name at each
//!   epoch boundary. So sharing never changes a view's rows, state or
//!   checkpoint, only the cost of reading.
//! - The cursors of a group have disjoint reader sets that cover the group's
//!   readers, and pairwise different positions (equal ones are merged at the
//!   end of the step that makes them equal) (asserted).
//! - A cursor reads a partition no further than the position its leader
//!   reached in the same step (asserted).
//! - A group holds at most [`GROUP_READERS_MAX`] readers;
//!   [`Job::shared_source_of`] splits more into several groups.

use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use millpond_log::RecordView;
use timely::dataflow::operators::OkErr;

use crate::context::{Shared, WorkerContext};
use crate::dead_letter::DeadLetter;
use crate::runtime::Job;
use crate::source::{Fetched, Position, Tailer, advance, fetch_at, open_positions, open_topic, operate};
use crate::{Collection, Diff, Epoch};

/// Most readers in one group: a cursor's readers are the bits of a `u64`.
pub const GROUP_READERS_MAX: usize = 64;

/// Readers at one position: bit i of `readers` is the group's reader i.
struct Cursor {
    readers: u64,
    positions: Vec<Position>,
}

/// A decoded record (or its dead letter), tagged with the readers that read it.
type Tagged<T> = (u64, Result<Rc<T>, Box<DeadLetter>>);

impl<'s> Job<'s> {
    /// Tails `topic` once for the readers `readers` of the source `source`
    /// (see [`source_of`](Self::source_of)), decoding each record once: one
    /// collection per reader, in the order given, each with that reader's
    /// lineage and offsets, and each holding what `source_of` with that
    /// reader would hold. The decoded values are shared (`Rc`), not copied.
    /// Readers that stand at different positions (one new to the data
    /// directory, the others resuming) read apart until they meet, then
    /// together (see [`crate::source_group`]).
    pub fn shared_source_of<T, F>(
        &mut self,
        source: &str,
        readers: &[&str],
        topic: &str,
        decode: F,
    ) -> Vec<Collection<'s, Rc<T>>>
    where
        T: 'static,
        F: Fn(&RecordView<'_>) -> Result<T, String> + 'static,
    {
        self.shared_source_at(source, readers, topic, move |_: u32, record: &RecordView<'_>| decode(record))
    }

    /// [`shared_source_of`](Self::shared_source_of) with a decoder that is
    /// also told each record's partition.
    pub fn shared_source_at<T, F>(
        &mut self,
        source: &str,
        readers: &[&str],
        topic: &str,
        decode: F,
    ) -> Vec<Collection<'s, Rc<T>>>
    where
        T: 'static,
        F: Fn(u32, &RecordView<'_>) -> Result<T, String> + 'static,
    {
        let decode = Rc::new(decode);
        if crate::kafka_source::is_label(topic) {
            // An external Kafka topic: a consumer per reader, no shared cursor.
            return readers
                .iter()
                .map(|reader| {
                    let decode = decode.clone();
                    self.source_at(source, reader, topic, move |partition: u32, record: &RecordView<'_>| {
                        decode(partition, record).map(Rc::new)
                    })
                })
                .collect();
        }
        let mut collections = Vec::with_capacity(readers.len());
        for group in readers.chunks(GROUP_READERS_MAX) {
            for reader in group {
                self.ctx.declare_reader(reader, topic);
            }
            let decode = decode.clone();
            let tagged =
                tail_group(self.scope, &self.ctx, group, topic, move |partition, record| decode(partition, record));
            let (records, letters) = split(tagged);
            self.route_dead_letters(source, topic, letters);
            for (bit, reader) in group.iter().enumerate() {
                let mask = 1u64 << bit;
                let mut mine =
                    records.clone().flat_map(move |(readers, row): (u64, Rc<T>)| (readers & mask != 0).then_some(row));
                mine.lineage = Rc::new(BTreeSet::from([(*reader).to_owned()]));
                collections.push(mine);
            }
        }
        collections
    }
}

/// Splits a group's records from its dead letters (each letter once per cursor).
#[allow(clippy::type_complexity)]
fn split<'s, T: 'static>(
    tagged: Collection<'s, Tagged<T>>,
) -> (Collection<'s, (u64, Rc<T>)>, Collection<'s, Box<DeadLetter>>) {
    let (ok, err) =
        tagged.inner.inner.ok_err::<Vec<((u64, Rc<T>), Epoch, Diff)>, _, Vec<(Box<DeadLetter>, Epoch, Diff)>, _, _>(
            |((readers, result), epoch, diff)| match result {
                Ok(value) => Ok(((readers, value), epoch, diff)),
                Err(letter) => Err((letter, epoch, diff)),
            },
        );
    let monotonic = tagged.monotonic;
    let letters = Collection::from_stream(err, tagged.ctx.clone(), tagged.lineage.clone());
    let records = Collection::from_stream(ok, tagged.ctx, tagged.lineage);
    // A source's records, as a reader of its own would have them.
    (if monotonic { records.into_monotonic() } else { records }, letters)
}

/// The group's one source operator.
fn tail_group<'s, T, F>(
    scope: timely::dataflow::Scope<'s, Epoch>,
    ctx: &Rc<WorkerContext>,
    readers: &[&str],
    topic: &str,
    decode: F,
) -> Collection<'s, Tagged<T>>
where
    T: 'static,
    F: Fn(u32, &RecordView<'_>) -> Result<T, String> + 'static,
{
    assert!(!readers.is_empty() && readers.len() <= GROUP_READERS_MAX, "a group has 1..=64 readers");
    let mut cursors: Vec<Cursor> = Vec::new();
    for (bit, reader) in readers.iter().enumerate() {
        let partitions = open_topic(ctx, scope.index(), reader, topic);
        let positions = open_positions(ctx, (scope.index(), scope.peers()), reader, topic, partitions);
        cursors.push(Cursor { readers: 1 << bit, positions });
    }
    merge_equal(&mut cursors);
    let names: Vec<String> = readers.iter().map(|r| (*r).to_owned()).collect();
    let lineage = Rc::new(names.iter().cloned().collect::<BTreeSet<_>>());
    let name = format!("source-group:{topic}:{}", names.join(","));
    let group = Group { names, topic: topic.to_owned(), cursors, decode };
    operate(scope, ctx, &name, group, lineage)
}

/// A group's readers, cursors and decoder.
struct Group<F> {
    names: Vec<String>,
    topic: String,
    cursors: Vec<Cursor>,
    decode: F,
}

impl<T, F> Tailer for Group<F>
where
    T: 'static,
    F: Fn(u32, &RecordView<'_>) -> Result<T, String> + 'static,
{
    type Item = Tagged<T>;

    fn record(&mut self, shared: &Shared, epoch: Epoch) {
        for cursor in &mut self.cursors {
            for position in &mut cursor.positions {
                if position.recorded != Some(position.next_offset) {
                    for reader in members(&self.names, cursor.readers) {
                        let (partition, offset) = (position.partition, position.next_offset);
                        shared.checkpoints.source_position(epoch, reader, &self.topic, partition, offset);
                    }
                    position.recorded = Some(position.next_offset);
                }
            }
        }
    }

    /// Reads each partition once per cursor: the leader first, the others up
    /// to where it stands; then merges the cursors that met.
    fn read(&mut self, shared: &Shared, mut give: impl FnMut(Self::Item)) -> Option<bool> {
        let mut read_any = false;
        let partitions = self.cursors.first().map_or(0, |c| c.positions.len());
        for index in 0..partitions {
            let cursors = &mut self.cursors;
            let lead = (0..cursors.len()).max_by_key(|c| cursors[*c].positions[index].next_offset).expect("a cursor");
            let order = std::iter::once(lead).chain((0..cursors.len()).filter(|c| *c != lead));
            let mut limit = u64::MAX;
            for c in order {
                let cursor = &mut cursors[c];
                let members = members(&self.names, cursor.readers);
                let position = &mut cursor.positions[index];
                if position.next_offset >= limit {
                    continue;
                }
                let fetch = match fetch_at(shared, &members, &self.topic, position) {
                    Fetched::Records(fetch) => fetch,
                    Fetched::Skipped => continue,
                    Fetched::Failed => return None,
                };
                let mut count = 0u64;
                for record in fetch.records().take_while(|r| r.offset < limit) {
                    let item = (self.decode)(position.partition, &record)
                        .map(Rc::new)
                        .map_err(|error| Box::new(DeadLetter::of(&self.topic, position.partition, &record, error)));
                    give((cursor.readers, item));
                    count += 1;
                }
                read_any |= advance(position, fetch.next_offset().min(limit));
                if limit == u64::MAX {
                    limit = position.next_offset;
                }
                assert!(position.next_offset <= limit, "a cursor reads no further than its partition's leader");
                shared.records.fetch_add(count * u64::from(cursor.readers.count_ones()), Ordering::Relaxed);
            }
        }
        merge_equal(&mut self.cursors);
        Some(read_any)
    }

    fn caught_up(&self) -> bool {
        self.cursors.iter().all(|c| c.positions.iter().all(|p| p.next_offset >= p.target))
    }
}

/// The names of the readers in `readers` (a mask over `names`).
fn members(names: &[String], readers: u64) -> Vec<&str> {
    names.iter().enumerate().filter(|(bit, _)| readers & (1 << bit) != 0).map(|(_, n)| n.as_str()).collect()
}

/// Merges cursors that stand at the same positions.
fn merge_equal(cursors: &mut Vec<Cursor>) {
    let mut merged: Vec<Cursor> = Vec::with_capacity(cursors.len());
    for cursor in cursors.drain(..) {
        let same = |other: &Cursor| {
            other.positions.iter().map(|p| p.next_offset).eq(cursor.positions.iter().map(|p| p.next_offset))
        };
        match merged.iter_mut().find(|other| same(other)) {
            Some(other) => {
                assert_eq!(other.readers & cursor.readers, 0, "a reader is in one cursor");
                other.readers |= cursor.readers;
                for (mine, theirs) in other.positions.iter_mut().zip(&cursor.positions) {
                    assert_eq!(mine.partition, theirs.partition, "cursors list the same partitions");
                    if mine.recorded != theirs.recorded {
                        // Recorded again, for all, at the next boundary.
                        mine.recorded = None;
                    }
                }
            }
            None => merged.push(cursor),
        }
    }
    *cursors = merged;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cursor(readers: u64, offsets: &[u64]) -> Cursor {
        let positions = offsets
            .iter()
            .enumerate()
            .map(|(p, o)| Position { partition: p as u32, next_offset: *o, target: 0, recorded: Some(*o) })
            .collect();
        Cursor { readers, positions }
    }

    #[test]
    fn cursors_at_one_position_merge_and_others_stay_apart() {
        let mut cursors = vec![cursor(0b001, &[5, 7]), cursor(0b010, &[5, 6]), cursor(0b100, &[5, 7])];
        merge_equal(&mut cursors);
        assert_eq!(cursors.len(), 2);
        assert_eq!(cursors[0].readers, 0b101);
        assert_eq!(cursors[1].readers, 0b010);
        assert_eq!(members(&["a".into(), "b".into(), "c".into()], cursors[0].readers), ["a", "c"]);
    }

    #[test]
    fn a_merge_of_differently_recorded_cursors_records_again() {
        let mut fresh = cursor(0b10, &[3]);
        fresh.positions[0].recorded = None;
        let mut cursors = vec![cursor(0b01, &[3]), fresh];
        merge_equal(&mut cursors);
        assert_eq!(cursors.len(), 1);
        assert_eq!(cursors[0].positions[0].recorded, None);
    }
}
