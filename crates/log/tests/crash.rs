//! Crash recovery: every on-disk state a crash, a torn write or bit rot can
//! leave behind is built by hand from a cleanly written log, then reopened.
//!
//! What is checked (see each test): truncation of the active segment at every
//! byte, bit flips in the active and in closed segments, damaged index files,
//! every intermediate state of the cleaner's swap, and leftovers (orphan
//! indexes, unfinished topic directories).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use millpond_log::batch::Batches;
use millpond_log::{
    CleanupPolicy, Clock as _, CutReason, Error, Header, Log, LogOptions, ManualClock, Record, Repair, TopicConfig,
};
use tempfile::TempDir;

const TOPIC: &str = "t";
/// The partition under test; partition 0 also exists, so that error messages
/// have to name the right one.
const PART: u32 = 1;
const START_MS: i64 = 1_000_000;

/// Collects failed checks so that one run reports every failing case.
macro_rules! check {
    ($failures:expr, $cond:expr, $($fmt:tt)+) => {
        if !$cond {
            $failures.push(format!($($fmt)+));
        }
    };
}

fn assert_no_failures(what: &str, cases: usize, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{what}: {} of {cases} checks failed; first ones:\n{}",
        failures.len(),
        failures.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
}

fn options(clock: &Arc<ManualClock>) -> LogOptions {
    LogOptions { clock: clock.clone(), background: false, ..LogOptions::default() }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A fresh copy of `golden`, as a crash would leave it (`clean`: as a clean
/// shutdown would, i.e. with the `clean-shutdown` marker).
fn copy_of(golden: &Path, clean: bool) -> TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(golden, tmp.path());
    let marker = tmp.path().join("clean-shutdown");
    if clean {
        assert!(marker.exists(), "the golden copy was closed cleanly");
    } else {
        fs::remove_file(&marker).unwrap();
    }
    tmp
}

fn partition_dir(data: &Path, topic: &str, partition: u32) -> PathBuf {
    data.join("topics").join(topic).join(partition.to_string())
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().ends_with(ext))
        .collect();
    out.sort();
    out
}

fn segment_logs(dir: &Path) -> Vec<PathBuf> {
    files_with_ext(dir, ".log")
}

fn base_of(path: &Path) -> u64 {
    path.file_name().unwrap().to_str().unwrap()[..20].parse().unwrap()
}

fn seg_file(dir: &Path, base: u64, ext: &str) -> PathBuf {
    dir.join(format!("{base:020}.{ext}"))
}

/// One batch of a segment file: byte range and offset range.
#[derive(Debug, Clone, Copy)]
struct BatchPos {
    start: u64,
    end: u64,
    base: u64,
    last: u64,
}

fn layout(path: &Path) -> Vec<BatchPos> {
    let bytes = fs::read(path).unwrap();
    let mut batches = Batches::new(&bytes);
    let mut out = Vec::new();
    let mut start = 0u64;
    for batch in &mut batches {
        let end = start + batch.size_bytes() as u64;
        out.push(BatchPos { start, end, base: batch.base_offset(), last: batch.last_offset() });
        start = end;
    }
    assert!(batches.error().is_none() && start == bytes.len() as u64, "golden segment {path:?} is valid");
    out
}

/// Every record from the low watermark up, in small fetches; asserts that
/// offsets strictly increase (no duplicates) and every fetch makes progress.
fn read_all(log: &Log, topic: &str, partition: u32) -> Vec<(u64, Record)> {
    let mut out: Vec<(u64, Record)> = Vec::new();
    let mut offset = log.low_watermark(topic, partition).unwrap();
    loop {
        let fetch = log.fetch(topic, partition, offset, 200).unwrap();
        if fetch.is_empty() {
            return out;
        }
        for r in fetch.records() {
            let previous = out.last().map(|x| x.0);
            assert!(previous.is_none_or(|o| o < r.offset), "offset {} served after {previous:?}", r.offset);
            out.push((r.offset, r.to_record()));
        }
        let next = fetch.next_offset();
        assert!(next > offset, "fetch makes progress");
        offset = next;
    }
}

/// A cleanly closed data directory and what was written to it.
struct Golden {
    tmp: TempDir,
    records: Vec<(u64, Record)>,
    clock: Arc<ManualClock>,
}

impl Golden {
    fn dir(&self) -> &Path {
        self.tmp.path()
    }
    fn records_below(&self, end: u64) -> Vec<(u64, Record)> {
        self.records.iter().filter(|(o, _)| *o < end).cloned().collect()
    }
}

/// Small records with jittered (not monotonic) timestamps, some with headers.
fn batch_records(i: u64) -> Vec<Record> {
    (0..(i % 3 + 1))
        .map(|j| {
            let ts = START_MS + i as i64 * 10 - ((i * 37) % 5) as i64 * 8 + j as i64;
            let mut r = Record::new(Some(format!("k{}", i % 7).as_bytes()), Some(format!("v{i}.{j}").as_bytes()), ts);
            if i.is_multiple_of(5) {
                r.headers.push(Header { key: "h".into(), value: Some(vec![i as u8]) });
            }
            r
        })
        .collect()
}

/// Partition [`PART`] of topic [`TOPIC`] with `closed` closed segments and
/// `tail` batches in the active one.
fn build_golden(closed: usize, tail: usize) -> Golden {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(START_MS));
    let log = Log::open(tmp.path(), options(&clock)).unwrap();
    let config = TopicConfig {
        partitions: 2,
        segment_bytes: 1024,
        index_interval_bytes: 150,
        retention_ms: None,
        ..TopicConfig::default()
    };
    log.create_topic(TOPIC, config).unwrap();
    log.append(TOPIC, 0, &[Record::new(Some(b"other"), Some(b"partition"), START_MS)]).unwrap();
    let mut records = Vec::new();
    let mut i = 0u64;
    let mut append = |log: &Log, records: &mut Vec<(u64, Record)>| {
        let batch = batch_records(i);
        let info = log.append(TOPIC, PART, &batch).unwrap();
        assert_eq!(info.base_offset, records.len() as u64);
        for r in batch {
            records.push((records.len() as u64, r));
        }
        i += 1;
    };
    while log.describe(TOPIC).unwrap()[PART as usize].segments < closed + 1 {
        append(&log, &mut records);
    }
    for _ in 0..tail {
        append(&log, &mut records);
    }
    assert_eq!(log.describe(TOPIC).unwrap()[PART as usize].segments, closed + 1, "the tail fits the active segment");
    log.close().unwrap();
    Golden { tmp, records, clock }
}

