//! Internal topics (names starting with `__`) are written and deleted only
//! by their owners, through the `_internal` / `_forced` calls.

use std::sync::Arc;

use millpond_log::{CONSUMER_OFFSETS_TOPIC, Error, Log, LogOptions, ManualClock, Record, TopicConfig};

fn options() -> LogOptions {
    LogOptions { clock: Arc::new(ManualClock::new(1_000)), background: false, ..LogOptions::default() }
}

fn record(value: &str) -> Record {
    Record::new(Some(b"k"), Some(value.as_bytes()), 1_000)
}

#[test]
fn outsiders_cannot_write_internal_topics_and_the_log_still_opens() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), options()).unwrap();
    log.create_topic("t", TopicConfig::default()).unwrap();
    log.commit_offset("g", "t", 0, 0).unwrap();
    let before = log.high_watermark(CONSUMER_OFFSETS_TOPIC, 0).unwrap();
    assert_eq!(before, 1);
    for result in [
        log.produce(CONSUMER_OFFSETS_TOPIC, &[record("garbage")]).map(drop),
        log.append(CONSUMER_OFFSETS_TOPIC, 0, &[record("garbage")]).map(drop),
    ] {
        match result {
            Err(Error::InternalTopic { topic, action }) => {
                assert_eq!(topic, CONSUMER_OFFSETS_TOPIC);
                assert!(action.contains("to"), "{action}");
            }
            other => panic!("expected InternalTopic, got {other:?}"),
        }
    }
    let message = log.produce(CONSUMER_OFFSETS_TOPIC, &[record("x")]).unwrap_err().to_string();
    assert!(message.contains("__consumer_offsets") && message.contains("internal"), "{message}");
    assert_eq!(log.high_watermark(CONSUMER_OFFSETS_TOPIC, 0).unwrap(), before, "nothing was written");
    // The owner's own path still works.
    log.commit_offset("g", "t", 0, 5).unwrap();
    assert_eq!(log.high_watermark(CONSUMER_OFFSETS_TOPIC, 0).unwrap(), before + 1);
    // Ordinary topics are unaffected, including names with '__' inside.
    log.create_topic("a__b", TopicConfig::default()).unwrap();
    log.produce("a__b", &[record("fine")]).unwrap();
    log.append("t", 0, &[record("fine")]).unwrap();
    log.close().unwrap();
    let log = Log::open(dir.path(), options()).unwrap();
    assert_eq!(log.committed_offset("g", "t", 0), Some(5));
}

#[test]
fn owners_write_and_delete_internal_topics_explicitly() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), options()).unwrap();
    log.create_topic("__owned", TopicConfig { partitions: 2, ..TopicConfig::default() }).unwrap();
    assert!(matches!(log.produce("__owned", &[record("x")]), Err(Error::InternalTopic { .. })));
    assert!(matches!(log.append("__owned", 1, &[record("x")]), Err(Error::InternalTopic { .. })));
    let info = log.append_internal("__owned", 1, &[record("b"), record("c")]).unwrap();
    assert_eq!((info.partition, info.base_offset, info.last_offset), (1, 0, 1));
    assert_eq!(log.produce_internal("__owned", &[record("a")]).unwrap().len(), 1);
    let total: u64 = (0..2).map(|p| log.high_watermark("__owned", p).unwrap()).sum();
    assert_eq!(total, 3, "both internal writes landed");

    match log.delete_topic("__owned") {
        Err(Error::InternalTopic { topic, action }) => assert_eq!((topic.as_str(), action), ("__owned", "deleted")),
        other => panic!("expected InternalTopic, got {other:?}"),
    }
    assert!(log.topics().contains(&"__owned".to_owned()), "a refused delete keeps the topic");
    log.delete_topic_forced("__owned").unwrap();
    assert!(!log.topics().contains(&"__owned".to_owned()));
    assert!(matches!(log.delete_topic_forced("__owned"), Err(Error::UnknownTopic(_))));
    // The log's own topic is refused even by force.
    for result in [log.delete_topic(CONSUMER_OFFSETS_TOPIC), log.delete_topic_forced(CONSUMER_OFFSETS_TOPIC)] {
        assert!(matches!(result, Err(Error::InternalTopic { .. })), "{result:?}");
    }
    assert!(log.topics().contains(&CONSUMER_OFFSETS_TOPIC.to_owned()));
    // Ordinary topics: delete_topic_forced is just a delete.
    log.create_topic("plain", TopicConfig::default()).unwrap();
    log.delete_topic_forced("plain").unwrap();
    assert!(millpond_log::is_internal_topic("__x") && !millpond_log::is_internal_topic("_x"));
}
