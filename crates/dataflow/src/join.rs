//! The keyed equi-join (inner and left outer), with both inputs in state.
//!
//! For an epoch with changes dL and dR to a key whose stored inputs are L
//! and R, the inner join's output changes by `dL x (R + dR) + L x dR`
//! (bilinearity), so hot keys cost what changed, not what is stored. The
//! left outer join adds `(l, None)` for every `l` while the key has no right
//! rows, so a key whose right side becomes empty or non-empty swaps those.
//!
//! Invariant: after each epoch, the output summed over epochs equals the
//! join of the stored inputs (checked against a recomputation in
//! `tests/operators.rs`).

use differential_dataflow::consolidation::{consolidate, consolidate_slice};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::Probe;
use timely::dataflow::operators::generic::Operator;

use crate::codec::decode;
use crate::collection::{Data, Key};
use crate::keyed::{Grouped, KeyOrder, KeyRuns, group_by_key, key_hash};
use crate::multiset::{self, Tags};
use crate::opstate::OperatorState;
use crate::stash::EpochStash;
use crate::{Collection, Diff, Epoch};

/// Each side's multiset per key ([`crate::multiset`], docs/state.md: join
/// layout 2): heads `0x02` / `0x03 ++ postcard(key)`, spilled rows `0x04` /
/// `0x05 ++ postcard(key) ++ postcard(row)`.
pub(crate) const LEFT: Tags = Tags { head: 2, row: 4 };
pub(crate) const RIGHT: Tags = Tags { head: 3, row: 5 };
/// The layout before (docs/state.md, join layout 1): one entry per side and
/// key, `tag ++ postcard(key)` -> `postcard(Vec<(row, i64)>)`. Rewritten
/// into layout 2 when the operator is built.
const OLD_LEFT: u8 = 0;
const OLD_RIGHT: u8 = 1;

fn total<T>(multiset: &[(T, Diff)]) -> Diff {
    multiset.iter().map(|(_, d)| *d).sum()
}

pub(crate) fn join<'s, K: Key, V: Data, W: Data>(
    left: Collection<'s, (K, V)>,
    right: Collection<'s, (K, W)>,
    name: &str,
    outer: bool,
) -> Collection<'s, (K, (V, Option<W>))> {
    let ctx = left.ctx.clone();
    let shared = ctx.shared.clone();
    let empty = |left: Collection<'s, (K, V)>| left.flat_map(|_| None::<(K, (V, Option<W>))>);
    if !ctx.claim("operator", name) {
        return empty(left);
    }
    // Both inputs feed the state: it derives from the readers of both.
    let lineage = crate::collection::union(&left.lineage, &right.lineage);
    // An inner join of inputs that never retract emits `dL x R + L x dR`,
    // all insertions; an outer one retracts `(v, None)` once a match comes.
    let monotonic = !outer && left.monotonic && right.monotonic;
    let what = format!("join '{name}'");
    let opened = ctx.operator_state(&format!("op.{name}"), &lineage).and_then(|state| {
        let mut state = state.grouped();
        migrate_layout_1::<V, W>(&mut state, &what)?;
        Ok(state)
    });
    let mut state = match opened {
        Ok(state) => state,
        Err(e) => {
            ctx.build_error(format!("join '{name}': {e}"));
            return empty(left);
        }
    };
    let stream = left
        .inner
        .inner
        .binary_frontier::<_, CapacityContainerBuilder<Vec<((K, (V, Option<W>)), Epoch, Diff)>>, _, _, _, _>(
            right.inner.inner,
            Exchange::new(|u: &((K, V), Epoch, Diff)| key_hash(&(u.0).0)),
            Exchange::new(|u: &((K, W), Epoch, Diff)| key_hash(&(u.0).0)),
            name,
            move |_capability, _info| {
                let (mut lefts, mut rights) = (EpochStash::<(K, V)>::new(), EpochStash::<(K, W)>::new());
                let mut out = Vec::new();
                let (mut left_order, mut right_order) = (KeyOrder::default(), KeyOrder::default());
                let (mut left_runs, mut right_runs) = (KeyRuns::default(), KeyRuns::default());
                move |(input1, frontier1), (input2, frontier2), output| {
                    input1.for_each(|capability, data| lefts.absorb(&capability, data));
                    input2.for_each(|capability, data| rights.absorb(&capability, data));
                    // The oldest epoch either side holds, once both frontiers passed it.
                    while let Some(epoch) = [lefts.first(), rights.first()].into_iter().flatten().min() {
                        if frontier1.frontier().less_equal(&epoch)
                            || frontier2.frontier().less_equal(&epoch)
                            || shared.failed()
                        {
                            break;
                        }
                        let (left_capability, left) = lefts.take(epoch).unzip();
                        let (right_capability, right) = rights.take(epoch).unzip();
                        let capability = left_capability.or(right_capability).expect("one side holds the epoch");
                        let (mut left, mut right) = (left.unwrap_or_default(), right.unwrap_or_default());
                        group_by_key(&mut left, &mut left_order, true, Some(&mut left_runs));
                        group_by_key(&mut right, &mut right_order, true, Some(&mut right_runs));
                        out.clear();
                        let inputs = (Grouped::new(&mut left, &left_runs), Grouped::new(&mut right, &right_runs));
                        let joined = join_epoch(epoch, inputs, outer, &mut state, &what, &mut out);
                        if let Err(e) = joined.and_then(|()| state.finish_epoch(epoch)) {
                            shared.fail(e);
                            return;
                        }
                        lefts.recycle(left);
                        rights.recycle(right);
                        output.session(&capability).give_iterator(out.drain(..).map(|(o, d)| (o, epoch, d)));
                    }
                }
            },
        );
    let joined = Collection::from_stream(stream.probe_with(&ctx.probe), ctx, lineage);
    if monotonic { joined.into_monotonic() } else { joined }
}