fn truncate_file(path: &Path, len: u64) {
    fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

fn flip_bit(path: &Path, position: u64, bit: u8) {
    let mut bytes = fs::read(path).unwrap();
    bytes[position as usize] ^= 1 << bit;
    fs::write(path, bytes).unwrap();
}

/// A crash can cut the active segment anywhere. For every length from the
/// end of the third-to-last batch to the full file, recovery must keep exactly
/// the whole batches before the cut, serve nothing partial and continue
/// appending at the right offset; with and without the clean-shutdown marker.
#[test]
fn truncated_active_segment_recovers_at_every_byte() {
    let golden = build_golden(3, 8);
    let pdir = partition_dir(golden.dir(), TOPIC, PART);
    let last_log = segment_logs(&pdir).pop().unwrap();
    let last_base = base_of(&last_log);
    let batches = layout(&last_log);
    assert!(batches.len() >= 3);
    let from = batches[batches.len() - 3].end;
    let file_len = fs::metadata(&last_log).unwrap().len();
    // With the marker, truncations past the last index entry must be caught
    // by the tail scan from that entry; make sure there are some.
    let index = fs::read(last_log.with_extension("index")).unwrap();
    let last_entry = u64::from(u32::from_be_bytes(index[index.len() - 4..].try_into().unwrap()));
    assert!(from <= last_entry && last_entry < file_len, "last index entry at {last_entry}");
    let mut failures = Vec::new();
    let mut cases = 0;
    for clean in [false, true] {
        for len in from..=file_len {
            cases += 1;
            let tmp = copy_of(golden.dir(), clean);
            let dir = partition_dir(tmp.path(), TOPIC, PART);
            let seg = seg_file(&dir, last_base, "log");
            truncate_file(&seg, len);
            let kept_end = batches.iter().take_while(|b| b.end <= len).last().map_or(0, |b| b.end);
            let high = batches.iter().take_while(|b| b.end <= len).last().map_or(last_base, |b| b.last + 1);
            let expected = golden.records_below(high);
            let case = format!("clean={clean} len={len}");

            let log = Log::open(tmp.path(), options(&golden.clock)).unwrap();
            let report = log.recovery_report();
            let reported = match report {
                [] => len == kept_end,
                [cut] => {
                    len > kept_end
                        && cut.reason == CutReason::TornTail
                        && (cut.position, cut.first_offset, cut.bytes) == (kept_end, high, len - kept_end)
                }
                _ => false,
            };
            check!(failures, reported, "{case}: recovery report {report:?}");
            check!(
                failures,
                log.high_watermark(TOPIC, PART).unwrap() == high,
                "{case}: high watermark {} != {high}",
                log.high_watermark(TOPIC, PART).unwrap()
            );
            let got = read_all(&log, TOPIC, PART);
            check!(failures, got == expected, "{case}: read {} records, expected {}", got.len(), expected.len());
            check!(
                failures,
                fs::metadata(&seg).unwrap().len() == kept_end,
                "{case}: torn tail not cut: file is {} bytes, expected {kept_end}",
                fs::metadata(&seg).unwrap().len()
            );
            // Every offset of the active segment reads from exactly there.
            for offset in last_base..high {
                let fetch = log.fetch(TOPIC, PART, offset, 1).unwrap();
                let first = fetch.records().next().map(|r| (r.offset, r.to_record()));
                check!(
                    failures,
                    first.as_ref() == golden.records.get(offset as usize),
                    "{case}: fetch({offset}) starts at {:?}",
                    first.map(|f| f.0)
                );
            }
            check!(
                failures,
                log.fetch(TOPIC, PART, high, 1000).unwrap().is_empty(),
                "{case}: data served at the high watermark"
            );
            check!(
                failures,
                matches!(log.fetch(TOPIC, PART, high + 1, 1000), Err(Error::OffsetOutOfRange { .. })),
                "{case}: offset past the high watermark is not out of range"
            );

            let new = Record::new(Some(b"new"), Some(format!("after {len}").as_bytes()), START_MS + 7);
            let info = log.append(TOPIC, PART, std::slice::from_ref(&new)).unwrap();
            check!(
                failures,
                info.base_offset == high,
                "{case}: append got offset {} instead of {high}",
                info.base_offset
            );
            let fetch = log.fetch(TOPIC, PART, high, 1).unwrap();
            let back: Vec<_> = fetch.records().map(|r| (r.offset, r.to_record())).collect();
            check!(failures, back == vec![(high, new.clone())], "{case}: appended record reads back as {back:?}");
            drop(log);

            // What recovery left behind is itself a valid log, after a clean
            // shutdown or another crash (checked at some lengths only, for time).
            if clean || (len % 4 != 0 && !batches.iter().any(|b| b.end == len)) {
                continue;
            }
            if len % 8 == 0 {
                fs::remove_file(tmp.path().join("clean-shutdown")).unwrap();
            }
            let log = Log::open(tmp.path(), options(&golden.clock)).unwrap();
            let mut expected = expected;
            expected.push((high, new));
            check!(failures, read_all(&log, TOPIC, PART) == expected, "{case}: contents changed after a second reopen");
        }
    }
    assert_no_failures("truncation", cases, &failures);
}

/// Where a bit of a batch was flipped, relative to the batch start.
fn field_of(offset_in_batch: u64) -> &'static str {
    match offset_in_batch {
        0..8 => "base_offset",
        8..12 => "batch_length",
        12..16 => "partition_leader_epoch",
        16 => "magic",
        17..21 => "crc",
        21..61 => "header",
        _ => "records",
    }
}

