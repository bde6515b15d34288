//! The codecs of Kafka's compressed record batches, decompression only: a
//! batch is stored as its producer compressed it, and readers inside
//! Millpond see it decompressed ([`crate::batch::normalize_into`]).
//!
//! | attributes & 7 | codec | framing |
//! |---|---|---|
//! | 1 | gzip | a gzip member (RFC 1952) |
//! | 2 | snappy | raw snappy, or the xerial stream the Java client writes (magic `82 53 4e 41 50 50 59 00`, two version ints, then blocks of a 4-byte length and raw snappy) |
//! | 3 | lz4 | an LZ4 frame |
//! | 4 | zstd | a zstd frame |
//!
//! Invariant: no decompression writes more than its limit (a batch that
//! would is refused, so a small hostile batch cannot fill memory).

use std::io::Read;

/// A batch's compression codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    /// The codec of a batch's attributes; `None` for an unknown codec (5-7).
    pub fn of_attributes(attributes: i16) -> Option<Codec> {
        match attributes & 0x07 {
            0 => Some(Codec::None),
            1 => Some(Codec::Gzip),
            2 => Some(Codec::Snappy),
            3 => Some(Codec::Lz4),
            4 => Some(Codec::Zstd),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}

const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\0";
/// The xerial header: magic, then version and compatible version (4 bytes each).
const XERIAL_HEADER_BYTES: usize = 16;

/// Decompresses `payload` of `codec`, refusing output past `limit` bytes.
pub fn decompress(codec: Codec, payload: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    match codec {
        Codec::None => Ok(payload.to_vec()),
        Codec::Gzip => read_capped(flate2::read::GzDecoder::new(payload), limit),
        Codec::Snappy if payload.starts_with(XERIAL_MAGIC) => xerial(payload, limit),
        Codec::Snappy => raw_snappy(payload, limit),
        Codec::Lz4 => read_capped(lz4_flex::frame::FrameDecoder::new(payload), limit),
        Codec::Zstd => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(payload).map_err(|e| format!("zstd: {e}"))?;
            read_capped(decoder, limit)
        }
    }
}

/// Reads `reader` to its end, at most `limit` bytes.
fn read_capped(reader: impl Read, limit: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let read = reader.take(limit as u64 + 1).read_to_end(&mut out).map_err(|e| e.to_string())?;
    if read > limit {
        return Err(format!("decompresses to more than {limit} bytes"));
    }
    Ok(out)
}

fn raw_snappy(payload: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let length = snap::raw::decompress_len(payload).map_err(|e| format!("snappy: {e}"))?;
    if length > limit {
        return Err(format!("decompresses to {length} bytes, more than {limit}"));
    }
    snap::raw::Decoder::new().decompress_vec(payload).map_err(|e| format!("snappy: {e}"))
}

/// The xerial snappy stream: a header, then blocks of a big-endian length
/// and that many bytes of raw snappy.
fn xerial(payload: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let mut rest = payload.get(XERIAL_HEADER_BYTES..).ok_or("snappy: a short xerial header")?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let length = rest.get(..4).ok_or("snappy: a short xerial block length")?;
        let length = u32::from_be_bytes(length.try_into().expect("4 bytes")) as usize;
        let block = rest.get(4..4 + length).ok_or("snappy: a xerial block past the end")?;
        out.extend_from_slice(&raw_snappy(block, limit.saturating_sub(out.len()))?);
        rest = &rest[4 + length..];
    }
    debug_assert!(out.len() <= limit);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    const TEXT: &[u8] = b"the log is the database; the log is the database; the log is the database";

    #[test]
    fn each_codec_decompresses_what_its_encoder_wrote_and_refuses_past_the_limit() {
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gzip.write_all(TEXT).unwrap();
        let gzip = gzip.finish().unwrap();
        let raw = snap::raw::Encoder::new().compress_vec(TEXT).unwrap();
        let mut framed = XERIAL_MAGIC.to_vec();
        framed.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        for half in [&TEXT[..30], &TEXT[30..]] {
            let block = snap::raw::Encoder::new().compress_vec(half).unwrap();
            framed.extend_from_slice(&(block.len() as u32).to_be_bytes());
            framed.extend_from_slice(&block);
        }
        let mut lz4 = lz4_flex::frame::FrameEncoder::new(Vec::new());
        lz4.write_all(TEXT).unwrap();
        let lz4 = lz4.finish().unwrap();
        let cases = [(Codec::Gzip, gzip), (Codec::Snappy, raw), (Codec::Snappy, framed), (Codec::Lz4, lz4)];
        for (codec, compressed) in cases {
            assert_eq!(decompress(codec, &compressed, TEXT.len()).unwrap(), TEXT, "{codec:?}");
            let error = decompress(codec, &compressed, TEXT.len() - 1).unwrap_err();
            assert!(error.contains("more than"), "{codec:?}: {error}");
            assert!(decompress(codec, &compressed[..compressed.len() / 2], 1 << 20).is_err(), "{codec:?} truncated");
        }
    }

    #[test]
    fn a_zstd_frame_decompresses() {
        // `printf 'the log is the database' | zstd -c | xxd -i` (zstd 1.5).
        let frame: &[u8] = &[
            0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x58, 0xb9, 0x00, 0x00, 0x74, 0x68, 0x65, 0x20, 0x6c, 0x6f, 0x67, 0x20, 0x69,
            0x73, 0x20, 0x74, 0x68, 0x65, 0x20, 0x64, 0x61, 0x74, 0x61, 0x62, 0x61, 0x73, 0x65, 0xb0, 0xeb, 0xd7, 0xf3,
        ];
        assert_eq!(decompress(Codec::Zstd, frame, 100).unwrap(), b"the log is the database");
        assert!(decompress(Codec::Zstd, frame, 10).is_err());
        assert!(decompress(Codec::Zstd, &frame[..20], 100).is_err());
    }
}
