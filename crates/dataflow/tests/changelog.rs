//! The view readers (`read_view`, `Subscription`, `list_views`) against
//! changelogs and checkpoints written by hand: well-formed ones read back
//! exactly, bad ones are errors that name what is wrong (never a panic, never
//! a wrong stream), and nothing past the committed end offset is ever read.
//!
//! No job runs here: each test writes the topic `view.v` with
//! `millpond_log::Log` and publishes `checkpoint.json` itself, in the format
//! of docs/checkpoints.md.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::Duration;

use millpond_dataflow::{
    CheckpointMeta, Error, Event, RawEvent, Subscription, TailEvent, ViewInfo, list_views, read_view, read_view_at,
};
use millpond_log::{FlushPolicy, Header, Log, LogOptions, Record, TopicConfig};
use proptest::collection::vec;
use proptest::prelude::*;
use serde_json::{Value, json};

const VIEW: &str = "v";
const TOPIC: &str = "view.v";

fn be(n: i64) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

/// A record of the changelog format: the row as JSON, the count after the
/// epoch (a tombstone for 0), and the epoch and diff headers.
fn change(row: &Value, count: i64, epoch: i64, diff: i64) -> Record {
    Record {
        key: Some(row.to_string().into_bytes()),
        value: (count != 0).then(|| be(count)),
        timestamp_ms: 0,
        headers: vec![header("epoch", Some(be(epoch))), header("diff", Some(be(diff)))],
    }
}

fn header(key: &str, value: Option<Vec<u8>>) -> Header {
    Header { key: key.to_owned(), value }
}

fn row(k: &str) -> Value {
    json!({"k": k})
}

fn open_log(dir: &Path) -> Log {
    Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap()
}

/// A data directory with an empty `view.v` (one partition, kept forever).
fn data_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let config = TopicConfig {
        partitions: 1,
        retention_ms: None,
        // Synced by close, not per append: the proptest creates many.
        flush: FlushPolicy::Interval { interval_ms: 60_000, records: u64::MAX },
        ..TopicConfig::default()
    };
    log.create_topic(TOPIC, config).unwrap();
    log.close().unwrap();
    dir
}

/// Appends each batch with one append call; returns the topic's end offset.
fn append(dir: &Path, batches: &[Vec<Record>]) -> u64 {
    let log = open_log(dir);
    for batch in batches.iter().filter(|b| !b.is_empty()) {
        log.append(TOPIC, 0, batch).unwrap();
    }
    let end = log.high_watermark(TOPIC, 0).unwrap();
    log.close().unwrap();
    end
}

fn meta(epoch: u64, end_offset: u64) -> CheckpointMeta {
    CheckpointMeta {
        version: millpond_dataflow::CHECKPOINT_VERSION,
        epoch,
        sources: Default::default(),
        sinks: BTreeMap::from([(TOPIC.to_owned(), end_offset)]),
        views: BTreeMap::from([(VIEW.to_owned(), TOPIC.to_owned())]),
        compactable: BTreeMap::new(),
        states: Default::default(),
        readers: Default::default(),
        // Rows not counted: these tests write changelogs by hand.
        changelogs: BTreeMap::from([(VIEW.to_owned(), millpond_dataflow::ViewChangelog::default())]),
        topic_ids: Default::default(),
        dead_letters: Default::default(),
    }
}

/// Publishes `checkpoint.json` as the job would: committed `epoch`, the
/// changelog committed up to `end_offset`.
fn publish(dir: &Path, epoch: u64, end_offset: u64) {
    write_checkpoint(dir, &serde_json::to_vec_pretty(&meta(epoch, end_offset)).unwrap());
}

fn write_checkpoint(dir: &Path, bytes: &[u8]) {
    let tmp = dir.join(".checkpoint.json.test");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, dir.join("checkpoint.json")).unwrap();
}

/// Every event queued or committed now (polls once when the queue is empty).
fn drain(subscription: &mut Subscription) -> Result<Vec<Event>, Error> {
    let mut events = Vec::new();
    while let Some(event) = subscription.next_timeout(Duration::ZERO)? {
        events.push(event);
        assert!(events.len() < 10_000, "a subscription over a few records never ends");
    }
    Ok(events)
}

fn changed(epoch: u64, diff: i64, row: Value) -> Event {
    Event::Change { epoch, diff, row }
}

fn progress(epoch: u64) -> Event {
    Event::Progress { epoch, progress: true }
}

fn sorted_rows(dir: &Path) -> (u64, Vec<(Value, i64)>) {
    let snapshot = read_view(dir, VIEW).unwrap();
    let mut rows = snapshot.rows;
    rows.sort_by_key(|(row, _)| row.to_string());
    (snapshot.epoch, rows)
}