/// Bit rot in the active segment. A damaged batch that is the last one
/// cannot be told from a torn write: recovery cuts it and reports the cut.
/// A damaged batch followed by a valid one is corruption of acknowledged
/// data: the open fails naming the file, byte and offset, and changes
/// nothing on disk; an open with [`Repair`] then cuts there and reports it.
#[test]
fn bit_flips_in_active_segment_are_cut_only_at_the_tail() {
    let golden = build_golden(2, 6);
    let pdir = partition_dir(golden.dir(), TOPIC, PART);
    let last_log = segment_logs(&pdir).pop().unwrap();
    let last_base = base_of(&last_log);
    let batches = layout(&last_log);
    let golden_high = golden.records.len() as u64;
    let mut failures = Vec::new();
    let mut cases = 0;
    let from = batches[batches.len() - 3].start;
    let to = batches.last().unwrap().end;
    let repair =
        LogOptions { repair: Repair::Topic { topic: TOPIC.into(), partition: Some(PART) }, ..options(&golden.clock) };
    for position in from..to {
        // One bit per byte, a different one from byte to byte; the header's
        // bytes (where one flip can change a length or an offset) get two.
        let in_header = batches.iter().any(|b| (b.start..b.start + 61).contains(&position));
        let bits: &[u8] = if in_header { &[0, 7] } else { &[0] };
        for bit in bits.iter().map(|b| ((position * 5 + u64::from(*b)) % 8) as u8) {
            cases += 1;
            let tmp = copy_of(golden.dir(), false);
            let seg = seg_file(&partition_dir(tmp.path(), TOPIC, PART), last_base, "log");
            flip_bit(&seg, position, bit);
            let damaged_at = batches.iter().position(|b| b.start <= position && position < b.end).unwrap();
            let damaged = batches[damaged_at];
            let field = field_of(position - damaged.start);
            let case = format!("byte {position} bit {bit} ({field} of batch at offset {})", damaged.base);
            // The base offset and the leader epoch are outside the CRC, as in
            // Kafka. No record depends on the leader epoch: the batch stays,
            // its records unchanged. A changed base offset breaks the active
            // segment's dense offsets and counts as damage like any other.
            let harmless = field == "partition_leader_epoch";
            let last = damaged_at + 1 == batches.len();
            let flipped = fs::read(&seg).unwrap();
            let log = if harmless || last {
                let log = Log::open(tmp.path(), options(&golden.clock)).unwrap();
                let report = log.recovery_report().to_vec();
                if harmless {
                    check!(failures, report.is_empty(), "{case}: harmless flip reported {report:?}");
                } else {
                    let ok = matches!(
                        report.as_slice(),
                        [cut] if cut.reason == CutReason::TornTail && cut.path == seg && cut.partition == PART
                            && cut.topic == TOPIC && cut.position == damaged.start && cut.first_offset == damaged.base
                            && cut.bytes == damaged.end - damaged.start
                    );
                    check!(failures, ok, "{case}: torn-tail report {report:?}");
                }
                log
            } else {
                match Log::open(tmp.path(), options(&golden.clock)) {
                    Ok(_) => {
                        failures.push(format!("{case}: corruption before a valid batch was accepted"));
                        continue;
                    }
                    Err(Error::CorruptSegment {
                        topic,
                        partition,
                        path,
                        position: at,
                        offset,
                        next_valid_offset,
                        next_valid_position,
                        ..
                    }) => {
                        let next = batches[damaged_at + 1];
                        check!(
                            failures,
                            topic == TOPIC
                                && partition == PART
                                && path == seg
                                && at == damaged.start
                                && offset == damaged.base
                                && next_valid_offset == next.base
                                && next_valid_position == next.start,
                            "{case}: error names {topic}/{partition} {path:?} byte {at} offset {offset}, next valid \
                             {next_valid_offset} at {next_valid_position}"
                        );
                    }
                    Err(other) => {
                        failures.push(format!("{case}: wrong error {other}"));
                        continue;
                    }
                }
                check!(failures, fs::read(&seg).unwrap() == flipped, "{case}: a failed open changed the segment");
                let log = Log::open(tmp.path(), repair.clone()).unwrap();
                let report = log.recovery_report().to_vec();
                let ok = matches!(
                    report.as_slice(),
                    [cut] if cut.path == seg && cut.position == damaged.start && cut.first_offset == damaged.base
                        && cut.bytes == to - damaged.start
                        && cut.reason == CutReason::Repair {
                            next_valid_offset: batches[damaged_at + 1].base,
                            next_valid_position: batches[damaged_at + 1].start,
                        }
                );
                check!(failures, ok, "{case}: repair report {report:?}");
                log
            };
            let (high, kept_end) = if harmless { (golden_high, to) } else { (damaged.base, damaged.start) };
            let got_high = log.high_watermark(TOPIC, PART).unwrap();
            let got = read_all(&log, TOPIC, PART);
            let len = fs::metadata(&seg).unwrap().len();
            check!(failures, got_high == high, "{case}: high watermark {got_high}, expected {high}");
            let expected = golden.records_below(high);
            check!(failures, got == expected, "{case}: read {} records, expected {}", got.len(), expected.len());
            check!(failures, len == kept_end, "{case}: segment is {len} bytes after recovery, expected {kept_end}");
            let info = log.append(TOPIC, PART, &[Record::new(Some(b"n"), Some(b"new"), START_MS)]).unwrap();
            check!(
                failures,
                info.base_offset == got_high,
                "{case}: append at {} with high watermark {got_high}",
                info.base_offset
            );
            drop(log);
            let log = Log::open(tmp.path(), options(&golden.clock)).unwrap();
            check!(failures, log.recovery_report().is_empty(), "{case}: a second open cut again");
        }
    }
    assert_no_failures("active segment bit flips", cases, &failures);
}

