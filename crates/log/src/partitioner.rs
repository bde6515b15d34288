//! Key routing: Kafka's default partitioner, so that a key lands on the same
//! partition number here as it would from a Kafka producer.
//!
//! Invariant: `partition_for_key` is a pure function of the key bytes and the
//! partition count; it never changes between releases (it is part of the
//! on-disk contract: a topic's data is placed by it).

/// Kafka's `Utils.murmur2`: 32-bit MurmurHash2 with seed `0x9747b28c`.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h: u32 = 0x9747_b28c ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes(chunk.try_into().expect("4 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, byte) in tail.iter().enumerate().rev() {
            h ^= u32::from(*byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Kafka's default partitioner picks for a keyed record:
/// `toPositive(murmur2(key)) % partition_count`.
pub fn partition_for_key(key: &[u8], partition_count: u32) -> u32 {
    assert!(partition_count > 0, "a topic has at least one partition");
    ((murmur2(key) & 0x7fff_ffff) as u32) % partition_count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_kafka_reference_vectors() {
        // From Kafka's UtilsTest.testMurmur2.
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            (b"abc", 479_470_107),
        ];
        for (key, expected) in cases {
            assert_eq!(murmur2(key), expected, "key {:?}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn positive_modulo() {
        // -973932308 & 0x7fffffff = 1173551340; % 4 = 0.
        assert_eq!(partition_for_key(b"21", 4), 1_173_551_340 % 4);
        for n in 1..10 {
            assert!(partition_for_key(b"foobar", n) < n);
        }
    }
}