/// The offset a `CorruptChangelog` names (panics on any other result).
fn corrupt_offset<T: std::fmt::Debug>(result: Result<T, Error>) -> u64 {
    match result {
        Err(Error::CorruptChangelog { view, offset, .. }) => {
            assert_eq!(view, VIEW);
            offset
        }
        other => panic!("expected CorruptChangelog, got {other:?}"),
    }
}

#[test]
fn well_formed_changes_read_back_with_tombstones() {
    let dir = data_dir();
    let dir = dir.path();
    let end = append(
        dir,
        &[
            vec![change(&row("a"), 1, 1, 1), change(&row("b"), 2, 1, 2)],
            // a goes away (a tombstone), c arrives.
            vec![change(&row("a"), 0, 2, -1), change(&row("c"), 1, 2, 1)],
            vec![change(&row("b"), 3, 3, 1)],
        ],
    );
    assert_eq!(end, 5);
    publish(dir, 3, end);

    assert_eq!(
        list_views(dir).unwrap(),
        [ViewInfo { name: VIEW.into(), changelog_topic: TOPIC.into(), epoch: 3, changelog_end_offset: 5 }]
    );
    assert_eq!(sorted_rows(dir), (3, vec![(row("b"), 3), (row("c"), 1)]));

    // A snapshot as of epoch 1, then every later change in epoch order.
    let mut subscription = Subscription::open(dir, VIEW, Some(1), true).unwrap();
    assert_eq!(subscription.as_of(), 1);
    assert_eq!(
        drain(&mut subscription).unwrap(),
        [
            changed(1, 1, row("a")),
            changed(1, 2, row("b")),
            progress(1),
            changed(2, -1, row("a")),
            changed(2, 1, row("c")),
            progress(2),
            changed(3, 1, row("b")),
            progress(3),
        ]
    );
    // As of epoch 2 (the tombstone applied), without the snapshot.
    let mut subscription = Subscription::open(dir, VIEW, Some(2), false).unwrap();
    assert_eq!(drain(&mut subscription).unwrap(), [changed(3, 1, row("b")), progress(3)]);
    let mut subscription = Subscription::open(dir, VIEW, Some(2), true).unwrap();
    assert_eq!(
        drain(&mut subscription).unwrap(),
        [changed(2, 2, row("b")), changed(2, 1, row("c")), progress(2), changed(3, 1, row("b")), progress(3)]
    );

    // A live subscription at the last epoch sees the next commit, and only once it is published.
    let mut subscription = Subscription::open(dir, VIEW, None, true).unwrap();
    assert_eq!(drain(&mut subscription).unwrap(), [changed(3, 3, row("b")), changed(3, 1, row("c")), progress(3)]);
    let end = append(dir, &[vec![change(&row("b"), 0, 4, -3), change(&row("d"), 1, 4, 1)]]);
    assert_eq!(drain(&mut subscription).unwrap(), []);
    publish(dir, 4, end);
    assert_eq!(drain(&mut subscription).unwrap(), [changed(4, -3, row("b")), changed(4, 1, row("d")), progress(4)]);
    // An epoch that did not change this view still completes.
    publish(dir, 6, end);
    assert_eq!(drain(&mut subscription).unwrap(), [progress(6)]);
    assert_eq!(sorted_rows(dir), (6, vec![(row("c"), 1), (row("d"), 1)]));
}

#[test]
fn an_empty_changelog_is_an_empty_view() {
    let dir = data_dir();
    let dir = dir.path();
    publish(dir, 2, 0);
    assert_eq!(sorted_rows(dir), (2, vec![]));
    let mut subscription = Subscription::open(dir, VIEW, None, true).unwrap();
    assert_eq!(drain(&mut subscription).unwrap(), [progress(2)]);
    // A view whose sink end offset is not in the checkpoint yet reads as empty too.
    let mut meta = meta(2, 0);
    meta.sinks.clear();
    write_checkpoint(dir, &serde_json::to_vec(&meta).unwrap());
    assert_eq!(sorted_rows(dir), (2, vec![]));
}

