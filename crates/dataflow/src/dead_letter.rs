//! Dead letters: one topic per source, one letter per rejected record.
//!
//! A record that a source's decoder rejects becomes a [`DeadLetter`]; it
//! never stops the job. Every reader of a source (each SQL view has its
//! own) sends its rejections to the source's one dead-letter topic,
//! `SOURCE.dead-letter` (`TOPIC.dead-letter` for [`Job::source`] and
//! [`Job::source_named`], whose source is named after the topic), through
//! one sink on worker 0 that writes each rejected record once:
//!
//! - within an epoch, letters are ordered by (partition, offset), and a
//!   record rejected by several readers is written once;
//! - across epochs and runs, the sink keeps per partition of the source
//!   topic the **mark** below which every rejection has been written,
//!   committed with the checkpoint ([`DeadLetterMarks`]); a rejection below
//!   the mark (a new view's reader, reading from the start) writes nothing.
//!
//! This is exactly once because a source's verdict on a record is the same
//! for every reader (SQL validates every declared column, whichever a view
//! reads; Rust readers of one source must share its decoder) and a reader
//! reads each partition in order: the rejections that readers emit past a
//! mark are the source's next rejections, in offset order.
//!
//! A letter is the rejected record as it was: its key, value and timestamp
//! (key and value cut at [`PAYLOAD_BYTES_MAX`] each), with headers that say
//! where it came from and why, as Kafka Connect's dead-letter queues do:
//! `millpond.source.topic`, `millpond.source.topic-id`,
//! `millpond.source.partition`, `millpond.source.offset` (decimal text),
//! `millpond.error`, `millpond.source.verdict` (which definition of the
//! source judged it), and `millpond.truncated` (the original key and value
//! lengths, `KEY_BYTES,VALUE_BYTES`) only when something was cut.
//!
//! The topic is created with its first letter: a source that rejects
//! nothing has none.
//!
//! Invariants: marks never move back within one incarnation of the source
//! topic (asserted at commit); a new incarnation (the topic deleted and
//! created again) starts the marks over; every letter of a sink is of its
//! source's topic (asserted); the letters of an epoch are written in
//! (partition, offset) order, each above its partition's mark.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use millpond_log::{CleanupPolicy, Header, Record, RecordView};
use serde::{Deserialize, Serialize};

use crate::checkpoint::DeadLetterMarks;
use crate::context::WorkerContext;
use crate::runtime::Job;
use crate::sink::{append_all, epoch_sink, prepare_topic};
use crate::{Collection, Epoch};

/// Longest key or value copied into a letter; longer ones are cut (and the
/// letter says so). Two of them stay far below the log's batch limit.
pub const PAYLOAD_BYTES_MAX: usize = 1 << 20;
/// Longest error message kept in a letter.
const ERROR_BYTES_MAX: usize = 4 << 10;
pub const SOURCE_TOPIC_HEADER: &str = "millpond.source.topic";
pub const SOURCE_TOPIC_ID_HEADER: &str = "millpond.source.topic-id";
pub const SOURCE_PARTITION_HEADER: &str = "millpond.source.partition";
pub const SOURCE_OFFSET_HEADER: &str = "millpond.source.offset";
pub const ERROR_HEADER: &str = "millpond.error";
pub const TRUNCATED_HEADER: &str = "millpond.truncated";
pub const VERDICT_HEADER: &str = "millpond.source.verdict";

/// A record a source rejected, on its way to the dead-letter topic.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeadLetter {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub timestamp_ms: i64,
    pub error: String,
    /// The record's key and value, each cut at [`PAYLOAD_BYTES_MAX`].
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// The uncut lengths, when something was cut.
    pub truncated: Option<(usize, usize)>,
}

impl DeadLetter {
    /// The letter for `record` of `topic`/`partition`, rejected with `error`.
    pub(crate) fn of(topic: &str, partition: u32, record: &RecordView<'_>, error: String) -> DeadLetter {
        let cut = |bytes: &[u8]| bytes[..bytes.len().min(PAYLOAD_BYTES_MAX)].to_vec();
        let (key_bytes, value_bytes) = (record.key.map_or(0, <[u8]>::len), record.value.map_or(0, <[u8]>::len));
        let truncated =
            (key_bytes > PAYLOAD_BYTES_MAX || value_bytes > PAYLOAD_BYTES_MAX).then_some((key_bytes, value_bytes));
        let mut error = error;
        if error.len() > ERROR_BYTES_MAX {
            let mut end = ERROR_BYTES_MAX;
            while !error.is_char_boundary(end) {
                end -= 1;
            }
            error.truncate(end);
        }
        DeadLetter {
            topic: topic.to_owned(),
            partition,
            offset: record.offset,
            timestamp_ms: record.timestamp_ms,
            error,
            key: record.key.map(cut),
            value: record.value.map(cut),
            truncated,
        }
    }

