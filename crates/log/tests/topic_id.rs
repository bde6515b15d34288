//! Topic incarnation ids: random at creation, persisted in `meta.json`
//! (version 2), assigned once to version-1 topics, readable without the lock.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use millpond_log::{Error, Log, LogOptions, ManualClock, Record, TopicConfig, TopicId, read_topic_id};

fn options() -> LogOptions {
    LogOptions { clock: Arc::new(ManualClock::new(1_000)), background: false, ..LogOptions::default() }
}

fn meta_path(dir: &Path, topic: &str) -> PathBuf {
    dir.join("topics").join(topic).join("meta.json")
}

fn meta_json(dir: &Path, topic: &str) -> serde_json::Value {
    serde_json::from_slice(&fs::read(meta_path(dir, topic)).unwrap()).unwrap()
}

#[test]
fn every_topic_gets_a_persistent_id_and_a_new_one_when_recreated() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), options()).unwrap();
    log.create_topic("a", TopicConfig::default()).unwrap();
    log.create_topic("b", TopicConfig { partitions: 3, ..TopicConfig::default() }).unwrap();
    let a = log.topic_id("a").unwrap();
    let b = log.topic_id("b").unwrap();
    assert_ne!(a, b);
    assert_ne!(log.topic_id("__consumer_offsets").unwrap(), a);
    // Another process reads it from disk while the owner holds the lock.
    assert_eq!(read_topic_id(dir.path(), "a").unwrap(), a);
    let meta = meta_json(dir.path(), "a");
    assert_eq!(meta["version"], 2);
    assert_eq!(meta["id"], a.to_string());
    assert_eq!(a.to_string().len(), 32);
    assert_eq!(a.to_string().parse::<TopicId>().unwrap(), a);
    assert!(matches!(log.topic_id("missing"), Err(Error::UnknownTopic(_))));
    assert!(matches!(read_topic_id(dir.path(), "missing"), Err(Error::UnknownTopic(_))));

    log.append("a", 0, &[Record::new(Some(b"k"), Some(b"v"), 1_000)]).unwrap();
    log.close().unwrap();
    let log = Log::open(dir.path(), options()).unwrap();
    assert_eq!((log.topic_id("a").unwrap(), log.topic_id("b").unwrap()), (a, b), "ids survive a reopen");

    log.delete_topic("a").unwrap();
    log.create_topic("a", TopicConfig::default()).unwrap();
    let again = log.topic_id("a").unwrap();
    assert_ne!(again, a, "a re-created topic is a new incarnation");
    assert_eq!(read_topic_id(dir.path(), "a").unwrap(), again);
    drop(log);
    assert_eq!(read_topic_id(dir.path(), "a").unwrap(), again);
}

/// Rewrites a topic's meta.json as an older build wrote it (version 1, no id).
fn downgrade_to_v1(dir: &Path, topic: &str) {
    let mut meta = meta_json(dir, topic);
    meta["version"] = 1.into();
    meta.as_object_mut().unwrap().remove("id");
    fs::write(meta_path(dir, topic), serde_json::to_vec(&meta).unwrap()).unwrap();
}

#[test]
fn version_1_topics_get_an_id_once_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), options()).unwrap();
    log.create_topic("old", TopicConfig { partitions: 2, ..TopicConfig::default() }).unwrap();
    log.append("old", 1, &[Record::new(Some(b"k"), Some(b"v"), 1_000)]).unwrap();
    let first = log.topic_id("old").unwrap();
    log.close().unwrap();
    downgrade_to_v1(dir.path(), "old");
    // No owner has assigned an id yet: a reader cannot invent one.
    match read_topic_id(dir.path(), "old") {
        Err(Error::BadMetadata { path, reason }) => {
            assert_eq!(path, meta_path(dir.path(), "old"));
            assert!(reason.contains("no topic id"), "{reason}");
        }
        other => panic!("expected BadMetadata, got {other:?}"),
    }
    // An upgrade that crashed before its rename left a temp file: ignored and removed.
    let tmp = meta_path(dir.path(), "old").with_file_name("meta.json.tmp");
    fs::write(&tmp, b"{\"half\":").unwrap();

    let log = Log::open(dir.path(), options()).unwrap();
    let assigned = log.topic_id("old").unwrap();
    assert_ne!(assigned, first, "a fresh id, not a reconstruction");
    assert!(!tmp.exists());
    let meta = meta_json(dir.path(), "old");
    assert_eq!((meta["version"].as_u64(), meta["id"].as_str()), (Some(2), Some(assigned.to_string().as_str())));
    assert_eq!(meta["config"]["partitions"], 2, "the config is kept");
    assert_eq!(log.high_watermark("old", 1).unwrap(), 1, "the data is kept");
    assert_eq!(read_topic_id(dir.path(), "old").unwrap(), assigned);
    drop(log);
    let log = Log::open(dir.path(), options()).unwrap();
    assert_eq!(log.topic_id("old").unwrap(), assigned, "assigned once");
}

/// An edit of a meta.json document.
type Change = Box<dyn Fn(&mut serde_json::Value)>;

#[test]
fn inconsistent_metadata_versions_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    Log::open(dir.path(), options()).unwrap().create_topic("t", TopicConfig::default()).unwrap();
    let good = meta_json(dir.path(), "t");
    let cases: Vec<(&str, Change)> = vec![
        ("needs an id", Box::new(|m| drop(m.as_object_mut().unwrap().remove("id")))),
        ("has no id field", Box::new(|m| m["version"] = 1.into())),
        ("unsupported version 3", Box::new(|m| m["version"] = 3.into())),
        ("32 lowercase hex digits", Box::new(|m| m["id"] = "xyz".into())),
        ("reserved", Box::new(|m| m["id"] = "0".repeat(32).into())),
        ("expected name 't'", Box::new(|m| m["name"] = "u".into())),
    ];
    for (needle, change) in cases {
        let mut meta = good.clone();
        change(&mut meta);
        fs::write(meta_path(dir.path(), "t"), serde_json::to_vec(&meta).unwrap()).unwrap();
        for error in [Log::open(dir.path(), options()).unwrap_err(), read_topic_id(dir.path(), "t").unwrap_err()] {
            let message = error.to_string();
            assert!(matches!(error, Error::BadMetadata { .. }), "{needle}: {message}");
            assert!(message.contains(needle) && message.contains("meta.json"), "{needle}: {message}");
        }
    }
}