/// Bad records, each placed at offset 2 (after two good ones) at epoch 2.
fn bad_records() -> Vec<(&'static str, Record)> {
    let good = change(&row("x"), 1, 2, 1);
    let with_headers = |headers: Vec<Header>| Record { headers, ..good.clone() };
    vec![
        ("no headers", with_headers(vec![])),
        ("no epoch header", with_headers(vec![header("diff", Some(be(1)))])),
        ("no diff header", with_headers(vec![header("epoch", Some(be(2)))])),
        ("a 7-byte diff", with_headers(vec![header("epoch", Some(be(2))), header("diff", Some(vec![0; 7]))])),
        ("a 9-byte epoch", with_headers(vec![header("epoch", Some(vec![0; 9])), header("diff", Some(be(1)))])),
        ("an epoch header without a value", with_headers(vec![header("epoch", None), header("diff", Some(be(1)))])),
        // The first header of a name counts, even when a later one is good.
        (
            "a null epoch header before a good one",
            with_headers(vec![header("epoch", None), header("epoch", Some(be(2))), header("diff", Some(be(1)))]),
        ),
        (
            "a 7-byte diff header before a good one",
            with_headers(vec![
                header("epoch", Some(be(2))),
                header("diff", Some(vec![0; 7])),
                header("diff", Some(be(1))),
            ]),
        ),
        ("epoch 0", with_headers(vec![header("epoch", Some(be(0))), header("diff", Some(be(1)))])),
        ("a negative epoch", with_headers(vec![header("epoch", Some(be(-2))), header("diff", Some(be(1)))])),
        ("no key", Record { key: None, ..good.clone() }),
        ("a key that is not JSON", Record { key: Some(b"{\"k\": oops".to_vec()), ..good.clone() }),
        ("a key that is not UTF-8", Record { key: Some(vec![b'"', 0xff, 0xfe, b'"']), ..good.clone() }),
        // Valid syntax that a JSON tree refuses: caught where it is read.
        ("a key with a lone surrogate", Record { key: Some(br#"{"k":"\ud800"}"#.to_vec()), ..good.clone() }),
        ("a key with a number out of range", Record { key: Some(br#"{"k":1e400}"#.to_vec()), ..good.clone() }),
    ]
}

#[test]
fn a_malformed_record_is_a_corrupt_changelog_error_naming_its_offset() {
    let mut failures = Vec::new();
    for (case, bad) in bad_records() {
        let dir = data_dir();
        let dir = dir.path();
        let end = append(dir, &[vec![change(&row("a"), 1, 1, 1), change(&row("b"), 1, 1, 1)], vec![bad]]);
        // The snapshot path (read_view folds it), the change path (after an
        // older --as-of), and the poll path (it is committed later).
        publish(dir, 2, end);
        let read = catch_unwind(AssertUnwindSafe(|| corrupt_offset(read_view(dir, VIEW))));
        let open = catch_unwind(AssertUnwindSafe(|| corrupt_offset(Subscription::open(dir, VIEW, Some(1), false))));
        publish(dir, 1, 2);
        let mut subscription = Subscription::open(dir, VIEW, None, false).unwrap();
        assert_eq!(drain(&mut subscription).unwrap(), []);
        publish(dir, 2, end);
        let poll = catch_unwind(AssertUnwindSafe(|| corrupt_offset(drain(&mut subscription))));
        for (path, result) in [("read_view", read), ("Subscription::open(as_of 1)", open), ("poll", poll)] {
            match result {
                Ok(2) => {}
                Ok(offset) => failures.push(format!("{case}: {path} names offset {offset}, not 2")),
                Err(panic) => failures.push(format!("{case}: {path}: {}", panic_message(&panic))),
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// A tail reader of unchecked rows refuses a malformed record's framing
/// (headers, no key) where it reads it, as every reader does; a malformed
/// row comes through as read, and its check fails naming its offset.
#[test]
fn an_unchecked_tail_hands_rows_as_read_and_their_check_names_the_offset() {
    let mut failures = Vec::new();
    for (case, bad) in bad_records() {
        let dir = data_dir();
        let dir = dir.path();
        let end = append(dir, &[vec![change(&row("a"), 1, 1, 1), change(&row("b"), 1, 1, 1)], vec![bad.clone()]]);
        publish(dir, 1, 2);
        let mut tail = Subscription::tail_unchecked(dir, VIEW).unwrap();
        let polled = catch_unwind(AssertUnwindSafe(|| tail.poll_at(&meta(2, end))));
        let events: Vec<TailEvent> = std::iter::from_fn(|| tail.next_unchecked()).collect();
        let offset = match polled {
            Err(panic) => {
                failures.push(format!("{case}: poll: {}", panic_message(&panic)));
                continue;
            }
            Ok(Err(error)) => {
                assert_eq!(events, [], "{case}: nothing before the failing record");
                corrupt_offset::<()>(Err(error))
            }
            Ok(Ok(())) => match &events[..] {
                [TailEvent::Change { epoch: 2, diff: 1, row }, TailEvent::Progress { epoch: 2 }] => {
                    assert_eq!(Some(row.bytes()), bad.key.as_deref(), "{case}: the row as read");
                    assert_eq!(row.offset(), 2, "{case}");
                    corrupt_offset(row.check(VIEW))
                }
                other => panic!("{case}: {other:?}"),
            },
        };
        if offset != 2 {
            failures.push(format!("{case}: names offset {offset}, not 2"));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    // A good row passes its check as the RawRow a checked reader gets.
    let dir = data_dir();
    let dir = dir.path();
    let end = append(dir, &[vec![change(&row("x"), 1, 2, 1)]]);
    publish(dir, 1, 0);
    let mut tail = Subscription::tail_unchecked(dir, VIEW).unwrap();
    tail.poll_at(&meta(2, end)).unwrap();
    let Some(TailEvent::Change { row: read, .. }) = tail.next_unchecked() else { panic!("a change") };
    assert_eq!(read.check(VIEW).unwrap().parse(), row("x"));
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn epochs_going_backwards_are_a_corrupt_changelog() {
    // Offsets 0, 1, 2 at epochs 1, 3, 2.
    let records = [change(&row("a"), 1, 1, 1), change(&row("b"), 1, 3, 1), change(&row("c"), 1, 2, 1)];
    let mut failures = Vec::new();
    let mut check = |what: &str, result: Result<u64, String>| match result {
        Ok(2) => {}
        Ok(offset) => failures.push(format!("{what}: names offset {offset}, not 2")),
        Err(e) => failures.push(format!("{what}: {e}")),
    };
    let dir = data_dir();
    let dir = dir.path();
    let end = append(dir, &[records.to_vec()]);
    publish(dir, 3, end);
    let result = |r: Result<Vec<Event>, Error>| match r {
        Err(Error::CorruptChangelog { offset, .. }) => Ok(offset),
        other => Err(format!("expected CorruptChangelog, got {other:?}")),
    };
    check(
        "read_view",
        result(read_view(dir, VIEW).map(|s| s.rows.into_iter().map(|(r, n)| changed(0, n, r)).collect())),
    );
    for as_of in [1, 2] {
        check(
            &format!("Subscription::open(as_of {as_of})"),
            result(Subscription::open(dir, VIEW, Some(as_of), true).and_then(|mut s| drain(&mut s))),
        );
    }
    // Committed one record at a time, to a live subscription.
    publish(dir, 1, 1);
    let mut subscription = Subscription::open(dir, VIEW, None, true).unwrap();
    assert_eq!(drain(&mut subscription).unwrap(), [changed(1, 1, row("a")), progress(1)]);
    publish(dir, 3, 2);
    assert_eq!(drain(&mut subscription).unwrap(), [changed(3, 1, row("b")), progress(3)]);
    publish(dir, 3, 3);
    check("poll", result(drain(&mut subscription)));
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn a_record_of_an_epoch_after_the_committed_one_is_a_corrupt_changelog() {
    // Offset 1 says epoch 5, below the end offset of a checkpoint of epoch 3:
    // the checkpoint cannot cover it.
    let dir = data_dir();
    let dir = dir.path();
    let end = append(dir, &[vec![change(&row("a"), 1, 1, 1), change(&row("b"), 1, 5, 1)]]);
    publish(dir, 3, end);
    let mut failures = Vec::new();
    match read_view(dir, VIEW) {
        Err(Error::CorruptChangelog { offset: 1, .. }) => {}
        other => failures.push(format!("read_view: expected CorruptChangelog at offset 1, got {other:?}")),
    }
    match Subscription::open(dir, VIEW, None, true).and_then(|mut s| drain(&mut s)) {
        Err(Error::CorruptChangelog { offset: 1, .. }) => {}
        other => failures.push(format!("Subscription::open: expected CorruptChangelog at offset 1, got {other:?}")),
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn a_change_that_does_not_continue_the_row_makes_an_old_epoch_unavailable() {
    // Row a went 1, 2, 3 at epochs 1, 2, 3; compaction left only its last
    // record. Row b (epoch 1) is intact.
    let dir = data_dir();
    let dir = dir.path();
    let end = append(dir, &[vec![change(&row("b"), 1, 1, 1)], vec![change(&row("a"), 3, 3, 1)]]);
    publish(dir, 3, end);
    // The latest epoch is whole.
    assert_eq!(sorted_rows(dir), (3, vec![(row("a"), 3), (row("b"), 1)]));
    let mut subscription = Subscription::open(dir, VIEW, Some(3), false).unwrap();
    assert_eq!(drain(&mut subscription).unwrap(), []);
    // Older epochs are refused, with or without a snapshot.
    for (as_of, snapshot) in [(1, true), (1, false), (2, true), (2, false)] {
        match Subscription::open(dir, VIEW, Some(as_of), snapshot) {
            Err(Error::EpochUnavailable { view, epoch, reason }) => {
                assert_eq!((view.as_str(), epoch), (VIEW, as_of));
                assert!(reason.contains("offset 1") && reason.contains("holds 0"), "{reason}");
            }
            other => panic!("as of {as_of}: expected EpochUnavailable, got {other:?}"),
        }
    }

    // One record left out in the middle: a went 1, 2, 3 but the 2 is missing.
    let dir = data_dir();
    let dir = dir.path();
    append(dir, &[vec![change(&row("a"), 1, 1, 1)]]);
    publish(dir, 1, 1);
    let mut live = Subscription::open(dir, VIEW, None, true).unwrap();
    assert_eq!(drain(&mut live).unwrap(), [changed(1, 1, row("a")), progress(1)]);
    let end = append(dir, &[vec![change(&row("a"), 3, 3, 1)]]);
    publish(dir, 3, end);
    assert!(matches!(Subscription::open(dir, VIEW, Some(1), false), Err(Error::EpochUnavailable { epoch: 1, .. })));
    // A live reader that meets the gap fails too, instead of yielding a wrong stream.
    match drain(&mut live) {
        Err(Error::EpochUnavailable { .. } | Error::CorruptChangelog { .. }) => {}
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn a_count_and_diff_that_overflow_are_an_error_not_a_panic() {
    let dir = data_dir();
    let dir = dir.path();
    // count - diff = i64::MIN - 1.
    let end = append(dir, &[vec![change(&row("a"), i64::MIN, 2, 1)]]);
    publish(dir, 2, end);
    let result = catch_unwind(AssertUnwindSafe(|| Subscription::open(dir, VIEW, Some(1), false).map(|_| ())));
    match result {
        Ok(Err(Error::CorruptChangelog { offset: 0, .. } | Error::EpochUnavailable { .. })) => {}
        Ok(other) => panic!("expected an error, got {other:?}"),
        Err(panic) => panic!("Subscription::open panicked: {}", panic_message(&panic)),
    }
}

#[test]
fn checkpoint_json_must_be_the_current_version_and_a_missing_one_means_no_views() {
    let dir = data_dir();
    let dir = dir.path();
    let end = append(dir, &[vec![change(&row("a"), 1, 1, 1)]]);

    // No checkpoint: no views, and the view is unknown by name.
    assert_eq!(list_views(dir).unwrap(), []);
    assert!(matches!(read_view(dir, VIEW), Err(Error::UnknownView(name)) if name == VIEW));
    assert!(matches!(Subscription::open(dir, VIEW, None, true), Err(Error::UnknownView(name)) if name == VIEW));
    let missing = dir.join("no-such-directory");
    assert_eq!(list_views(&missing).unwrap(), []);
    assert!(matches!(read_view(&missing, VIEW), Err(Error::UnknownView(_))));

    let mut wrong_version = meta(1, end);
    wrong_version.version = millpond_dataflow::CHECKPOINT_VERSION + 1;
    let mut version_0 = meta(1, end);
    version_0.version = 0;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a later version", serde_json::to_vec(&wrong_version).unwrap()),
        ("version 0", serde_json::to_vec(&version_0).unwrap()),
        ("garbage", b"\x00\xff\x13not json at all".to_vec()),
        ("an empty file", Vec::new()),
        ("truncated JSON", serde_json::to_vec(&meta(1, end)).unwrap()[..20].to_vec()),
        ("an array", b"[]".to_vec()),
        ("no version field", br#"{"epoch":1,"sources":{},"sinks":{"view.v":1},"views":{"v":"view.v"}}"#.to_vec()),
        ("a negative epoch", br#"{"version":1,"epoch":-1,"sources":{},"sinks":{},"views":{}}"#.to_vec()),
    ];
    for (case, bytes) in cases {
        write_checkpoint(dir, &bytes);
        let path = dir.join("checkpoint.json").display().to_string();
        match list_views(dir) {
            Err(Error::CorruptState { what, reason }) => {
                assert_eq!(what, path, "{case}");
                if case.starts_with("version") {
                    assert!(reason.contains(case), "{case}: {reason}");
                }
            }
            other => panic!("{case}: list_views: expected CorruptState, got {other:?}"),
        }
        assert!(matches!(read_view(dir, VIEW), Err(Error::CorruptState { .. })), "{case}: read_view");
        assert!(matches!(Subscription::open(dir, VIEW, None, true), Err(Error::CorruptState { .. })), "{case}");
    }

    // A checkpoint.json that cannot be read at all is an I/O error.
    std::fs::remove_file(dir.join("checkpoint.json")).unwrap();
    std::fs::create_dir(dir.join("checkpoint.json")).unwrap();
    assert!(matches!(list_views(dir), Err(Error::Io { .. })));
    assert!(matches!(read_view(dir, VIEW), Err(Error::Io { .. })));
    std::fs::remove_dir(dir.join("checkpoint.json")).unwrap();

    // A valid checkpoint: the view reads; another name is unknown; a view
    // whose changelog topic is missing is an error.
    publish(dir, 1, end);
    assert_eq!(sorted_rows(dir), (1, vec![(row("a"), 1)]));
    assert!(matches!(read_view(dir, "w"), Err(Error::UnknownView(name)) if name == "w"));
    let mut no_topic = meta(1, end);
    no_topic.views.insert("w".into(), "view.w".into());
    no_topic.changelogs.insert("w".into(), Default::default());
    write_checkpoint(dir, &serde_json::to_vec(&no_topic).unwrap());
    assert!(matches!(read_view(dir, "w"), Err(Error::Log(millpond_log::Error::UnknownTopic(t))) if t == "view.w"));

    // A live subscription whose checkpoint.json goes bad fails on its next poll.
    publish(dir, 1, end);
    let mut subscription = Subscription::open(dir, VIEW, None, true).unwrap();
    assert_eq!(drain(&mut subscription).unwrap(), [changed(1, 1, row("a")), progress(1)]);
    write_checkpoint(dir, b"{");
    assert!(matches!(drain(&mut subscription), Err(Error::CorruptState { .. })));
}

#[test]
fn an_end_offset_beyond_the_topic_end_is_a_corrupt_changelog() {
    let dir = data_dir();
    let dir = dir.path();
    let end = append(dir, &[vec![change(&row("a"), 1, 1, 1), change(&row("b"), 1, 1, 1), change(&row("c"), 1, 2, 1)]]);
    assert_eq!(end, 3);
    publish(dir, 2, 10);
    assert_eq!(corrupt_offset(read_view(dir, VIEW)), 3);
    assert_eq!(corrupt_offset(Subscription::open(dir, VIEW, Some(1), true)), 3);
    let reason = match read_view(dir, VIEW) {
        Err(e @ Error::CorruptChangelog { .. }) => e.to_string(),
        other => panic!("{other:?}"),
    };
    assert!(reason.contains("view 'v'") && reason.contains("10"), "{reason}");
    // An empty topic with a positive end offset.
    let empty = data_dir();
    publish(empty.path(), 1, 1);
    assert_eq!(corrupt_offset(read_view(empty.path(), VIEW)), 0);
}

#[test]
fn a_later_checkpoint_beyond_the_topic_end_fails_a_live_subscription() {
    let dir = data_dir();
    let dir = dir.path();
    let end = append(dir, &[vec![change(&row("a"), 1, 1, 1)]]);
    publish(dir, 1, end);
    let mut subscription = Subscription::open(dir, VIEW, None, true).unwrap();
    assert_eq!(drain(&mut subscription).unwrap(), [changed(1, 1, row("a")), progress(1)]);
    // Epoch 2 claims 9 more records that the topic does not hold.
    publish(dir, 2, end + 9);
    let result = drain(&mut subscription);
    assert!(
        matches!(result, Err(Error::CorruptChangelog { offset: 1, .. })),
        "a committed end offset past the topic's end must be reported, got {result:?}"
    );
}

#[test]
fn records_beyond_the_committed_end_offset_are_never_returned() {
    let dir = data_dir();
    let dir = dir.path();
    // One batch: epoch 1 at offsets 0..3, epoch 2 at offsets 3..5. The
    // first commit ends inside the batch.
    append(
        dir,
        &[vec![
            change(&row("a"), 1, 1, 1),
            change(&row("b"), 1, 1, 1),
            change(&row("c"), 1, 1, 1),
            change(&row("a"), 0, 2, -1),
            change(&row("d"), 1, 2, 1),
        ]],
    );
    publish(dir, 1, 3);
    // Uncommitted garbage after that (what a crashed epoch might leave).
    let garbage = Record { key: Some(b"not json".to_vec()), value: Some(b"?".to_vec()), ..Record::default() };
    let end = append(dir, &[vec![garbage.clone(), change(&row("z"), 5, 1, 5)], vec![garbage]]);
    assert_eq!(end, 8);

    assert_eq!(sorted_rows(dir), (1, vec![(row("a"), 1), (row("b"), 1), (row("c"), 1)]));
    assert_eq!(list_views(dir).unwrap()[0].changelog_end_offset, 3);
    let mut subscription = Subscription::open(dir, VIEW, None, true).unwrap();
    assert_eq!(
        drain(&mut subscription).unwrap(),
        [changed(1, 1, row("a")), changed(1, 1, row("b")), changed(1, 1, row("c")), progress(1)]
    );
    assert_eq!(drain(&mut subscription).unwrap(), []);
    let mut old = Subscription::open(dir, VIEW, Some(1), false).unwrap();
    assert_eq!(drain(&mut old).unwrap(), []);

    // Epoch 2 is committed: the rest of the batch, not a byte further.
    publish(dir, 2, 5);
    let epoch_2 = [changed(2, -1, row("a")), changed(2, 1, row("d")), progress(2)];
    assert_eq!(drain(&mut subscription).unwrap(), epoch_2);
    assert_eq!(drain(&mut old).unwrap(), epoch_2);
    assert_eq!(drain(&mut subscription).unwrap(), []);
    assert_eq!(sorted_rows(dir), (2, vec![(row("b"), 1), (row("c"), 1), (row("d"), 1)]));
    let mut fresh = Subscription::open(dir, VIEW, Some(1), true).unwrap();
    let events = drain(&mut fresh).unwrap();
    assert_eq!(events.len(), 7, "{events:?}");
    assert_eq!(events[4..], epoch_2);
}

#[test]
fn a_bounded_poll_reads_a_large_commit_in_pieces_and_yields_the_same_stream() {
    let dir = data_dir();
    let dir = dir.path();
    publish(dir, 1, 0);
    let wide =
        |epoch: i64, i: usize| change(&json!({"k": format!("{epoch}-{i}"), "pad": "x".repeat(2000)}), 1, epoch, 1);
    let records_per_epoch = 1000;
    // Batches of about 400 KiB, as the changelog sink appends at most 1 MiB.
    let batches: Vec<Vec<Record>> = (2..=4)
        .flat_map(|epoch| {
            (0..records_per_epoch / 200).map(move |b| (b * 200..(b + 1) * 200).map(|i| wide(epoch, i)).collect())
        })
        .collect();
    let end = append(dir, &batches);
    let mut whole = Subscription::open(dir, VIEW, None, false).unwrap();
    let mut bounded = Subscription::open(dir, VIEW, None, false).unwrap();
    let committed = meta(4, end);
    assert!(whole.poll_at(&committed).is_ok());
    let expected: Vec<Event> = std::iter::from_fn(|| whole.next_queued()).collect();
    assert_eq!(expected.len(), 3 * records_per_epoch + 3, "every change and three marks");
    let mut got = Vec::new();
    let mut calls = 0;
    loop {
        calls += 1;
        let caught_up = bounded.poll_at_most(&committed, 1).unwrap();
        let queued: Vec<Event> = std::iter::from_fn(|| bounded.next_queued()).collect();
        // One read: 1 MiB and the batch that crosses it (about 700 rows).
        assert!(queued.len() <= 800, "a bounded poll queued {} events", queued.len());
        got.extend(queued);
        if caught_up {
            break;
        }
        assert!(calls < 100, "a bounded poll never caught up");
    }
    assert!(calls >= 5, "3000 rows of 2 KiB take several bounded polls, not {calls}");
    assert_eq!(got, expected);
    assert_eq!(bounded.progressed(), 4);
}

#[test]
fn a_raw_row_is_the_records_json_text_without_surrounding_whitespace_and_the_first_header_counts() {
    let dir = data_dir();
    let dir = dir.path();
    publish(dir, 1, 0);
    let mut subscription = Subscription::open(dir, VIEW, None, false).unwrap();
    let spaced = Record { key: Some(b" \t{\"k\": \"a b\"}\r\n".to_vec()), ..change(&row("x"), 1, 2, 1) };
    let mut doubled = change(&row("y"), 1, 2, 1);
    // A second epoch or diff header is ignored, as `RecordView::header` does.
    doubled.headers.push(header("epoch", Some(be(9))));
    doubled.headers.push(header("diff", Some(vec![1])));
    let end = append(dir, &[vec![spaced, doubled]]);
    subscription.poll_at(&meta(2, end)).unwrap();
    let raw: Vec<(u64, i64, String)> = std::iter::from_fn(|| subscription.next_raw())
        .filter_map(|event| match event {
            RawEvent::Change { epoch, diff, row } => Some((epoch, diff, row.get().to_owned())),
            RawEvent::Progress { .. } => None,
        })
        .collect();
    assert_eq!(raw, [(2, 1, r#"{"k": "a b"}"#.to_owned()), (2, 1, r#"{"k":"y"}"#.to_owned())]);
}

#[test]
fn a_view_reads_at_an_earlier_committed_epoch_and_not_a_later_one() {
    let dir = data_dir();
    let dir = dir.path();
    let end = append(
        dir,
        &[
            vec![change(&row("a"), 1, 1, 1), change(&row("b"), 1, 1, 1)],
            vec![change(&row("a"), 0, 2, -1), change(&row("c"), 2, 2, 2)],
            vec![change(&row("b"), 0, 3, -1)],
        ],
    );
    publish(dir, 3, end);
    let sorted = |mut snapshot: millpond_dataflow::Snapshot| {
        snapshot.rows.sort_by_key(|(row, _)| row.to_string());
        (snapshot.epoch, snapshot.rows)
    };
    assert_eq!(sorted(read_view_at(dir, VIEW, 1).unwrap()), (1, vec![(row("a"), 1), (row("b"), 1)]));
    assert_eq!(sorted(read_view_at(dir, VIEW, 2).unwrap()), (2, vec![(row("b"), 1), (row("c"), 2)]));
    assert_eq!(sorted(read_view_at(dir, VIEW, 3).unwrap()), sorted(read_view(dir, VIEW).unwrap()));
    assert!(matches!(read_view_at(dir, VIEW, 4), Err(Error::EpochUnavailable { epoch: 4, .. })));
}

// Random bytes where the format wants JSON and 8-byte integers: the readers
// return errors (or rows), never panic.

/// Bytes, often 8 of them: small integers, extremes, anything.
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        2 => vec(any::<u8>(), 0..12),
        3 => (-3i64..6).prop_map(be),
        2 => any::<i64>().prop_map(be),
        2 => prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(i64::MIN + 1), Just(-1)].prop_map(be),
    ]
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..12),
        "[a-c]".prop_map(|s| format!("{{\"k\":\"{s}\"}}").into_bytes()),
        Just(b"[1,2".to_vec()),
        Just(b"7".to_vec()),
    ]
}

fn random_header() -> impl Strategy<Value = Header> {
    let name = prop_oneof![3 => Just("epoch".to_owned()), 3 => Just("diff".to_owned()), 1 => "[a-z]{0,6}"];
    (name, proptest::option::of(bytes())).prop_map(|(key, value)| Header { key, value })
}

fn random_headers() -> impl Strategy<Value = Vec<Header>> {
    prop_oneof![
        vec(random_header(), 0..4),
        // Both headers, with random values.
        (bytes(), bytes()).prop_map(|(epoch, diff)| vec![header("epoch", Some(epoch)), header("diff", Some(diff))]),
    ]
}

/// A count or diff: small, extreme or anything.
fn integer() -> impl Strategy<Value = i64> {
    prop_oneof![3 => -3i64..6, 1 => any::<i64>(), 2 => prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(i64::MIN + 1)]]
}

fn random_record() -> impl Strategy<Value = Record> {
    let random = (proptest::option::of(key()), proptest::option::of(bytes()), random_headers())
        .prop_map(|(key, value, headers)| Record { key, value, timestamp_ms: 0, headers });
    // Well-formed but for the numbers, so that readers get past the parsing.
    let numbers = ("[a-c]", integer(), 1i64..6, integer())
        .prop_map(|(k, count, epoch, diff)| change(&row(&k), count, epoch, diff));
    prop_oneof![random, numbers]
}

/// A checkpoint: its epoch, and its end offset (None: the topic's end;
/// otherwise taken modulo the topic's end + 3).
fn random_checkpoint() -> impl Strategy<Value = (u64, Option<u64>)> {
    (prop_oneof![3 => 0u64..6, 1 => any::<u64>()], prop_oneof![2 => Just(None), 1 => any::<u64>().prop_map(Some)])
}

/// Reads `view.v` every way there is; the results do not matter.
fn read_every_way(dir: &Path, as_of: Option<u64>, snapshot: bool, then: &[u8]) {
    let _ = list_views(dir);
    let _ = read_view(dir, VIEW);
    let _ = Subscription::open(dir, VIEW, None, true).map(|mut s| drain(&mut s));
    if let Ok(mut subscription) = Subscription::open(dir, VIEW, as_of, snapshot) {
        let _ = drain(&mut subscription);
        write_checkpoint(dir, then);
        let _ = drain(&mut subscription);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_the_readers(
        batches in vec(vec(random_record(), 1..5), 0..4),
        first in random_checkpoint(),
        second in random_checkpoint(),
        as_of in proptest::option::of(0u64..6),
        snapshot in any::<bool>(),
    ) {
        let dir = data_dir();
        let dir = dir.path();
        let end = append(dir, &batches);
        let end_of = |offset: Option<u64>| offset.map_or(end, |o| o % (end + 3));
        publish(dir, first.0, end_of(first.1));
        let then = serde_json::to_vec(&meta(second.0, end_of(second.1))).unwrap();
        read_every_way(dir, as_of, snapshot, &then);
    }

    #[test]
    fn random_checkpoint_files_never_panic_the_readers(
        text in prop_oneof![
            vec(any::<u8>(), 0..64),
            (any::<u32>(), any::<u64>(), any::<u64>()).prop_map(|(version, epoch, end)| format!(
                r#"{{"version":{version},"epoch":{epoch},"sources":{{"x":{{"0":1}}}},"sinks":{{"view.v":{end}}},"views":{{"v":"view.v"}}}}"#
            ).into_bytes()),
        ],
    ) {
        let dir = data_dir();
        let dir = dir.path();
        let end = append(dir, &[vec![change(&row("a"), 1, 1, 1)]]);
        write_checkpoint(dir, &text);
        let then = serde_json::to_vec(&meta(1, end)).unwrap();
        read_every_way(dir, None, true, &then);
        read_every_way(dir, Some(0), false, &then);
    }
}
