//! Recovery: arbitrary bytes as a segment file and its two index files (with
//! and without a clean-shutdown marker) open without panicking, and whatever
//! is served is whole, validated batches in offset order.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use millpond_log::{Log, LogOptions, ManualClock, TopicConfig};

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let (flags, rest) = data.split_at(1);
    let split_a = (rest[0] as usize * rest.len() / 256).min(rest.len());
    let (log_bytes, indexes) = rest.split_at(split_a);
    let split_b = indexes.len() / 2;
    let (offset_index, time_index) = indexes.split_at(split_b);

    let dir = tempfile::tempdir().unwrap();
    let options = || LogOptions { clock: Arc::new(ManualClock::new(1_000)), background: false, ..LogOptions::default() };
    {
        let log = Log::open(dir.path(), options()).unwrap();
        let config = TopicConfig { segment_bytes: 4096, index_interval_bytes: 64, ..TopicConfig::default() };
        log.create_topic("t", config).unwrap();
    }
    let partition = dir.path().join("topics/t/0");
    std::fs::write(partition.join("00000000000000000000.log"), log_bytes).unwrap();
    std::fs::write(partition.join("00000000000000000000.index"), offset_index).unwrap();
    std::fs::write(partition.join("00000000000000000000.timeindex"), time_index).unwrap();
    if flags[0] & 1 == 0 {
        let _ = std::fs::remove_file(dir.path().join("clean-shutdown"));
    }
    let Ok(log) = Log::open(dir.path(), options()) else { return };
    let high = log.high_watermark("t", 0).unwrap();
    let mut offset = log.low_watermark("t", 0).unwrap();
    let mut previous = None;
    while offset < high {
        let Ok(fetch) = log.fetch("t", 0, offset, 512) else { break };
        if fetch.is_empty() {
            break;
        }
        for record in fetch.records() {
            assert!(previous.is_none_or(|p| record.offset > p), "offsets increase");
            assert!(record.offset < high, "nothing past the high watermark is served");
            previous = Some(record.offset);
        }
        offset = fetch.next_offset();
    }
    let _ = log.offset_for_time("t", 0, i64::from(flags[0]) * 1000);
});
