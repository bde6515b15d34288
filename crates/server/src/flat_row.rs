//! Flat rows: a view row that is a JSON object of plain values, scanned in
//! one pass over its bytes without serde. It is the common case of a hub's
//! changes (a view of scalar columns writes exactly this), and a general
//! parser spends most of its time on what such a row never has.
//!
//! A row is flat when it is one object (JSON whitespace around its tokens
//! allowed) whose keys are strings without escapes and whose values are
//! each a string without escapes, an integer of at most
//! [`INTEGER_DIGITS_MAX`] digits without a leading zero (and not `-0`),
//! `true`, `false` or `null`. Anything else is declined and the caller
//! takes the general path (`copy_line`'s serde one, then the tree).
//!
//! Invariant: [`scan`] accepts only texts that a parse into a
//! `serde_json::Value` accepts, and then gives each column the exact text
//! of its value in that tree (the last of duplicate keys, as the tree
//! keeps), so that what is written from it is what the tree path writes
//! (tested against it on generated rows in `copy_line`).

/// The most digits of an integer a flat row holds (so it is an `i64`).
pub(crate) const INTEGER_DIGITS_MAX: usize = 18;

/// The most columns a flat row is scanned for (more: the general path).
pub(crate) const COLUMNS_MAX: usize = 32;

/// Each column's value in `row` as its JSON text (None: absent), when
/// `row` is flat; None when it is not (then nothing is said about it).
pub(crate) fn scan<'r>(
    row: &'r str,
    columns: &[(String, millpond_sql::Type)],
) -> Option<[Option<&'r str>; COLUMNS_MAX]> {
    if columns.len() > COLUMNS_MAX {
        return None;
    }
    let mut slots = [None; COLUMNS_MAX];
    let mut cursor = Cursor { text: row, at: 0 };
    cursor.space();
    cursor.expect(b'{')?;
    cursor.space();
    if cursor.peek() == Some(b'}') {
        cursor.at += 1;
    } else {
        loop {
            let key = cursor.string()?;
            let key = &key[1..key.len() - 1];
            cursor.space();
            cursor.expect(b':')?;
            cursor.space();
            let value = cursor.value()?;
            if let Some(at) = columns.iter().position(|(name, _)| name == key) {
                slots[at] = Some(value);
            }
            cursor.space();
            match cursor.next()? {
                b',' => cursor.space(),
                b'}' => break,
                _ => return None,
            }
        }
    }
    cursor.space();
    (cursor.at == row.len()).then_some(slots)
}

/// A position in the row's text.
struct Cursor<'r> {
    text: &'r str,
    at: usize,
}

impl<'r> Cursor<'r> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    /// Skips JSON whitespace.
    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// A string without escapes or control characters, with its quotes.
    fn string(&mut self) -> Option<&'r str> {
        let start = self.at;
        self.expect(b'"')?;
        let bytes = self.text.as_bytes();
        let end = bytes[self.at..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)? + self.at;
        if bytes[end] != b'"' {
            return None;
        }
        self.at = end + 1;
        // Quotes are ASCII: the slice is on character boundaries.
        Some(&self.text[start..self.at])
    }

    /// A plain value's text.
    fn value(&mut self) -> Option<&'r str> {
        match self.peek()? {
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => self.integer(),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            _ => None,
        }
    }

    fn literal(&mut self, word: &'static str) -> Option<&'r str> {
        let text = self.text.get(self.at..self.at + word.len()).filter(|text| *text == word)?;
        self.at += word.len();
        Some(text)
    }

    /// An integer as JSON writes it, within [`INTEGER_DIGITS_MAX`] digits;
    /// a fraction or exponent after it fails the object's parse.
    fn integer(&mut self) -> Option<&'r str> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        let text = &self.text[start..self.at];
        is_plain_integer(text).then_some(text)
    }
}

/// An integer that a JSON number round-trips as written (no sign but `-`,
/// no leading zero, not `-0`, at most [`INTEGER_DIGITS_MAX`] digits).
pub(crate) fn is_plain_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty()
        && digits.len() <= INTEGER_DIGITS_MAX
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && text != "-0"
}