    /// The record written to the dead-letter topic.
    fn record(&self, topic_id: &str, verdict: &str) -> Record {
        let header = |key: &str, value: &str| Header { key: key.to_owned(), value: Some(value.as_bytes().to_vec()) };
        let mut headers = vec![
            header(SOURCE_TOPIC_HEADER, &self.topic),
            header(SOURCE_TOPIC_ID_HEADER, topic_id),
            header(SOURCE_PARTITION_HEADER, &self.partition.to_string()),
            header(SOURCE_OFFSET_HEADER, &self.offset.to_string()),
            header(ERROR_HEADER, &self.error),
            header(VERDICT_HEADER, verdict),
        ];
        if let Some((key_bytes, value_bytes)) = self.truncated {
            headers.push(header(TRUNCATED_HEADER, &format!("{key_bytes},{value_bytes}")));
        }
        Record { key: self.key.clone(), value: self.value.clone(), timestamp_ms: self.timestamp_ms, headers }
    }
}

/// The marks of one dead-letter topic while a run writes it.
#[derive(Debug)]
struct Marks(DeadLetterMarks);

impl Marks {
    /// The committed marks if they are of this incarnation of `topic` and
    /// this verdict, else none; each cut back to its partition's end `high`
    /// (a log that lost records reuses their offsets: the new records there
    /// have had no verdict).
    fn resumed(
        committed: Option<&DeadLetterMarks>,
        topic: &str,
        topic_id: &str,
        verdict: &str,
        high: impl Fn(u32) -> u64,
    ) -> Marks {
        let mut marks = match committed {
            Some(marks) if marks.topic == topic && marks.topic_id == topic_id && marks.verdict == verdict => {
                marks.clone()
            }
            _ => DeadLetterMarks {
                topic: topic.to_owned(),
                topic_id: topic_id.to_owned(),
                verdict: verdict.to_owned(),
                next: BTreeMap::new(),
            },
        };
        for (partition, next) in marks.next.iter_mut() {
            *next = (*next).min(high(*partition));
        }
        Marks(marks)
    }

    /// The letters to write of those rejected in one epoch: in (partition,
    /// offset) order, each record once, none below its partition's mark.
    /// Moves the marks past them.
    fn admit<'a>(&mut self, rejected: impl Iterator<Item = &'a DeadLetter>) -> Vec<&'a DeadLetter> {
        let mut letters: Vec<&DeadLetter> = rejected.collect();
        letters.sort_by_key(|letter| (letter.partition, letter.offset));
        letters.dedup_by_key(|letter| (letter.partition, letter.offset));
        letters.retain(|letter| {
            assert_eq!(letter.topic, self.0.topic, "a dead-letter sink takes the letters of one topic");
            let next = self.0.next.entry(letter.partition).or_insert(0);
            let admitted = letter.offset >= *next;
            if admitted {
                *next = letter.offset + 1;
            }
            admitted
        });
        letters
    }
}

/// What the readers of one source have rejected, while the job is built.
pub(crate) struct Route<'s> {
    topic: String,
    /// Declared by `declare_source` ("" if only readers name the source).
    verdict: Option<String>,
    letters: Option<Collection<'s, Box<DeadLetter>>>,
}

impl<'s> Job<'s> {
    /// Sends `letters` about records of `source` (reading `topic`) that a
    /// reader left out after decoding them (late records:
    /// [`crate::event_time`]) to the source's dead-letter topic, with the
    /// rejections: written once each, in (partition, offset) order, above
    /// the source's marks (module doc).
    pub fn dead_letters(&mut self, source: &str, topic: &str, letters: Collection<'s, Box<DeadLetter>>) {
        self.route_dead_letters(source, topic, letters);
    }

    /// Sends `letters`, rejected by a reader of `source` (reading `topic`),
    /// to the source's dead-letter topic.
    pub(crate) fn route_dead_letters(&mut self, source: &str, topic: &str, letters: Collection<'s, Box<DeadLetter>>) {
        let route = self.route(source, topic);
        route.letters = Some(match route.letters.take() {
            Some(earlier) => earlier.concat(letters),
            None => letters,
        });
    }

