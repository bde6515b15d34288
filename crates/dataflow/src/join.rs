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

use differential_dataflow::consolidation::consolidate;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::Probe;
use timely::dataflow::operators::generic::Operator;

use crate::codec::{decode, encode};
use crate::collection::{Data, Key};
use crate::keyed::key_hash;
use crate::opstate::OperatorState;
use crate::stash::EpochStash;
use crate::{Collection, Diff, Epoch};

const LEFT: u8 = 0;
const RIGHT: u8 = 1;

fn side_key(side: u8, key_bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + key_bytes.len());
    out.push(side);
    out.extend_from_slice(key_bytes);
    out
}

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
    let mut state = match ctx.operator_state(&format!("op.{name}"), &lineage) {
        Ok(state) => state,
        Err(e) => {
            ctx.build_error(format!("join '{name}': {e}"));
            return empty(left);
        }
    };
    let what = format!("join '{name}'");
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
                        consolidate(&mut left);
                        consolidate(&mut right);
                        out.clear();
                        if let Err(e) = join_epoch(epoch, &left, &right, outer, &mut state, &what, &mut out) {
                            shared.fail(e);
                            return;
                        }
                        state.finish_epoch(epoch);
                        consolidate(&mut out);
                        output.session(&capability).give_iterator(out.drain(..).map(|(o, d)| (o, epoch, d)));
                    }
                }
            },
        );
    Collection::from_stream(stream.probe_with(&ctx.probe), ctx, lineage)
}

type Output<K, V, W> = Vec<((K, (V, Option<W>)), Diff)>;

fn join_epoch<K: Key, V: Data, W: Data>(
    epoch: Epoch,
    left: &[((K, V), Diff)],
    right: &[((K, W), Diff)],
    outer: bool,
    state: &mut OperatorState,
    what: &str,
    out: &mut Output<K, V, W>,
) -> crate::Result<()> {
    // Both inputs are sorted by key: walk the union of their keys.
    let (mut i, mut j) = (0, 0);
    while i < left.len() || j < right.len() {
        let key = match (left.get(i), right.get(j)) {
            (Some(((a, _), _)), Some(((b, _), _))) => a.min(b).clone(),
            (Some(((a, _), _)), None) => a.clone(),
            (None, Some(((b, _), _))) => b.clone(),
            (None, None) => unreachable!("loop condition"),
        };
        let left_end = i + left[i..].iter().take_while(|((k, _), _)| *k == key).count();
        let right_end = j + right[j..].iter().take_while(|((k, _), _)| *k == key).count();
        let d_left: Vec<(V, Diff)> = left[i..left_end].iter().map(|((_, v), d)| (v.clone(), *d)).collect();
        let d_right: Vec<(W, Diff)> = right[j..right_end].iter().map(|((_, w), d)| (w.clone(), *d)).collect();
        (i, j) = (left_end, right_end);

        let key_bytes = encode(&key);
        let (left_key, right_key) = (side_key(LEFT, &key_bytes), side_key(RIGHT, &key_bytes));
        let old_left: Vec<(V, Diff)> = state.get(&left_key)?.map(|b| decode(&b, what)).transpose()?.unwrap_or_default();
        let old_right: Vec<(W, Diff)> =
            state.get(&right_key)?.map(|b| decode(&b, what)).transpose()?.unwrap_or_default();
        let mut new_left = old_left.clone();
        new_left.extend(d_left.iter().cloned());
        consolidate(&mut new_left);
        let mut new_right = old_right.clone();
        new_right.extend(d_right.iter().cloned());
        consolidate(&mut new_right);

        // dL x R_new + L_old x dR
        for (v, dv) in &d_left {
            for (w, dw) in &new_right {
                out.push(((key.clone(), (v.clone(), Some(w.clone()))), dv * dw));
            }
        }
        for (v, dv) in &old_left {
            for (w, dw) in &d_right {
                out.push(((key.clone(), (v.clone(), Some(w.clone()))), dv * dw));
            }
        }
        if outer {
            let (was_unmatched, is_unmatched) = (total(&old_right) <= 0, total(&new_right) <= 0);
            if was_unmatched {
                out.extend(old_left.iter().map(|(v, d)| ((key.clone(), (v.clone(), None)), -d)));
            }
            if is_unmatched {
                out.extend(new_left.iter().map(|(v, d)| ((key.clone(), (v.clone(), None)), *d)));
            }
        }
        // Only a side that changed is rewritten; an empty side is deleted.
        for (changed, side_key, empty, multiset) in [
            (!d_left.is_empty(), left_key, new_left.is_empty(), encode(&new_left)),
            (!d_right.is_empty(), right_key, new_right.is_empty(), encode(&new_right)),
        ] {
            match (changed, empty) {
                (false, _) => {}
                (true, true) => state.delete(epoch, side_key),
                (true, false) => state.put(epoch, side_key, multiset),
            }
        }
    }
    Ok(())
}