pub(crate) type Output<K, V, W> = Vec<((K, (V, Option<W>)), Diff)>;

/// Joins an epoch's changes key by key, in state key order, and
/// consolidates each key's output (outputs of distinct keys differ, so the
/// epoch's output is consolidated too).
fn join_epoch<K: Key, V: Data, W: Data>(
    epoch: Epoch,
    (left, right): (Grouped<'_, K, V>, Grouped<'_, K, W>),
    outer: bool,
    state: &mut OperatorState,
    what: &str,
    out: &mut Output<K, V, W>,
) -> crate::Result<()> {
    let (mut lefts, mut rights) = (left.runs().peekable(), right.runs().peekable());
    loop {
        let (l, r) = (lefts.peek().map(|(k, _)| *k), rights.peek().map(|(k, _)| *k));
        let key_bytes = match (l, r) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => return Ok(()),
        };
        let left_range = lefts.next_if(|(k, _)| *k == key_bytes).map(|(_, range)| range).unwrap_or(0..0);
        let right_range = rights.next_if(|(k, _)| *k == key_bytes).map(|(_, range)| range).unwrap_or(0..0);
        let (lefts_now, rights_now) = (&left.updates[left_range], &right.updates[right_range]);
        let d_left: Vec<(V, Diff)> = lefts_now.iter().map(|((_, v), d)| (v.clone(), *d)).collect();
        let d_right: Vec<(W, Diff)> = rights_now.iter().map(|((_, w), d)| (w.clone(), *d)).collect();
        let key = match (lefts_now.first(), rights_now.first()) {
            (Some(((key, _), _)), _) | (None, Some(((key, _), _))) => key,
            (None, None) => unreachable!("a run holds at least one update"),
        };
        let changes = KeyChanges { epoch, key, key_bytes, d_left, d_right };
        let first = out.len();
        join_key(&changes, outer, state, what, out)?;
        let consolidated = consolidate_slice(&mut out[first..]);
        out.truncate(first + consolidated);
    }
}