    /// Declares the source `source` of `topic` and its **verdict**: any
    /// string that changes when what the source rejects may change (SQL: its
    /// definition and the decoder's version). The dead-letter topic and its
    /// marks are kept in this run even if no reader of the source runs, so
    /// that a view created later does not write the letters again; marks of
    /// another verdict are started over (the records below them were judged
    /// by other rules). A source that is only read (never declared) has the
    /// verdict "".
    pub fn declare_source(&mut self, source: &str, topic: &str, verdict: &str) {
        let declared = self.route(source, topic).verdict.replace(verdict.to_owned());
        if declared.is_some_and(|earlier| earlier != verdict) {
            self.ctx.build_error(format!("source '{source}' is declared twice, with different verdicts"));
        }
    }

    fn route(&mut self, source: &str, topic: &str) -> &mut Route<'s> {
        let dead_letters = crate::naming::dead_letter_topic(source);
        if let Some(read) = self.dead_letters.get(&dead_letters).map(|route| &route.topic)
            && read != topic
        {
            self.ctx.build_error(format!(
                "source '{source}' is read from topic '{read}' and from topic '{topic}': the readers of a source \
                 read one topic (they share its dead-letter topic)"
            ));
        }
        self.dead_letters.entry(dead_letters).or_insert_with(|| Route {
            topic: topic.to_owned(),
            verdict: None,
            letters: None,
        })
    }

    /// Builds one dead-letter sink per source the job declared or read.
    pub(crate) fn build_dead_letter_sinks(&mut self) {
        for (dead_letters, route) in std::mem::take(&mut self.dead_letters) {
            let worker_0 = self.scope.index() == 0;
            if worker_0 {
                self.ctx.declare_sink(&dead_letters);
            }
            let prepared = prepare(&self.ctx, &dead_letters, &route, worker_0);
            if let Some(letters) = route.letters {
                sink(letters, &dead_letters, prepared);
            }
        }
    }
}

/// A dead-letter topic made ready for a run.
struct Prepared {
    marks: Marks,
    /// Cut back to its committed end (it existed at build).
    cut: bool,
}

/// Resumes the marks (recording them on worker 0 if the resumption changed
/// them) and, on worker 0, cuts an existing topic back to its committed end
/// (a crash may have left letters of an uncommitted epoch), whether or not a
/// reader of the source runs.
fn prepare(ctx: &WorkerContext, topic: &str, route: &Route<'_>, worker_0: bool) -> Prepared {
    let shared = &ctx.shared;
    let log = shared.log();
    let verdict = route.verdict.as_deref().unwrap_or("");
    let topic_id = log.topic_id(&route.topic).map(|id| id.to_string()).unwrap_or_default();
    let committed = shared.checkpoints.resumed().dead_letters.get(topic);
    // A Kafka source's partitions end outside this log: its marks stand.
    let kafka = crate::kafka_source::is_label(&route.topic);
    let high = |partition| if kafka { u64::MAX } else { log.high_watermark(&route.topic, partition).unwrap_or(0) };
    let marks = Marks::resumed(committed, &route.topic, &topic_id, verdict, high);
    if worker_0 && committed != Some(&marks.0) {
        shared.checkpoints.reset_dead_letter_marks(topic, marks.0.clone());
    }
    let exists = log.topic_config(topic).is_ok() || shared.checkpoints.resumed().sinks.contains_key(topic);
    let mut cut = false;
    if worker_0 && exists {
        match prepare_topic(shared, topic, CleanupPolicy::Delete) {
            Ok(()) => cut = true,
            // Built anyway (every worker builds the same dataflow); the build
            // error stops the job before any data flows.
            Err(e) => ctx.build_error(format!("dead-letter topic '{topic}': {e}")),
        }
    }
    Prepared { marks, cut }
}