/// A torn write, whatever it left at the end of the active segment (part of
/// a batch, zeros from a file extended but not written, garbage), is cut
/// and reported as a torn tail, and the partition takes appends again.
#[test]
fn torn_tails_are_cut_and_reported() {
    let golden = build_golden(1, 4);
    let pdir = partition_dir(golden.dir(), TOPIC, PART);
    let last_log = segment_logs(&pdir).pop().unwrap();
    let last_base = base_of(&last_log);
    let batches = layout(&last_log);
    let last = *batches.last().unwrap();
    let end = last.end;
    // (name, what to do to the segment, where the valid prefix ends, first offset cut)
    let cases: Vec<(&str, Damage, u64, u64)> = vec![
        (
            "half of the last batch",
            Box::new(move |p: &Path| truncate_file(p, last.start + (last.end - last.start) / 2)),
            last.start,
            last.base,
        ),
        (
            "the last batch's header only",
            Box::new(move |p: &Path| truncate_file(p, last.start + 20)),
            last.start,
            last.base,
        ),
        ("4 KiB of zeros", Box::new(|p: &Path| append_bytes(p, &[0; 4096])), end, last.last + 1),
        ("seeded garbage", Box::new(|p: &Path| append_bytes(p, &garbage(3000, 42))), end, last.last + 1),
        (
            "a header promising more than the file holds",
            Box::new(|p: &Path| append_bytes(p, &fake_header(1 << 20))),
            end,
            last.last + 1,
        ),
    ];
    for (name, damage, kept, first_offset) in cases {
        let tmp = copy_of(golden.dir(), false);
        let seg = seg_file(&partition_dir(tmp.path(), TOPIC, PART), last_base, "log");
        damage(&seg);
        let damaged_len = fs::metadata(&seg).unwrap().len();
        let log = Log::open(tmp.path(), options(&golden.clock)).unwrap();
        let report = log.recovery_report().to_vec();
        assert_eq!(report.len(), 1, "{name}: {report:?}");
        let cut = &report[0];
        assert_eq!((cut.topic.as_str(), cut.partition, cut.path.as_path()), (TOPIC, PART, seg.as_path()), "{name}");
        assert_eq!((cut.position, cut.first_offset, cut.bytes), (kept, first_offset, damaged_len - kept), "{name}");
        assert_eq!(cut.reason, CutReason::TornTail, "{name}");
        assert!(cut.to_string().contains("torn tail") && cut.to_string().contains(&seg.display().to_string()), "{cut}");
        assert_eq!(fs::metadata(&seg).unwrap().len(), kept, "{name}: file cut at the valid prefix");
        assert_eq!(log.high_watermark(TOPIC, PART).unwrap(), first_offset, "{name}");
        assert_eq!(read_all(&log, TOPIC, PART), golden.records_below(first_offset), "{name}");
        let info = log.append(TOPIC, PART, &[Record::new(Some(b"n"), Some(b"after"), START_MS)]).unwrap();
        assert_eq!(info.base_offset, first_offset, "{name}: offsets continue at the cut");
        drop(log);
        let log = Log::open(tmp.path(), options(&golden.clock)).unwrap();
        assert!(log.recovery_report().is_empty(), "{name}: nothing left to cut");
        assert_eq!(log.high_watermark(TOPIC, PART).unwrap(), first_offset + 1, "{name}");
    }
}

/// Corruption of a middle batch of the active segment of a log that was not
/// closed (the open validates the whole segment): the open fails and the
/// directory stays byte for byte as it was (segment and indexes); [`Repair`]
/// of another partition does not help; repair of this one cuts and reports,
/// and appends continue. After a clean close the open trusts the index and
/// validates only the segment's end, so damage before it is found by reads
/// (and reported, never served), as in a closed segment; nothing is cut.
#[test]
fn corrupt_middle_batch_fails_the_open_until_repaired() {
    let golden = build_golden(1, 5);
    let pdir = partition_dir(golden.dir(), TOPIC, PART);
    let last_log = segment_logs(&pdir).pop().unwrap();
    let last_base = base_of(&last_log);
    let batches = layout(&last_log);
    let victim = batches[1];
    let index = fs::read(last_log.with_extension("index")).unwrap();
    let last_entry = u64::from(u32::from_be_bytes(index[index.len() - 4..].try_into().unwrap()));
    assert!(victim.end <= last_entry, "the victim lies before the last index entry ({last_entry})");

    let tmp = copy_of(golden.dir(), true);
    let seg = seg_file(&partition_dir(tmp.path(), TOPIC, PART), last_base, "log");
    flip_bit(&seg, victim.start + 70, 3);
    let flipped = fs::read(&seg).unwrap();
    let log = Log::open(tmp.path(), options(&golden.clock)).unwrap();
    assert!(log.recovery_report().is_empty());
    assert!(
        matches!(log.fetch(TOPIC, PART, victim.base, 1), Err(Error::CorruptBatch { offset, .. }) if offset == victim.base)
    );
    drop(log);
    assert_eq!(fs::read(&seg).unwrap(), flipped, "nothing cut after a clean close");

    let tmp = copy_of(golden.dir(), false);
    let dir = partition_dir(tmp.path(), TOPIC, PART);
    let seg = seg_file(&dir, last_base, "log");
    flip_bit(&seg, victim.start + 70, 3); // a record byte: CRC mismatch
    let snapshot = |dir: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        files_with_ext(dir, "").into_iter().map(|p| (p.clone(), fs::read(&p).unwrap())).collect()
    };
    let before = snapshot(&dir);
    let error = Log::open(tmp.path(), options(&golden.clock)).unwrap_err();
    let message = error.to_string();
    match &error {
        Error::CorruptSegment { topic, partition, path, position, offset, .. } => {
            assert_eq!(
                (topic.as_str(), *partition, path, *position, *offset),
                (TOPIC, PART, &seg, victim.start, victim.base)
            );
        }
        other => panic!("wrong error: {other}"),
    }
    for needle in
        [seg.display().to_string(), format!("byte {}", victim.start), format!("offset {}", victim.base), "t/1".into()]
    {
        assert!(message.contains(&needle), "'{needle}' missing from: {message}");
    }
    assert_eq!(snapshot(&dir), before, "a failed open changes nothing");
    let other_partition =
        LogOptions { repair: Repair::Topic { topic: TOPIC.into(), partition: Some(0) }, ..options(&golden.clock) };
    assert!(matches!(Log::open(tmp.path(), other_partition), Err(Error::CorruptSegment { .. })));
    assert_eq!(snapshot(&dir), before, "repair of another partition changes nothing here");

    let log = Log::open(tmp.path(), LogOptions { repair: Repair::All, ..options(&golden.clock) }).unwrap();
    let report = log.recovery_report().to_vec();
    assert_eq!(report.len(), 1, "{report:?}");
    assert_eq!((report[0].position, report[0].first_offset), (victim.start, victim.base));
    assert_eq!(report[0].bytes, batches.last().unwrap().end - victim.start);
    assert_eq!(
        report[0].reason,
        CutReason::Repair { next_valid_offset: batches[2].base, next_valid_position: batches[2].start }
    );
    assert!(matches!(report[0].error, millpond_log::batch::BatchError::BadCrc { .. }), "{:?}", report[0].error);
    assert_eq!(fs::metadata(&seg).unwrap().len(), victim.start);
    assert_eq!(read_all(&log, TOPIC, PART), golden.records_below(victim.base));
    assert_eq!(
        log.append(TOPIC, PART, &[Record::new(Some(b"k"), Some(b"v"), START_MS)]).unwrap().base_offset,
        victim.base
    );
}

