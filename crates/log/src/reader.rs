//! Reading a partition's files without opening the [`Log`](crate::Log).
//!
//! The writer holds the data directory's lock, so a second process (a
//! `millpond view read` while the job runs) reads the segment files directly.
//! It never writes, never recovers, and must be told how far it may read:
//! the caller passes an offset below which the writer guarantees whole,
//! synced batches (for views, the committed position of the last
//! checkpoint). Bytes past that bound may be torn and are never parsed.
//!
//! It reads no transactions' outcomes: it is for topics only the runtime
//! writes (views' changelogs), never transactional.
//!
//! Invariant: every record returned has an offset in `[next, upto)` and
//! offsets strictly increase across calls. Segments may vanish under the
//! reader (retention, the cleaner's swap); it then relists the directory and
//! finds its place again by offset.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::batch::{self, BatchView, Record, RecordView};
use crate::error::{Error, Result};
use crate::segment;

/// How many times a read relists the directory when files vanish under it.
const RELIST_ATTEMPTS_MAX: usize = 16;
/// How many 2 ms waits a read spends on a cleaner swap before giving up.
const SWAP_WAITS_MAX: usize = 5_000;

/// One record read by a [`PartitionReader`], with its offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetRecord {
    pub offset: u64,
    pub record: Record,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cursor {
    base: u64,
    inode: u64,
    position: u64,
}

/// A cursor over one partition's segment files, for another process.
#[derive(Debug)]
pub struct PartitionReader {
    dir: PathBuf,
    next_offset: u64,
    /// The segment being read (base and inode: the cleaner may replace the
    /// file under the same name) and the byte position of the next batch.
    cursor: Option<Cursor>,
}

impl PartitionReader {
    /// A reader of `topic`'s `partition` in the data directory `data_dir`,
    /// starting at `offset`.
    pub fn new(data_dir: impl AsRef<Path>, topic: &str, partition: u32, offset: u64) -> Result<PartitionReader> {
        let dir = data_dir.as_ref().join("topics").join(topic).join(partition.to_string());
        if !dir.is_dir() {
            return Err(Error::UnknownTopic(topic.to_owned()));
        }
        Ok(PartitionReader { dir, next_offset: offset, cursor: None })
    }

    /// The offset the next record returned will have at least.
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// Reads records with offsets in `[next_offset, upto)`, about `max_bytes`
    /// of batches at most (at least one batch if any is readable). Returns
    /// an empty vector when nothing below `upto` is readable yet.
    pub fn read(&mut self, upto: u64, max_bytes: usize) -> Result<Vec<OffsetRecord>> {
        let mut out = Vec::new();
        self.read_each(upto, max_bytes, |record| {
            out.push(OffsetRecord { offset: record.offset, record: record.to_record() });
        })?;
        Ok(out)
    }

