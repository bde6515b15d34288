//! The record-batch decoder: any bytes give an error or a consistent batch
//! (compressed ones through `batch::normalized`, so every codec's decoder is
//! fuzzed too).
#![no_main]

use libfuzzer_sys::fuzz_target;
use millpond_log::batch::{self, BatchView, Batches};

fuzz_target!(|input: &[u8]| {
    // First byte odd: fix the CRC up first, so the fuzzer gets past it and
    // explores the record structure behind it.
    let Some((&mode, data)) = input.split_first() else { return };
    let mut fixed = data.to_vec();
    if mode & 1 == 1 && fixed.len() >= 21 {
        let crc = crc32c::crc32c(&fixed[21..]);
        fixed[17..21].copy_from_slice(&crc.to_be_bytes());
    }
    let data = &fixed[..];
    if let Ok(parsed) = BatchView::parse(data) {
        // A compressed batch is read decompressed; one whose payload does not
        // decompress into valid records is an error, never a panic.
        let Ok(normalized) = batch::normalized(parsed.as_bytes()) else {
            assert!(parsed.is_compressed(), "an uncompressed batch that parses is read as it is");
            return;
        };
        let view = BatchView::from_validated(&normalized);
        assert_eq!(view.records().count(), view.record_count() as usize);
        for record in view.records() {
            assert!(record.offset >= view.base_offset() && record.offset <= view.last_offset());
            let owned = record.to_record();
            // What parsed re-encodes to a batch that parses to the same records.
            let mut again = Vec::new();
            batch::encode_records(&mut again, 0, std::slice::from_ref(&owned));
            let back = BatchView::parse(&again).unwrap().records().next().unwrap().to_record();
            assert_eq!(back, owned);
        }
    }
    let mut batches = Batches::new(data);
    for _ in &mut batches {}
    assert!(batches.position() <= data.len());
});

