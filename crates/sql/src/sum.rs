//! `ExactSum`: the exact sum of integers or decimal units, however many are
//! added and retracted, in 192 bits (a value below 2^127 times a
//! multiplicity below 2^63, summed 2^63 times at most in one direction,
//! stays below 2^191).
//!
//! Invariant: the sum is a function of the multiset of (value, diff) added,
//! in any order (retracting exactly undoes adding), and it is read back
//! only if it fits an `i128`: a SUM past that range is an overflow, never a
//! wrapped value.

use serde::{Deserialize, Serialize};

/// `high · 2^128 + low`, two's complement over 192 bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ExactSum {
    high: i64,
    low: u128,
}

impl ExactSum {
    /// Adds `units · diff` exactly.
    pub(crate) fn add_product(&mut self, units: i128, diff: i64) {
        let negative = (units < 0) != (diff < 0);
        let (a, b) = (units.unsigned_abs(), u128::from(diff.unsigned_abs()));
        let (a_high, a_low) = (a >> 64, a & u128::from(u64::MAX));
        let (low, carry) = (a_low * b).overflowing_add((a_high * b) << 64);
        let high = ((a_high * b) >> 64) as i64 + i64::from(carry);
        let (high, low) = if negative { negate(high, low) } else { (high, low) };
        let (sum_low, carry) = self.low.overflowing_add(low);
        self.low = sum_low;
        self.high = self.high.wrapping_add(high).wrapping_add(i64::from(carry));
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.high == 0 && self.low == 0
    }

    /// The sum, if it fits an `i128`.
    pub(crate) fn to_i128(self) -> Option<i128> {
        let fits = (self.high == 0 && self.low >> 127 == 0) || (self.high == -1 && self.low >> 127 == 1);
        fits.then_some(self.low as i128)
    }
}

/// The two's complement negation of `high · 2^128 + low`.
fn negate(high: i64, low: u128) -> (i64, u128) {
    let low_negated = (!low).wrapping_add(1);
    let high_negated = (!high).wrapping_add(i64::from(low == 0));
    (high_negated, low_negated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(items: &[(i128, i64)]) -> ExactSum {
        let mut sum = ExactSum::default();
        for &(units, diff) in items {
            sum.add_product(units, diff);
        }
        sum
    }

    #[test]
    fn small_sums_equal_i128_arithmetic() {
        let items = [(5, 3), (-7, 2), (i64::MAX as i128, -4), (1 << 100, 1), (-(1 << 100), 1), (123_456, -9)];
        let expected: i128 = items.iter().map(|(u, d)| u * *d as i128).sum();
        assert_eq!(sum(&items).to_i128(), Some(expected));
        assert_eq!(sum(&[(-1, 1)]).to_i128(), Some(-1));
        assert_eq!(sum(&[(i128::MIN + 1, 1)]).to_i128(), Some(i128::MIN + 1));
    }

    #[test]
    fn a_sum_past_i128_is_an_overflow_and_comes_back_when_retracted() {
        let big = 10i128.pow(38) - 1; // the largest DECIMAL(38, s), in units
        let over = sum(&[(big, 1), (big, 1)]);
        assert_eq!(over.to_i128(), None, "2 · (10^38 - 1) does not fit");
        let mut back = over;
        back.add_product(big, -1);
        assert_eq!(back.to_i128(), Some(big), "retracting one brings it back exactly");
        let mut negative = sum(&[(-big, i64::MAX)]);
        assert_eq!(negative.to_i128(), None);
        negative.add_product(big, i64::MAX);
        assert!(negative.is_zero(), "adding and retracting in any order cancels");
    }

    #[test]
    fn retraction_in_any_order_cancels() {
        let items: Vec<(i128, i64)> =
            (0..200).map(|i| ((i as i128 - 100) * 10i128.pow(36), ((i * 7919) % 41) as i64 - 20)).collect();
        let mut total = sum(&items);
        for &(units, diff) in items.iter().rev() {
            total.add_product(units, -diff);
        }
        assert!(total.is_zero());
    }
}
