//! A filter of the rows (or keys) one worker's share of some state may
//! hold: a split block Bloom filter (each row sets one bit in each of the
//! eight words of one 64-byte block), so that a row the state has never
//! held costs a hash and one cache line instead of a state read. Almost
//! every change of a view that keeps adding rows (a pass-through of a
//! stream, an aggregate over new keys) is such a row, and so is every new
//! key of an operator (`view_fold` keeps one per view fold, `opstate` one
//! per operator state).
//!
//! The filter is *complete* once it covers every row the state could hold:
//! a new state's filter is complete from the start; a resumed one's
//! becomes complete when a scan of the committed rows, done a step at a
//! time between epochs, reaches the end (rows written meanwhile are added
//! as they are written). Only a complete filter may answer "not held".
//!
//! Invariants:
//! - no false negatives: every row with a non-zero multiplicity in the
//!   state (committed or in the overlay) was added, once the filter is
//!   complete (asserted against the state in debug builds by the fold);
//! - rows are never removed (a row gone is at worst a false positive);
//! - its size is bounded: layers double from [`LAYER_ROWS_MIN`] rows and
//!   stop at [`FILTER_BYTES_MAX`]; past it the filter is dropped and every
//!   row is read, as without a filter.

/// Bits per row a layer is sized for (about 0.5 % false positives).
const BITS_PER_ROW: u64 = 16;
/// The first layer's rows.
pub(crate) const LAYER_ROWS_MIN: u64 = 1 << 16;
/// The most bytes one fold's filter may take, over all its layers.
pub(crate) const FILTER_BYTES_MAX: u64 = 256 << 20;
/// Words per block: one 64-byte cache line.
const BLOCK_WORDS: usize = 8;

/// One fixed-size split block Bloom filter.
#[derive(Debug)]
struct Layer {
    words: Vec<u64>,
    /// Rows it is sized for; the next row goes to a new layer.
    capacity_rows: u64,
    rows: u64,
}

impl Layer {
    fn new(capacity_rows: u64) -> Layer {
        let blocks = (capacity_rows * BITS_PER_ROW).div_ceil(64 * BLOCK_WORDS as u64).max(1);
        Layer { words: vec![0; blocks as usize * BLOCK_WORDS], capacity_rows, rows: 0 }
    }

    fn bytes(&self) -> u64 {
        self.words.len() as u64 * 8
    }

    /// The block of `hash` (its high half, scaled to the block count) and
    /// the bit of each of its words (from the hash times an odd constant).
    fn probe(&self, hash: u64) -> (usize, [u64; BLOCK_WORDS]) {
        let blocks = (self.words.len() / BLOCK_WORDS) as u64;
        let block = ((hash >> 32) * blocks) >> 32;
        let mut spread = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut bits = [0u64; BLOCK_WORDS];
        for bit in &mut bits {
            *bit = 1 << (spread >> 58);
            spread = spread.rotate_left(6);
        }
        (block as usize * BLOCK_WORDS, bits)
    }

    fn insert(&mut self, hash: u64) {
        let (at, bits) = self.probe(hash);
        for (word, bit) in self.words[at..at + BLOCK_WORDS].iter_mut().zip(bits) {
            *word |= bit;
        }
        self.rows += 1;
    }

    /// Without early exits (`&`, not `&&`): the check of a row that is not
    /// held (the common case) reads every layer, and with no branch between
    /// them the layers' cache misses overlap instead of following each other.
    fn may_contain(&self, hash: u64) -> bool {
        let (at, bits) = self.probe(hash);
        self.words[at..at + BLOCK_WORDS].iter().zip(bits).fold(true, |all, (word, bit)| all & (word & bit != 0))
    }
}

/// The rows a fold's share of a view may hold.
#[derive(Debug)]
pub(crate) struct HeldFilter {
    layers: Vec<Layer>,
    complete: bool,
    bytes_max: u64,
}