    /// [`PartitionReader::read`], handing each record to `each` borrowed
    /// from the batch just read instead of copying it (a reader's hot
    /// path). Returns how many records it handed over.
    pub fn read_each(&mut self, upto: u64, max_bytes: usize, mut each: impl FnMut(RecordView<'_>)) -> Result<usize> {
        let mut out = 0usize;
        let mut attempts = 0;
        let mut swap_waits = 0;
        let mut read_bytes = 0usize;
        while self.next_offset < upto && read_bytes < max_bytes.max(1) {
            let (bases, swaps) = list_bases(&self.dir)?;
            if swaps.iter().any(|&(first, end)| first <= self.next_offset && self.next_offset < end) {
                // The cleaner is replacing the segments here: between deleting
                // the old files and renaming the new one, none covers them.
                swap_waits += 1;
                if swap_waits > SWAP_WAITS_MAX {
                    return Err(Error::BadMetadata {
                        path: self.dir.clone(),
                        reason: format!("a cleaner swap covering offset {} did not finish", self.next_offset),
                    });
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
                continue;
            }
            let Some(&first) = bases.first() else { return Ok(out) };
            // Records below the first segment are gone (retention): skip ahead.
            self.next_offset = self.next_offset.max(first);
            let index = bases.iter().rposition(|&b| b <= self.next_offset).expect("first base is at most next");
            let base = bases[index];
            match self.read_segment(base, upto, max_bytes.saturating_sub(read_bytes), &mut each, &mut out) {
                Ok((consumed, at_end)) => {
                    read_bytes += consumed;
                    if at_end {
                        match bases.get(index + 1) {
                            // Compacted segments may end in a gap: the next base is the next offset.
                            Some(&next_base) => {
                                self.next_offset = self.next_offset.max(next_base);
                                self.cursor = None;
                            }
                            None => return Ok(out),
                        }
                    } else if consumed == 0 {
                        return Ok(out);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound && attempts < RELIST_ATTEMPTS_MAX => {
                    attempts += 1;
                    self.cursor = None;
                }
                Err(source) => {
                    return Err(Error::Io {
                        action: "reading segment",
                        path: segment::log_path(&self.dir, base),
                        source,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Reads whole batches of segment `base` from the cursor (or its start).
    /// Returns the bytes of batches that yielded records (skipped batches do
    /// not count against `max_bytes`) and whether the segment ran out.
    fn read_segment(
        &mut self,
        base: u64,
        upto: u64,
        max_bytes: usize,
        each: &mut impl FnMut(RecordView<'_>),
        out: &mut usize,
    ) -> io::Result<(usize, bool)> {
        use std::os::unix::fs::MetadataExt;
        let mut file = File::open(segment::log_path(&self.dir, base))?;
        let metadata = file.metadata()?;
        let (file_bytes, inode) = (metadata.len(), metadata.ino());
        let mut position = match self.cursor {
            Some(cursor) if cursor.base == base && cursor.inode == inode && cursor.position <= file_bytes => {
                cursor.position
            }
            // Another segment, or the cleaner rewrote this one: find the place again by offset.
            _ => 0,
        };
        let mut consumed = 0usize;
        let mut buffer = Vec::new();
        while position < file_bytes && self.next_offset < upto && consumed < max_bytes.max(1) {
            let mut header = [0u8; batch::LOG_OVERHEAD_BYTES];
            file.seek(SeekFrom::Start(position))?;
            if file.read_exact(&mut header).is_err() {
                return Ok((consumed, true));
            }
            let Ok(size) = batch::batch_size(&header) else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad batch length at byte {position} of segment {base}"),
                ));
            };
            let base_offset = batch::peek_base_offset(&header).expect("header holds a base offset");
            if base_offset >= upto {
                // Nothing below `upto` is left (compaction may leave a gap
                // before it). The writer may still be writing this batch:
                // never parse it.
                self.next_offset = self.next_offset.max(upto);
                self.cursor = Some(Cursor { base, inode, position });
                return Ok((consumed, false));
            }
            buffer.resize(size, 0);
            file.seek(SeekFrom::Start(position))?;
            file.read_exact(&mut buffer)?;
            let invalid = |e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("batch at byte {position} of segment {base}: {e}"))
            };
            let view = BatchView::parse(&buffer).map_err(invalid)?;
            assert_eq!(view.base_offset(), base_offset);
            let normalized = batch::normalized(view.as_bytes()).map_err(invalid)?;
            let view = BatchView::from_validated(&normalized);
            let before = *out;
            // Transaction markers are not records. (The topics this reads,
            // views' changelogs, hold no transactions: it does not filter
            // aborted ones, which `Log::fetch` does.)
            for record in view.records().filter(|_| !view.is_control()) {
                if record.offset >= self.next_offset && record.offset < upto {
                    each(record);
                    *out += 1;
                }
            }
            if *out > before {
                consumed += size;
            }
            if view.last_offset() >= upto {
                // The bound cuts this batch: stay on it for the next call.
                self.next_offset = upto;
                self.cursor = Some(Cursor { base, inode, position });
                return Ok((consumed, false));
            }
            self.next_offset = self.next_offset.max(view.last_offset() + 1);
            position += size as u64;
            self.cursor = Some(Cursor { base, inode, position });
        }
        Ok((consumed, position >= file_bytes))
    }
}

/// Offsets `[first, end)`.
type OffsetRange = (u64, u64);

/// The segment bases in a partition directory, sorted, and the offset
/// ranges of cleaner swaps in progress (`FIRST-END.swap`).
fn list_bases(dir: &Path) -> Result<(Vec<u64>, Vec<OffsetRange>)> {
    let mut bases = Vec::new();
    let mut swaps = Vec::new();
    for entry in fs::read_dir(dir).map_err(Error::io("listing", dir))? {
        let entry = entry.map_err(Error::io("listing", dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(base) = name.strip_suffix(".log").and_then(segment::parse_offset_name) {
            bases.push(base);
        } else if let Some(range) = name.strip_suffix(".swap").and_then(crate::segment::parse_swap_name) {
            swaps.push(range);
        }
    }
    bases.sort_unstable();
    Ok((bases, swaps))
}