/// Something done to a segment file.
type Damage = Box<dyn Fn(&Path)>;

fn append_bytes(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    fs::OpenOptions::new().append(true).open(path).unwrap().write_all(bytes).unwrap();
}

/// A plausible batch header (magic 2) whose length runs past the end of file.
fn fake_header(length: i32) -> Vec<u8> {
    let mut header = vec![0u8; 61];
    header[8..12].copy_from_slice(&length.to_be_bytes());
    header[16] = 2;
    header
}

/// Bit rot in a closed segment: the batch stays on disk and every fetch
/// that reaches it reports [`Error::CorruptBatch`] naming the partition and
/// the batch's offset; earlier offsets read fine and no record of the damaged
/// batch is ever served.
#[test]
fn bit_flip_in_closed_segment_is_reported_not_served() {
    let golden = build_golden(3, 2);
    let pdir = partition_dir(golden.dir(), TOPIC, PART);
    let logs = segment_logs(&pdir);
    let closed = &logs[1];
    let closed_base = base_of(closed);
    let batches = layout(closed);
    let index = fs::read(closed.with_extension("index")).unwrap();
    let last_entry = u64::from(u32::from_be_bytes(index[index.len() - 4..].try_into().unwrap()));
    // One batch the trusted index covers and the last one, which the tail
    // scan at open validates.
    let covered = *batches.iter().rev().find(|b| b.end <= last_entry && b.start > 0).unwrap();
    let tail = *batches.last().unwrap();
    assert!(tail.start >= last_entry);
    let golden_high = golden.records.len() as u64;
    let mut failures = Vec::new();
    let mut cases = 0;
    for damaged in [covered, tail] {
        // Every byte, the base offset too: it is outside the CRC (as in
        // Kafka), but it breaks the segment's dense offsets.
        for position in damaged.start..damaged.end {
            // The marker only matters to the active segment; alternate it.
            let clean = position.is_multiple_of(2);
            cases += 1;
            let bit = ((position * 3) % 8) as u8;
            let field = field_of(position - damaged.start);
            let case = format!("clean={clean} byte {position} bit {bit} ({field} of batch at offset {})", damaged.base);
            let tmp = copy_of(golden.dir(), clean);
            flip_bit(&seg_file(&partition_dir(tmp.path(), TOPIC, PART), closed_base, "log"), position, bit);
            let log = Log::open(tmp.path(), options(&golden.clock)).unwrap();
            check!(failures, log.high_watermark(TOPIC, PART).unwrap() == golden_high, "{case}: high watermark moved");
            let undetectable = field == "partition_leader_epoch";
            // Every fetch either serves correct records outside the
            // damaged batch or reports that batch.
            for offset in 0..golden_high {
                for max_bytes in [1, 100_000] {
                    match log.fetch(TOPIC, PART, offset, max_bytes) {
                        Ok(fetch) => {
                            let records: Vec<_> = fetch.records().map(|r| (r.offset, r.to_record())).collect();
                            for (o, r) in &records {
                                check!(
                                    failures,
                                    golden.records.get(*o as usize) == Some(&(*o, r.clone())),
                                    "{case}: fetch({offset}) served a wrong record at {o}"
                                );
                                check!(
                                    failures,
                                    undetectable || !(damaged.base..=damaged.last).contains(o),
                                    "{case}: fetch({offset}) served record {o} of the damaged batch"
                                );
                            }
                            let must_fail = (damaged.base..=damaged.last).contains(&offset) && !undetectable;
                            check!(
                                failures,
                                !must_fail,
                                "{case}: fetch({offset}, {max_bytes}) succeeded with {:?}",
                                records.iter().map(|r| r.0).collect::<Vec<_>>()
                            );
                            let must_start_here = offset < damaged.base || undetectable || offset > tail.last;
                            check!(
                                failures,
                                !must_start_here || records.first().map(|r| r.0) == Some(offset),
                                "{case}: fetch({offset}, {max_bytes}) starts at {:?}",
                                records.first().map(|r| r.0)
                            );
                        }
                        Err(Error::CorruptBatch { topic, partition, offset: at, .. }) => {
                            check!(failures, !undetectable, "{case}: fetch({offset}) failed");
                            check!(
                                failures,
                                topic == TOPIC && partition == PART && at == damaged.base,
                                "{case}: fetch({offset}) names {topic}/{partition} at {at}"
                            );
                            check!(
                                failures,
                                offset >= damaged.base && offset <= tail.last,
                                "{case}: fetch({offset}) outside the damaged segment part failed"
                            );
                        }
                        Err(error) => failures.push(format!("{case}: fetch({offset}) failed with {error}")),
                    }
                }
            }
            if !undetectable {
                let message = match log.fetch(TOPIC, PART, damaged.base, 1000) {
                    Ok(_) => String::new(),
                    Err(error) => error.to_string(),
                };
                check!(
                    failures,
                    message.contains(&format!("{TOPIC}/{PART}"))
                        && message.contains(&format!("offset {}", damaged.base)),
                    "{case}: message {message:?}"
                );
            }
            let info = log.append(TOPIC, PART, &[Record::new(Some(b"n"), Some(b"new"), START_MS)]).unwrap();
            check!(failures, info.base_offset == golden_high, "{case}: append at {}", info.base_offset);
        }
    }
    assert_no_failures("closed segment bit flips", cases, &failures);
}