/// Writes `letters` to `topic`, each rejected record once.
fn sink(letters: Collection<'_, Box<DeadLetter>>, topic: &str, prepared: Prepared) {
    let shared = letters.ctx.shared.clone();
    let Prepared { mut marks, cut: mut prepared } = prepared;
    let topic = topic.to_owned();
    epoch_sink(letters, &format!("dead-letters:{topic}"), move |epoch: Epoch, updates| {
        let admitted = marks.admit(updates.iter().filter(|(_, diff)| *diff > 0).map(|(letter, _)| &**letter));
        if admitted.is_empty() {
            return Ok(());
        }
        // The topic is created with the first letter (a source that rejects
        // nothing has none).
        if !prepared {
            prepare_topic(&shared, &topic, CleanupPolicy::Delete)?;
            prepared = true;
        }
        let records: Vec<Record> =
            admitted.iter().map(|letter| letter.record(&marks.0.topic_id, &marks.0.verdict)).collect();
        let end = append_all(&shared, &topic, &records)?;
        shared.dead_letters.fetch_add(records.len() as u64, Ordering::Relaxed);
        shared.checkpoints.sink_position(epoch, &topic, end);
        shared.checkpoints.dead_letter_marks(epoch, &topic, marks.0.clone());
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(partition: u32, offset: u64) -> DeadLetter {
        DeadLetter {
            topic: "bid".into(),
            partition,
            offset,
            timestamp_ms: 0,
            error: "bad".into(),
            key: None,
            value: Some(b"{".to_vec()),
            truncated: None,
        }
    }

    fn offsets(admitted: &[&DeadLetter]) -> Vec<(u32, u64)> {
        admitted.iter().map(|l| (l.partition, l.offset)).collect()
    }

    #[test]
    fn each_rejected_record_is_admitted_once_in_order() {
        let mut marks = Marks::resumed(None, "bid", "id1", "", |_| u64::MAX);
        // Two readers reject 7 and 3 of partition 0 in one epoch.
        let epoch = [letter(0, 7), letter(1, 2), letter(0, 3), letter(0, 7), letter(0, 3)];
        assert_eq!(offsets(&marks.admit(epoch.iter())), [(0, 3), (0, 7), (1, 2)]);
        assert_eq!(marks.0.next, BTreeMap::from([(0, 8), (1, 3)]));
        // A reader behind the marks (a new view from the start) adds nothing
        // until it passes them.
        let later = [letter(0, 3), letter(0, 7), letter(1, 2), letter(1, 9)];
        assert_eq!(offsets(&marks.admit(later.iter())), [(1, 9)]);
    }

    #[test]
    fn marks_of_another_incarnation_or_verdict_start_over_and_none_passes_the_log_end() {
        let committed = DeadLetterMarks {
            topic: "bid".into(),
            topic_id: "old".into(),
            verdict: "v1".into(),
            next: BTreeMap::from([(0, 9), (1, 4)]),
        };
        let all = |_| u64::MAX;
        let mut marks = Marks::resumed(Some(&committed), "bid", "new", "v1", all);
        assert_eq!(offsets(&marks.admit([letter(0, 1)].iter())), [(0, 1)], "another incarnation");
        let mut marks = Marks::resumed(Some(&committed), "bid", "old", "v2", all);
        assert_eq!(offsets(&marks.admit([letter(0, 1)].iter())), [(0, 1)], "another verdict");
        let mut marks = Marks::resumed(Some(&committed), "bid", "old", "v1", all);
        assert!(marks.admit([letter(0, 1)].iter()).is_empty());
        // Partition 0 now ends at 6 (the log lost offsets 6.. and reuses them).
        let mut marks = Marks::resumed(Some(&committed), "bid", "old", "v1", |p| if p == 0 { 6 } else { 100 });
        assert_eq!(marks.0.next, BTreeMap::from([(0, 6), (1, 4)]));
        assert_eq!(offsets(&marks.admit([letter(0, 5), letter(0, 7)].iter())), [(0, 7)]);
    }

    #[test]
    fn a_letter_is_the_record_as_it_was_with_headers_that_name_it() {
        let mut rejected = letter(2, 41);
        rejected.key = Some(b"k".to_vec());
        let record = rejected.record("abc", "v1");
        assert_eq!((record.key.as_deref(), record.value.as_deref()), (Some(&b"k"[..]), Some(&b"{"[..])));
        let headers: Vec<(&str, &[u8])> =
            record.headers.iter().map(|h| (h.key.as_str(), h.value.as_deref().unwrap())).collect();
        assert_eq!(
            headers,
            [
                (SOURCE_TOPIC_HEADER, &b"bid"[..]),
                (SOURCE_TOPIC_ID_HEADER, b"abc"),
                (SOURCE_PARTITION_HEADER, b"2"),
                (SOURCE_OFFSET_HEADER, b"41"),
                (ERROR_HEADER, b"bad"),
                (VERDICT_HEADER, b"v1"),
            ]
        );
    }
}
