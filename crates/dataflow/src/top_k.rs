//! Top-k per key over an ordered multiset of rows in operator state, so an
//! epoch reads the first rows of a key and the rows it changes, never the
//! rest (docs/state.md, "Top-k layout 1").
//!
//! A key's rows are an [`OrderedSet`] ordered by the caller's order key of
//! each row ([`crate::OrderKey`] for Rust values, the SQL crate's sort keys
//! for rows). Its head, `0x00 ++ postcard(key)` -> `postcard(OrderedSet)`,
//! holds the rows inline while small; spilled, each row is an entry
//! `0x01 ++ postcard(key) ++ suffix`, read in order by a prefix scan that
//! stops once it has the first `limit` rows.
//!
//! An epoch that changes a key reads its first rows (up to `limit`
//! multiplicities of rows with positive counts) before and after applying
//! the changes, and one entry per changed row of a spilled key. When the
//! old first rows were `limit` already and every change sorts after them,
//! the output cannot change and the second read is skipped: the common case
//! of a top-k over a growing key.
//!
//! Invariants:
//! - A key with no rows has no head and no row entries (and
//!   [`OrderedSet`]'s own).
//! - The output summed over epochs is `logic` of each key's current first
//!   rows (checked against a recomputation in `tests/operators.rs` and
//!   `tests/state_cost.rs`).

use differential_dataflow::consolidation::consolidate;

use crate::codec::{decode, encode};
use crate::collection::{Data, Key};
use crate::error::Result;
use crate::keyed::{Batching, keyed_unary};
use crate::multiset::tagged;
use crate::opstate::OperatorState;
use crate::ordered_set::{self, Entry, OrderedSet, counts_reach, decoded};
use crate::{Collection, Diff};

const HEAD: u8 = 0;
const ROW: u8 = 1;

/// The keyspace of the operator named `name`: new with this layout, so a
/// job whose state has the layout before (a `reduce` over the whole
/// multiset) is refused as new state rather than misread.
pub(crate) fn keyspace(name: &str) -> String {
    format!("topk.{name}")
}

/// Per key, `logic` of the first rows by `order_key` (rows with positive
/// counts, in order, until their counts reach `limit`): see the module doc.
/// With `bounded` the input only inserts (asserted), so a key keeps only
/// its first rows: a row pushed past them can never return.
pub(crate) fn top_k_by<'s, K, V, O, F, L>(
    input: Collection<'s, (K, V)>,
    name: &str,
    limit: usize,
    bounded: bool,
    order_key: F,
    mut logic: L,
) -> Collection<'s, (K, O)>
where
    K: Key,
    V: Data,
    O: Data,
    F: Fn(&V, &mut Vec<u8>) + 'static,
    L: FnMut(&K, &[(V, Diff)], &mut Vec<(O, Diff)>) + 'static,
{
    let what = format!("top-k '{name}'");
    let (mut scratch, mut order_scratch) = (Vec::new(), Vec::new());
    let old_keyspace = format!("op.{name}");
    let order_key = std::rc::Rc::new(order_key);
    let (move_key, move_what, move_from) = (order_key.clone(), what.clone(), old_keyspace.clone());
    let open = move |mut state: OperatorState, due: bool| {
        if due {
            move_reduce_layout::<V>(&mut state, &move_from, &*move_key, &move_what)?;
        }
        Ok(state.grouped())
    };
    let moved_from = Some(old_keyspace.as_str());
    keyed_unary(
        input,
        name,
        &keyspace(name),
        moved_from,
        open,
        Batching::Consolidated,
        move |epoch, updates, state, out| {
            updates.for_each_key(|key, key_bytes, values| {
                let key_bytes = key_bytes.to_vec();
                let (head_key, rows) = (tagged(HEAD, &[&key_bytes]), tagged(ROW, &[&key_bytes]));
                let set = read_set(state, &head_key, &what)?;
                let old = set.first(state, &rows, limit, &what)?;
                let full = counts_reach(&old, limit);
                // Over an input that only inserts, rows after a full top-k can
                // never enter it: not kept (nor encoded past their order key).
                let boundary = old.last().filter(|_| bounded && full);
                let boundary_key = boundary.map(|last| &last.suffix[..last.order_len as usize]);
                let mut changes = Vec::new();
                for ((_, row), diff) in values {
                    assert!(!bounded || *diff > 0, "{what}: an input that only inserts retracted a row");
                    order_scratch.clear();
                    order_key(row, &mut order_scratch);
                    if boundary_key.is_none_or(|b| order_scratch.as_slice() <= b) {
                        changes.push(Entry::new(row, |out| out.extend_from_slice(&order_scratch), *diff));
                    }
                }
                ordered_set::consolidate(&mut changes);
                if let Some(last) = boundary {
                    changes.retain(|c| c.suffix < last.suffix); // ties on the order key
                }
                if bounded {
                    // Nor the rows this epoch pushes past the first ones at once.
                    ordered_set::keep_first(&old, &mut changes, limit);
                }
                if changes.is_empty() {
                    return Ok(());
                }
                let settled = full && old.last().is_some_and(|last| changes.iter().all(|c| c.suffix > last.suffix));
                let mut set = set.apply(state, epoch, &rows, changes, &what)?;
                if bounded {
                    set = set.trim(state, epoch, &rows, limit, &what)?;
                }
                match set.is_empty() {
                    true => state.delete(epoch, head_key),
                    false => state.put(epoch, head_key, encode(&set)),
                }
                if settled {
                    return Ok(());
                }
                let new = set.first(state, &rows, limit, &what)?;
                if new == old {
                    return Ok(());
                }
                scratch.clear();
                logic(key, &decoded(&old, &what)?, &mut scratch);
                scratch.iter_mut().for_each(|(_, d)| *d = -*d);
                logic(key, &decoded(&new, &what)?, &mut scratch);
                consolidate(&mut scratch);
                out.extend(scratch.drain(..).map(|(o, d)| ((key.clone(), o), d)));
                Ok(())
            })
        },
    )
}

/// Moves a top-k's state from the layout before (a `reduce`'s: per key,
/// `postcard(key)` -> its whole multiset `postcard(Vec<(row, diff)>)`, in
/// keyspace `op.NAME`) into top-k layout 1, key by key in atomic batches.
fn move_reduce_layout<V: Data>(
    state: &mut OperatorState,
    old_keyspace: &str,
    order_key: &impl Fn(&V, &mut Vec<u8>),
    what: &str,
) -> Result<()> {
    state.move_committed_from(old_keyspace, |key_bytes, value, entries| {
        let multiset: Vec<(V, Diff)> = decode(value, what)?;
        let mut rows: Vec<Entry> = multiset.iter().map(|(v, d)| Entry::new(v, |out| order_key(v, out), *d)).collect();
        ordered_set::consolidate(&mut rows);
        let (set, spilled) = OrderedSet::stored(rows);
        if !set.is_empty() {
            entries.push((tagged(HEAD, &[key_bytes]), encode(&set)));
        }
        let prefix = tagged(ROW, &[key_bytes]);
        entries.extend(spilled.into_iter().map(|(suffix, value)| ([prefix.as_slice(), &suffix].concat(), value)));
        Ok(())
    })
}

fn read_set(state: &OperatorState, head_key: &[u8], what: &str) -> Result<OrderedSet> {
    let set: OrderedSet = match state.get(head_key)? {
        Some(bytes) => decode(&bytes, what)?,
        None => OrderedSet::default(),
    };
    set.check(what);
    Ok(set)
}