/// A small deterministic generator for garbage bytes.
fn garbage(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// Ways to damage one index file (given its entry size).
const INDEX_DAMAGE: &[&str] = &[
    "delete",
    "empty",
    "truncate-1",
    "truncate-odd",
    "drop-last-entry",
    "garbage-same-length",
    "garbage-one-entry",
    "all-ff",
    "extra-bad-entry",
];

fn damage_index(path: &Path, entry: usize, how: &str, seed: u64) {
    let bytes = fs::read(path).unwrap();
    let len = bytes.len();
    match how {
        "delete" => fs::remove_file(path).unwrap(),
        "empty" => fs::write(path, b"").unwrap(),
        "truncate-1" => fs::write(path, &bytes[..len.saturating_sub(1)]).unwrap(),
        "truncate-odd" => fs::write(path, &bytes[..len.min(entry + 3)]).unwrap(),
        "drop-last-entry" => fs::write(path, &bytes[..len.saturating_sub(entry)]).unwrap(),
        "garbage-same-length" => fs::write(path, garbage(len.max(2 * entry), seed)).unwrap(),
        "garbage-one-entry" => fs::write(path, garbage(entry, seed)).unwrap(),
        "all-ff" => fs::write(path, vec![0xff; len.max(entry)]).unwrap(),
        "extra-bad-entry" => {
            // An entry past every other one, pointing into the middle of a batch.
            let mut bytes = bytes;
            let mut extra = vec![0u8; entry];
            extra[entry - 4..].copy_from_slice(&0x00ff_ffffu32.to_be_bytes());
            if entry == 8 {
                extra[..4].copy_from_slice(&0x00ff_ffffu32.to_be_bytes());
                extra[4..].copy_from_slice(&1000u32.to_be_bytes());
            } else {
                extra[..8].copy_from_slice(&(START_MS + 100_000).to_be_bytes());
            }
            bytes.extend_from_slice(&extra);
            fs::write(path, bytes).unwrap();
        }
        other => unreachable!("{other}"),
    }
}

/// Index files are a cache: deleted, truncated or garbage index files of
/// closed and active segments are rebuilt on open, with or without the
/// clean-shutdown marker; every offset still reads from exactly there and
/// `offset_for_time` answers do not change.
#[test]
fn damaged_index_files_are_rebuilt() {
    let golden = build_golden(3, 8);
    let pdir = partition_dir(golden.dir(), TOPIC, PART);
    let bases: Vec<u64> = segment_logs(&pdir).iter().map(|p| base_of(p)).collect();
    let high = golden.records.len() as u64;
    let times: Vec<i64> = (START_MS - 40..=START_MS + 700).collect();
    // Answers before any damage, checked against the definition.
    let before: Vec<u64> = {
        let tmp = copy_of(golden.dir(), true);
        let log = Log::open(tmp.path(), options(&golden.clock)).unwrap();
        times.iter().map(|&t| log.offset_for_time(TOPIC, PART, t).unwrap()).collect()
    };
    for (t, answer) in times.iter().zip(&before) {
        let brute = golden.records.iter().find(|(_, r)| r.timestamp_ms >= *t).map_or(high, |(o, _)| *o);
        assert_eq!(*answer, brute, "offset_for_time({t}) on the undamaged log");
    }
    let golden_index: BTreeMap<PathBuf, Vec<u8>> = files_with_ext(&pdir, "index")
        .into_iter()
        .chain(files_with_ext(&pdir, "timeindex"))
        .map(|p| (p.file_name().unwrap().into(), fs::read(&p).unwrap()))
        .collect();
    assert!(golden_index.values().all(|b| b.len() >= 24), "every segment has a few index entries");

    let targets: [(&str, Vec<u64>); 3] =
        [("closed", vec![bases[1]]), ("active", vec![*bases.last().unwrap()]), ("all", bases.clone())];
    let mut failures = Vec::new();
    let mut cases = 0;
    for (target, segments) in &targets {
        for kinds in [&["index"][..], &["timeindex"], &["index", "timeindex"]] {
            for how in INDEX_DAMAGE {
                for clean in [false, true] {
                    cases += 1;
                    let case = format!("{how} {kinds:?} of {target} segment(s), clean={clean}");
                    let tmp = copy_of(golden.dir(), clean);
                    let dir = partition_dir(tmp.path(), TOPIC, PART);
                    for &base in segments {
                        for kind in kinds {
                            let entry = if *kind == "index" { 8 } else { 12 };
                            damage_index(&seg_file(&dir, base, kind), entry, how, base + cases as u64);
                        }
                    }
                    let log = Log::open(tmp.path(), options(&golden.clock)).unwrap();
                    check!(
                        failures,
                        log.high_watermark(TOPIC, PART).unwrap() == high,
                        "{case}: high watermark changed"
                    );
                    for offset in 0..high {
                        let fetch = log.fetch(TOPIC, PART, offset, 1).unwrap();
                        let first = fetch.batches().next().map(|b| (b.base_offset(), b.last_offset()));
                        check!(
                            failures,
                            first.is_some_and(|(b, l)| b <= offset && offset <= l),
                            "{case}: fetch({offset}) starts with batch {first:?}"
                        );
                        let record = fetch.records().next().map(|r| (r.offset, r.to_record()));
                        check!(
                            failures,
                            record.as_ref() == golden.records.get(offset as usize),
                            "{case}: fetch({offset}) starts with record {:?}",
                            record.map(|r| r.0)
                        );
                    }
                    for (t, answer) in times.iter().zip(&before) {
                        let got = log.offset_for_time(TOPIC, PART, *t).unwrap();
                        check!(failures, got == *answer, "{case}: offset_for_time({t}) = {got}, was {answer}");
                    }
                    log.close().unwrap();
                    for (name, bytes) in &golden_index {
                        let now = fs::read(dir.join(name)).unwrap_or_default();
                        check!(
                            failures,
                            &now == bytes,
                            "{case}: {name:?} rebuilt as {} bytes, was {} bytes",
                            now.len(),
                            bytes.len()
                        );
                    }
                }
            }
        }
    }
    assert_no_failures("index damage", cases, &failures);
}

/// A compacted topic whose closed segments are small (rolled by time), so the
/// cleaner merges several segments into one.
struct Compacted {
    /// Cleanly closed before compaction.
    before: Golden,
    /// A copy of `before`, compacted once and closed.
    after: TempDir,
}

fn build_compacted() -> Compacted {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(START_MS));
    let log = Log::open(tmp.path(), options(&clock)).unwrap();
    let config = TopicConfig {
        partitions: 2,
        segment_bytes: 1024,
        segment_ms: 1_000,
        index_interval_bytes: 100,
        cleanup_policy: CleanupPolicy::Compact,
        delete_retention_ms: 1 << 40,
        retention_ms: None,
        ..TopicConfig::default()
    };
    log.create_topic(TOPIC, config).unwrap();
    let mut records = Vec::new();
    for i in 0..60u64 {
        let batch: Vec<Record> = (0..(i % 2 + 1))
            .map(|j| {
                let key = format!("k{}", (i * 3 + j) % 7);
                let value = (i % 11 != 5).then(|| format!("v{i}.{j}"));
                Record::new(Some(key.as_bytes()), value.as_deref().map(str::as_bytes), clock.now_ms())
            })
            .collect();
        let info = log.append(TOPIC, PART, &batch).unwrap();
        assert_eq!(info.base_offset, records.len() as u64);
        for r in batch {
            records.push((records.len() as u64, r));
        }
        clock.advance_ms(300);
    }
    log.close().unwrap();
    let after = tempfile::tempdir().unwrap();
    copy_dir(tmp.path(), after.path());
    let log = Log::open(after.path(), options(&clock)).unwrap();
    let stats = log.compact().unwrap();
    assert!(stats.records_removed > 0 && stats.segments_rewritten > 2, "{stats:?}");
    log.close().unwrap();
    Compacted { before: Golden { tmp, records, clock }, after }
}

