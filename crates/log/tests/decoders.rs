//! Every decoder of the log, fed arbitrary and mutated input: it returns an
//! error or a valid value, and never panics. Also the codec's round trip.

use millpond_log::batch::{self, BatchView, Batches};
use millpond_log::{Header, Record, TopicConfig};
use proptest::prelude::*;

fn arb_record() -> impl Strategy<Value = Record> {
    (
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
        any::<i64>(),
        proptest::collection::vec(
            ("[a-z]{0,5}", proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8))),
            0..3,
        ),
    )
        .prop_map(|(key, value, timestamp_ms, headers)| Record {
            key,
            value,
            timestamp_ms,
            headers: headers.into_iter().map(|(key, value)| Header { key, value }).collect(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn encode_then_parse_is_identity(records in proptest::collection::vec(arb_record(), 1..20), base in 0u64..1 << 40) {
        let mut bytes = Vec::new();
        let size = batch::encode_records(&mut bytes, base, &records);
        prop_assert_eq!(size, bytes.len());
        let view = BatchView::parse(&bytes).unwrap();
        prop_assert_eq!(view.base_offset(), base);
        prop_assert_eq!(view.last_offset(), base + records.len() as u64 - 1);
        prop_assert_eq!(view.max_timestamp(), records.iter().map(|r| r.timestamp_ms).max().unwrap());
        let back: Vec<Record> = view.records().map(|r| r.to_record()).collect();
        prop_assert_eq!(back, records);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(view) = BatchView::parse(&bytes) {
            // Whatever parses is internally consistent.
            for record in view.records() {
                prop_assert!(record.offset <= view.last_offset());
            }
        }
        let mut batches = Batches::new(&bytes);
        for _ in &mut batches {}
        prop_assert!(batches.position() <= bytes.len());
        let _ = batch::batch_size(&bytes);
        let _ = serde_json::from_slice::<TopicConfig>(&bytes);
    }

    /// A valid batch with a CRC-fixed mutation still never panics the
    /// record walk: structure is checked beyond the CRC.
    #[test]
    fn mutated_batches_with_recomputed_crc_never_panic(
        records in proptest::collection::vec(arb_record(), 1..5),
        mutations in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = Vec::new();
        batch::encode_records(&mut bytes, 7, &records);
        for (at, value) in mutations {
            let at = 21 + at.index(bytes.len() - 21); // inside the CRC's range
            bytes[at] = value;
        }
        let crc = crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        if let Ok(view) = BatchView::parse(&bytes) {
            // A compressed batch (a mutated codec) is read decompressed; one
            // whose payload does not decompress into valid records is an error.
            if let Ok(normalized) = batch::normalized(&bytes[..view.size_bytes()]) {
                let view = BatchView::from_validated(&normalized);
                prop_assert_eq!(view.records().count(), view.record_count() as usize);
                for record in view.records() {
                    let _ = record.to_record();
                }
            } else {
                prop_assert!(view.is_compressed(), "an uncompressed batch that parses is read as it is");
            }
        }
        let truncated = &bytes[..cut.index(bytes.len())];
        prop_assert!(BatchView::parse(truncated).is_err(), "a truncated batch never parses");
    }
}

/// CRC-32C (Castagnoli), bitwise: an independent check of the crate we use.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
        }
    }
    !crc
}

#[test]
fn crc32c_matches_the_standard_check_value() {
    // The CRC-32C check value of "123456789" (RFC 3720, appendix B.4).
    assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    let mut bytes = Vec::new();
    batch::encode_records(&mut bytes, 0, &[Record::new(Some(b"k"), Some(b"v"), 1)]);
    assert_eq!(BatchView::parse(&bytes).unwrap().crc(), crc32c(&bytes[21..]));
}

/// Found by the `batch` fuzz target: a negative base offset (an i64 on disk,
/// outside the CRC) used to wrap to records outside their batch.
#[test]
fn negative_or_overflowing_base_offsets_are_rejected() {
    let mut bytes = Vec::new();
    batch::encode_records(&mut bytes, 0, &[Record::new(Some(b"k"), Some(b"v"), 1), Record::new(None, None, 2)]);
    for base in [-1i64, i64::MIN, i64::MAX] {
        let mut bad = bytes.clone();
        bad[..8].copy_from_slice(&base.to_be_bytes());
        assert!(BatchView::parse(&bad).is_err(), "base offset {base} accepted");
    }
    let mut ok = bytes.clone();
    ok[..8].copy_from_slice(&(i64::MAX - 1).to_be_bytes());
    assert_eq!(BatchView::parse(&ok).unwrap().last_offset(), i64::MAX as u64);
}
