//! JSON text checked as strictly as parsing it into a `serde_json::Value`
//! would check it, without building the tree.
//!
//! serde_json's fast paths for values it skips (`IgnoredAny`, `RawValue`)
//! check only the syntax: a lone surrogate escape (`"\ud800"`) or a number
//! out of range (`1e400`) passes them, and a later parse into a tree fails.
//! A reader that keeps a row as text (a view's changelog key) must refuse
//! such a row where it reads it, naming the offset, not fail later.
//!
//! Invariant: [`check`] accepts exactly the texts `serde_json::from_slice::
//! <serde_json::Value>` accepts (tested against it).

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Checks that `text` is one JSON value that parses into a tree.
pub fn check(text: &[u8]) -> Result<(), serde_json::Error> {
    serde_json::from_slice::<Checked>(text).map(|_| ())
}

/// A value visited through `deserialize_any`, so that strings are unescaped
/// (surrogates checked) and numbers parsed (range checked), then dropped:
/// what a reader that takes some of a row's values as raw text deserializes
/// the others as, instead of `IgnoredAny`.
#[derive(Debug)]
pub struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Checked, D::Error> {
        deserializer.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_entry::<Checked, Checked>()?.is_some() {}
        Ok(Checked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_accepts_what_a_tree_accepts_and_nothing_else() {
        let texts = [
            r#"{"a":1,"b":"x","c":null,"d":true,"e":[1,2.5,-0,{"f":"\u00e9"}]}"#,
            r#"{"a":"\ud83d\ude00"}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\udc00x"}"#,
            r#"{"a":1e400}"#,
            r#"{"a":-1e400}"#,
            r#"{"a":1e-400}"#,
            r#"{"a":123456789012345678901234567890}"#,
            r#"{"\ud800":1}"#,
            r#"{"a":1,}"#,
            r#"{"a":01}"#,
            r#"{"a":"tab	raw"}"#,
            r#" [1, 2] "#,
            r#"{"a":1} {"b":2}"#,
            r#""#,
            r#"nul"#,
            r#"{"a":"\x"}"#,
        ];
        for text in texts {
            let tree = serde_json::from_str::<serde_json::Value>(text).is_ok();
            assert_eq!(check(text.as_bytes()).is_ok(), tree, "{text}");
        }
        // Deep nesting: the same recursion limit.
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(check(deep.as_bytes()).is_ok(), serde_json::from_str::<serde_json::Value>(&deep).is_ok());
    }
}