fn latest_per_key(records: &[(u64, Record)]) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    records.iter().map(|(_, r)| (r.key.clone().unwrap(), r.value.clone())).collect()
}

/// The cleaner's swap is crash-atomic. Every state a crash can leave
/// between writing `FIRST.log.cleaned` and renaming `FIRST-END.swap` to
/// `FIRST.log` is built by hand: before the commit point the old segments are
/// served, after it the swap is completed; either way the latest value per key
/// is right, offsets are preserved and none is served twice.
#[test]
fn cleaner_swap_survives_a_crash_at_every_step() {
    let compacted = build_compacted();
    let golden = &compacted.before;
    let expected_latest = latest_per_key(&golden.records);
    let before_dir = partition_dir(golden.dir(), TOPIC, PART);
    let after_dir = partition_dir(compacted.after.path(), TOPIC, PART);
    let before_bases: Vec<u64> = segment_logs(&before_dir).iter().map(|p| base_of(p)).collect();
    let after_bases: Vec<u64> = segment_logs(&after_dir).iter().map(|p| base_of(p)).collect();
    // The first cleaned group of several segments: [first, end).
    let (first, end, group) = after_bases
        .windows(2)
        .map(|w| (w[0], w[1], before_bases.iter().copied().filter(|b| (w[0]..w[1]).contains(b)).collect::<Vec<_>>()))
        .find(|(_, _, group)| group.len() >= 2)
        .expect("the cleaner merged several segments");
    let cleaned = fs::read(seg_file(&after_dir, first, "log")).unwrap();
    assert_ne!(cleaned, fs::read(seg_file(&before_dir, first, "log")).unwrap());
    let after_records = {
        let tmp = copy_of(compacted.after.path(), true);
        let log = Log::open(tmp.path(), options(&golden.clock)).unwrap();
        read_all(&log, TOPIC, PART)
    };
    // Old segments outside the group, the cleaned output inside it.
    let swapped: Vec<(u64, Record)> = golden
        .records
        .iter()
        .filter(|(o, _)| !(first..end).contains(o))
        .chain(after_records.iter().filter(|(o, _)| (first..end).contains(o)))
        .cloned()
        .collect::<BTreeMap<u64, Record>>()
        .into_iter()
        .collect();
    assert!(swapped.len() < golden.records.len());
    let swapped_bases: Vec<u64> =
        before_bases.iter().copied().filter(|b| *b == first || !(first..end).contains(b)).collect();
    // The cleaner deletes the group's files in this order, then renames the swap.
    let deletions: Vec<PathBuf> = group
        .iter()
        .flat_map(|&b| ["log", "index", "timeindex"].map(|ext| format!("{b:020}.{ext}")))
        .map(PathBuf::from)
        .collect();

    let mut states: Vec<(String, bool)> = vec![
        ("cleaned file, complete".into(), false),
        ("cleaned file, half written".into(), false),
        ("cleaned file, empty".into(), false),
    ];
    states.extend((0..=deletions.len()).map(|n| (format!("swap file, {n} old files deleted"), true)));
    states.push(("swap renamed".into(), true));

    let mut failures = Vec::new();
    let mut cases = 0;
    for (state, committed) in &states {
        for clean in [false, true] {
            cases += 1;
            let case = format!("{state}, clean={clean}");
            let tmp = copy_of(golden.dir(), clean);
            let dir = partition_dir(tmp.path(), TOPIC, PART);
            let swap = dir.join(format!("{first:020}-{end:020}.swap"));
            if let Some(n) = state.strip_prefix("swap file, ").and_then(|s| s.split(' ').next()) {
                fs::write(&swap, &cleaned).unwrap();
                for name in &deletions[..n.parse::<usize>().unwrap()] {
                    fs::remove_file(dir.join(name)).unwrap();
                }
            } else if state == "swap renamed" {
                for name in &deletions {
                    fs::remove_file(dir.join(name)).unwrap();
                }
                fs::write(seg_file(&dir, first, "log"), &cleaned).unwrap();
            } else {
                let len = match state.as_str() {
                    "cleaned file, complete" => cleaned.len(),
                    "cleaned file, half written" => cleaned.len() / 2,
                    _ => 0,
                };
                fs::write(dir.join(format!("{first:020}.log.cleaned")), &cleaned[..len]).unwrap();
            }
            let log = match Log::open(tmp.path(), options(&golden.clock)) {
                Ok(log) => log,
                Err(error) => {
                    failures.push(format!("{case}: open failed: {error}"));
                    continue;
                }
            };
            let expected = if *committed { &swapped } else { &golden.records };
            let got = read_all(&log, TOPIC, PART);
            check!(
                failures,
                &got == expected,
                "{case}: read offsets {:?}",
                got.iter().map(|r| r.0).collect::<Vec<_>>()
            );
            check!(failures, latest_per_key(&got) == expected_latest, "{case}: latest values differ");
            let leftovers: Vec<_> = fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n.ends_with(".swap") || n.ends_with(".cleaned"))
                .collect();
            check!(failures, leftovers.is_empty(), "{case}: left over {leftovers:?}");
            let bases: Vec<u64> = segment_logs(&dir).iter().map(|p| base_of(p)).collect();
            let expected_bases = if *committed { &swapped_bases } else { &before_bases };
            check!(failures, &bases == expected_bases, "{case}: segments {bases:?}, expected {expected_bases:?}");
            if *committed {
                check!(
                    failures,
                    fs::read(seg_file(&dir, first, "log")).unwrap() == cleaned,
                    "{case}: the swapped segment differs from the cleaner's output"
                );
            }
            // The recovered partition keeps working: compaction and appends.
            log.compact().unwrap();
            let high = log.high_watermark(TOPIC, PART).unwrap();
            check!(failures, high == golden.records.len() as u64, "{case}: high watermark {high}");
            let info = log.append(TOPIC, PART, &[Record::new(Some(b"k1"), Some(b"last"), START_MS)]).unwrap();
            check!(failures, info.base_offset == high, "{case}: append at {}", info.base_offset);
            drop(log);
            let log = Log::open(tmp.path(), options(&golden.clock)).unwrap();
            let got = read_all(&log, TOPIC, PART);
            let mut latest = expected_latest.clone();
            latest.insert(b"k1".to_vec(), Some(b"last".to_vec()));
            check!(
                failures,
                latest_per_key(&got) == latest,
                "{case}: latest values differ after compaction and reopen"
            );
            for (offset, record) in &got {
                check!(
                    failures,
                    *offset == high || golden.records.get(*offset as usize) == Some(&(*offset, record.clone())),
                    "{case}: offset {offset} changed"
                );
            }
        }
    }
    assert_no_failures("cleaner crash states", cases, &failures);
}