/// A row's hash for the filter: the routing hash mixed (splitmix64's
/// finalizer), since the rows of one worker share the routing hash's
/// residue modulo the worker count.
pub(crate) fn row_hash(routing_hash: u64) -> u64 {
    let mut z = routing_hash;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl HeldFilter {
    /// A filter, complete from the start if the state holds no row yet.
    pub(crate) fn new(complete: bool) -> HeldFilter {
        Self::with_bytes_max(complete, FILTER_BYTES_MAX)
    }

    fn with_bytes_max(complete: bool, bytes_max: u64) -> HeldFilter {
        HeldFilter { layers: vec![Layer::new(LAYER_ROWS_MIN)], complete, bytes_max }
    }

    /// The filter covers every row the state could hold (no more scan).
    pub(crate) fn complete(&mut self) {
        self.complete = true;
    }

    #[cfg(test)]
    fn is_complete(&self) -> bool {
        self.complete
    }

    /// Adds a row that the state may hold. Past [`FILTER_BYTES_MAX`] the
    /// filter is dropped (it can no longer say "not held").
    pub(crate) fn insert(&mut self, hash: u64) {
        let Some(last) = self.layers.last() else { return };
        if last.rows >= last.capacity_rows {
            let next = Layer::new(last.capacity_rows * 2);
            if self.bytes() + next.bytes() > self.bytes_max {
                self.layers.clear();
                self.complete = false;
                return;
            }
            self.layers.push(next);
        }
        self.layers.last_mut().expect("a kept filter has a layer").insert(hash);
    }

    /// Whether the state certainly holds no such row: only a complete
    /// filter answers so.
    pub(crate) fn surely_absent(&self, hash: u64) -> bool {
        let any = self.layers.iter().fold(false, |any, layer| any | layer.may_contain(hash));
        self.complete && !self.layers.is_empty() && !any
    }

    fn bytes(&self) -> u64 {
        self.layers.iter().map(Layer::bytes).sum()
    }
}

/// One step of the scan that fills a filter from a state's committed
/// keys: `scan(start, limit, visit)` visits at most `limit` keys from
/// `start` on, in key order, and each key that `hash` gives a hash for
/// goes in. Returns where the next step starts, or `None` once the scan
/// reached the end (then the filter is complete).
pub(crate) fn fill_step<E>(
    filter: &mut HeldFilter,
    start: &[u8],
    limit: usize,
    scan: impl FnOnce(&[u8], usize, &mut dyn FnMut(&[u8])) -> Result<(), E>,
    hash: impl Fn(&[u8]) -> Option<u64>,
) -> Result<Option<Vec<u8>>, E> {
    let (mut last, mut visited) = (None, 0);
    scan(start, limit, &mut |key| {
        if let Some(hash) = hash(key) {
            filter.insert(hash);
        }
        last = Some(key.to_vec());
        visited += 1;
    })?;
    match last.filter(|_| visited == limit) {
        Some(mut next) => {
            next.push(0); // the least key after the last one scanned
            Ok(Some(next))
        }
        None => {
            filter.complete();
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{FILTER_BYTES_MAX, HeldFilter, LAYER_ROWS_MIN, row_hash};

    #[test]
    fn a_row_added_is_never_surely_absent_and_few_others_are_taken_for_held() {
        let mut filter = HeldFilter::new(true);
        let rows = 5 * LAYER_ROWS_MIN; // three layers
        for n in 0..rows {
            filter.insert(row_hash(n * 2));
        }
        assert!((0..rows).all(|n| !filter.surely_absent(row_hash(n * 2))), "no false negative");
        let false_positives = (0..rows).filter(|n| !filter.surely_absent(row_hash(n * 2 + 1))).count();
        assert!(false_positives < rows as usize / 50, "{false_positives} false positives of {rows}");
    }

    #[test]
    fn an_incomplete_filter_never_says_absent() {
        let mut filter = HeldFilter::new(false);
        assert!(!filter.surely_absent(row_hash(7)));
        filter.complete();
        assert!(filter.surely_absent(row_hash(7)));
    }

    #[test]
    fn past_its_cap_the_filter_is_dropped_and_says_nothing() {
        let bytes_max = 1 << 20;
        let mut filter = HeldFilter::with_bytes_max(true, bytes_max);
        let mut n = 0;
        while !filter.layers.is_empty() {
            filter.insert(row_hash(n));
            n += 1;
            assert!(filter.bytes() <= bytes_max);
        }
        // Layers of 64 Ki, 128 Ki and 256 Ki rows (896 KiB); the next one would pass 1 MiB.
        assert_eq!(n, 7 * LAYER_ROWS_MIN + 1);
        assert!(!filter.surely_absent(row_hash(u64::MAX)), "a dropped filter answers nothing");
        assert!(!filter.is_complete());
    }

    #[test]
    fn the_default_cap_holds_a_hundred_million_rows() {
        let (mut rows, mut layer, mut bytes) = (0, LAYER_ROWS_MIN, 0);
        while bytes + layer * 2 <= FILTER_BYTES_MAX {
            bytes += layer * 2; // 16 bits per row
            rows += layer;
            layer *= 2;
        }
        assert!(rows > 100_000_000, "{rows}");
    }
}