/// One key's changes in one epoch.
pub(crate) struct KeyChanges<'a, K, V, W> {
    pub(crate) epoch: Epoch,
    pub(crate) key: &'a K,
    pub(crate) key_bytes: &'a [u8],
    pub(crate) d_left: Vec<(V, Diff)>,
    pub(crate) d_right: Vec<(W, Diff)>,
}

/// Emits one key's output change and writes its state. Reads both heads;
/// the right rows only when left rows changed (`dL x R_new`), the left rows
/// only when right rows changed (`L_old x dR`) or, in an outer join, when
/// the key's match flips: of a spilled side, only then does it read more
/// than the head ([`crate::multiset`]).
pub(crate) fn join_key<K: Key, V: Data, W: Data>(
    changes: &KeyChanges<'_, K, V, W>,
    outer: bool,
    state: &mut OperatorState,
    what: &str,
    out: &mut Output<K, V, W>,
) -> crate::Result<()> {
    let KeyChanges { epoch, key, key_bytes, d_left, d_right } = changes;
    let left_head = multiset::head::<V>(state, LEFT, key_bytes, what)?;
    let right_head = multiset::head::<W>(state, RIGHT, key_bytes, what)?;
    let right_total_old = right_head.total() as Diff;
    let right_total_new = right_total_old + total(d_right);
    let (was_unmatched, is_unmatched) = (right_total_old <= 0, right_total_new <= 0);
    let flips = outer && was_unmatched != is_unmatched;
    let old_left: Vec<(V, Diff)> = if !d_right.is_empty() || flips {
        multiset::rows(state, LEFT, key_bytes, &left_head, what)?
    } else {
        Vec::new()
    };
    if !d_left.is_empty() {
        let mut new_right = multiset::rows(state, RIGHT, key_bytes, &right_head, what)?;
        new_right.extend(d_right.iter().cloned());
        consolidate(&mut new_right);
        // dL x R_new
        for (v, dv) in d_left {
            for (w, dw) in &new_right {
                out.push(((K::clone(key), (v.clone(), Some(w.clone()))), dv * dw));
            }
        }
    }
    // L_old x dR
    for (v, dv) in &old_left {
        for (w, dw) in d_right {
            out.push(((K::clone(key), (v.clone(), Some(w.clone()))), dv * dw));
        }
    }
    if outer {
        let mut unmatched = |rows: &[(V, Diff)], sign: Diff| {
            out.extend(rows.iter().map(|(v, d)| ((K::clone(key), (v.clone(), None)), sign * d)));
        };
        match (was_unmatched, is_unmatched) {
            (true, true) => unmatched(d_left, 1),
            (true, false) => unmatched(&old_left, -1),
            (false, true) => {
                unmatched(&old_left, 1);
                unmatched(d_left, 1);
            }
            (false, false) => {}
        }
    }
    multiset::update(state, *epoch, LEFT, key_bytes, left_head, d_left, what)?;
    multiset::update(state, *epoch, RIGHT, key_bytes, right_head, d_right, what)
}

/// Rewrites a join's state from layout 1 (a multiset per side and key, in
/// one entry) into layout 2 (docs/state.md). Each old entry goes in the
/// same atomic batch as its replacements, so a crash leaves whole keys of
/// either layout and the next build finishes the job.
fn migrate_layout_1<V: Data, W: Data>(state: &mut OperatorState, what: &str) -> crate::Result<()> {
    state.rewrite_committed(&[OLD_LEFT], |key, value, into| {
        let rows: Vec<(V, i64)> = decode(value, what)?;
        into.extend(multiset::inline_or_spilled(LEFT, &key[1..], rows));
        Ok(())
    })?;
    state.rewrite_committed(&[OLD_RIGHT], |key, value, into| {
        let rows: Vec<(W, i64)> = decode(value, what)?;
        into.extend(multiset::inline_or_spilled(RIGHT, &key[1..], rows));
        Ok(())
    })
}