/// Leftovers: index files without a `.log` are removed, and unfinished
/// topic directories (`.tmp-NAME`, `.deleted-NAME-…`) disappear on open.
#[test]
fn orphans_and_unfinished_topic_directories_are_removed() {
    let golden = build_golden(2, 3);
    for clean in [false, true] {
        let tmp = copy_of(golden.dir(), clean);
        let dir = partition_dir(tmp.path(), TOPIC, PART);
        let bases: Vec<u64> = segment_logs(&dir).iter().map(|p| base_of(p)).collect();
        let orphans = [
            seg_file(&dir, 5, "index"),
            seg_file(&dir, 5, "timeindex"),
            seg_file(&dir, 99_999, "index"),
            seg_file(&dir, 99_999, "timeindex"),
            seg_file(&partition_dir(tmp.path(), TOPIC, 0), 7, "index"),
        ];
        for orphan in &orphans {
            fs::write(orphan, garbage(24, 3)).unwrap();
        }
        let topics = tmp.path().join("topics");
        for unfinished in [".tmp-half", ".deleted-gone-1234567"] {
            copy_dir(&topics.join(TOPIC), &topics.join(unfinished));
        }
        fs::create_dir_all(topics.join(".tmp-empty")).unwrap();
        let log = Log::open(tmp.path(), options(&golden.clock)).unwrap();
        for orphan in &orphans {
            assert!(!orphan.exists(), "clean={clean}: {orphan:?} survived");
        }
        let mut left: Vec<String> =
            fs::read_dir(&topics).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["__consumer_offsets", TOPIC], "clean={clean}");
        assert_eq!(log.topics(), ["__consumer_offsets", TOPIC]);
        assert_eq!(segment_logs(&dir).iter().map(|p| base_of(p)).collect::<Vec<_>>(), bases);
        for base in &bases {
            assert!(seg_file(&dir, *base, "index").exists() && seg_file(&dir, *base, "timeindex").exists());
        }
        assert_eq!(read_all(&log, TOPIC, PART), golden.records, "clean={clean}");
        log.create_topic("half", TopicConfig::default()).unwrap();
        assert!(read_all(&log, "half", 0).is_empty());
    }
}
