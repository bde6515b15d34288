//! Order keys: bytes of a value that compare, as byte strings, as the value
//! does under its `Ord`, so ordered state (a top-k's rows) can be kept in
//! key order and read from its start.
//!
//! Encodings: unsigned integers big-endian; signed ones with the sign bit
//! flipped; `bool` one byte; `char` as its `u32`; `OrderedF64` in IEEE
//! totalOrder (its `Ord`); strings with 0x00 escaped as 0x00 0xFF and ended
//! by 0x00 0x00; `Option` a 0 (None) or 1 (Some) byte; sequences a 1 byte
//! before each element and a 0 after the last; tuples their fields in turn;
//! `Reverse<T>` `T`'s bytes inverted.
//!
//! Invariants (property tests below):
//! - `a.cmp(b) == key(a).cmp(key(b))` for every pair of values of a type.
//! - Keys of one type are prefix-free (none is a proper prefix of another),
//!   so fields may follow each other, and inverting a key reverses its
//!   order.

use std::cmp::Reverse;

use crate::aggregate::OrderedF64;

/// A value with an order key (see the module doc). Implement it for your
/// own types by appending the keys of the fields that `Ord` compares, in
/// that order.
pub trait OrderKey: Ord {
    /// Appends this value's order key to `out`.
    fn order_key(&self, out: &mut Vec<u8>);
}

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl OrderKey for $t {
            fn order_key(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_be_bytes());
            }
        }
    )*};
}
unsigned!(u8, u16, u32, u64, u128);

macro_rules! signed {
    ($($t:ty => $u:ty),*) => {$(
        impl OrderKey for $t {
            fn order_key(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&((*self as $u) ^ (1 << (<$u>::BITS - 1))).to_be_bytes());
            }
        }
    )*};
}
signed!(i8 => u8, i16 => u16, i32 => u32, i64 => u64, i128 => u128);

impl OrderKey for usize {
    fn order_key(&self, out: &mut Vec<u8>) {
        (*self as u64).order_key(out);
    }
}

impl OrderKey for isize {
    fn order_key(&self, out: &mut Vec<u8>) {
        (*self as i64).order_key(out);
    }
}

impl OrderKey for bool {
    fn order_key(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
}

impl OrderKey for char {
    fn order_key(&self, out: &mut Vec<u8>) {
        u32::from(*self).order_key(out);
    }
}

impl OrderKey for () {
    fn order_key(&self, _out: &mut Vec<u8>) {}
}

impl OrderKey for OrderedF64 {
    fn order_key(&self, out: &mut Vec<u8>) {
        let bits = self.0.to_bits();
        let ordered = if bits >> 63 == 1 { !bits } else { bits | (1 << 63) };
        out.extend_from_slice(&ordered.to_be_bytes());
    }
}

/// Bytes, escaped so that the key is prefix-free and ordered as the bytes.
fn escaped(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

impl OrderKey for String {
    fn order_key(&self, out: &mut Vec<u8>) {
        escaped(self.as_bytes(), out);
    }
}

impl OrderKey for Box<str> {
    fn order_key(&self, out: &mut Vec<u8>) {
        escaped(self.as_bytes(), out);
    }
}

impl<T: OrderKey> OrderKey for Option<T> {
    fn order_key(&self, out: &mut Vec<u8>) {
        match self {
            None => out.push(0),
            Some(value) => {
                out.push(1);
                value.order_key(out);
            }
        }
    }
}

impl<T: OrderKey> OrderKey for Vec<T> {
    fn order_key(&self, out: &mut Vec<u8>) {
        for value in self {
            out.push(1);
            value.order_key(out);
        }
        out.push(0);
    }
}

impl<T: OrderKey + ?Sized> OrderKey for &T {
    fn order_key(&self, out: &mut Vec<u8>) {
        (**self).order_key(out);
    }
}

impl<T: OrderKey> OrderKey for Reverse<T> {
    fn order_key(&self, out: &mut Vec<u8>) {
        let start = out.len();
        self.0.order_key(out);
        out[start..].iter_mut().for_each(|b| *b = !*b);
    }
}

macro_rules! tuple {
    ($($name:ident . $i:tt),+) => {
        impl<$($name: OrderKey),+> OrderKey for ($($name,)+) {
            fn order_key(&self, out: &mut Vec<u8>) {
                $(self.$i.order_key(out);)+
            }
        }
    };
}
tuple!(A.0);
tuple!(A.0, B.1);
tuple!(A.0, B.1, C.2);
tuple!(A.0, B.1, C.2, D.3);
tuple!(A.0, B.1, C.2, D.3, E.4);
tuple!(A.0, B.1, C.2, D.3, E.4, F.5);

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key<T: OrderKey>(value: &T) -> Vec<u8> {
        let mut out = Vec::new();
        value.order_key(&mut out);
        out
    }

    fn agrees<T: OrderKey + std::fmt::Debug>(values: &[T]) -> Result<(), TestCaseError> {
        for a in values {
            for b in values {
                let (ka, kb) = (key(a), key(b));
                prop_assert_eq!(ka.cmp(&kb), a.cmp(b), "{:?} vs {:?}", a, b);
                if ka != kb {
                    prop_assert!(!ka.starts_with(&kb), "prefix-free: {:?} {:?}", a, b);
                }
            }
        }
        Ok(())
    }

    fn double() -> impl Strategy<Value = OrderedF64> {
        prop_oneof![any::<f64>(), Just(0.0), Just(-0.0), Just(f64::NAN), Just(-f64::NAN), -2.0..2.0f64]
            .prop_map(OrderedF64)
    }

    proptest! {
        #[test]
        fn integers_agree_with_ord(a in prop::collection::vec((any::<i64>(), any::<u32>(), any::<i8>()), 1..10)) {
            agrees(&a)?;
        }

        #[test]
        fn strings_and_options_agree_with_ord(
            a in prop::collection::vec((prop::option::of("[ab\\x00]{0,6}"), any::<bool>()), 1..12)
        ) {
            agrees(&a)?;
        }

        #[test]
        fn doubles_and_reversed_values_agree_with_ord(
            a in prop::collection::vec((double(), -3..3i32, "[ab\\x00]{0,4}"), 1..12)
        ) {
            let a: Vec<_> = a.into_iter().map(|(d, i, s)| (d, Reverse(i), Reverse(s))).collect();
            agrees(&a)?;
        }

        #[test]
        fn sequences_agree_with_ord(a in prop::collection::vec(prop::collection::vec(0..3u8, 0..4), 1..12)) {
            agrees(&a)?;
            let reversed: Vec<Reverse<Vec<u8>>> = a.into_iter().map(Reverse).collect();
            agrees(&reversed)?;
        }
    }
}
