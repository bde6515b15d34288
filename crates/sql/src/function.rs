//! The scalar function library beyond the operators: math (power, sqrt,
//! ln, ...), text (lpad, left, repeat, initcap, ...), `regexp_replace`,
//! `SIMILAR TO` and LIKE's `ESCAPE`, and `to_char` of timestamps, each as
//! PostgreSQL computes it.
//!
//! Invariants:
//! - Total: every function returns a value or NULL for every input (a NULL
//!   argument, a result out of a function's domain such as `sqrt(-1)` or
//!   `ln(0)`, or one past [`TEXT_RESULT_CHARS_MAX`]) and never panics, as
//!   the operators' division by zero and overflow are NULL (docs/sql.md).
//! - A function computed twice on the same arguments gives the same value:
//!   nothing reads the clock, the environment or a random source.

use crate::time::{MICROS_PER_DAY, MICROS_PER_SECOND, civil_from_days, days_from_civil};

/// The longest text a function builds (lpad, rpad, repeat), in characters:
/// a longer result is NULL, so that one row cannot take a worker's memory.
pub(crate) const TEXT_RESULT_CHARS_MAX: usize = 1 << 20;

/// A DOUBLE result, NULL where it is not a finite number (out of the
/// function's domain, or an overflow).
pub(crate) fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// `lpad(text, length, fill)` and `rpad`: `text` cut or filled to `length`
/// characters (cut on the right either way, as PostgreSQL does).
pub(crate) fn pad(text: &str, length: i64, fill: &str, left: bool) -> Option<String> {
    let length = usize::try_from(length.max(0)).ok()?;
    if length > TEXT_RESULT_CHARS_MAX {
        return None;
    }
    let chars: Vec<char> = text.chars().collect();
    if chars.len() >= length || fill.is_empty() {
        return Some(chars.into_iter().take(length).collect());
    }
    let padding: String = fill.chars().cycle().take(length - chars.len()).collect();
    Some(if left { padding + text } else { text.to_owned() + &padding })
}

/// `left(text, n)`: the first `n` characters; a negative `n`, all but the
/// last `-n`. `right` likewise from the end.
pub(crate) fn left_right(text: &str, n: i64, left: bool) -> String {
    let chars: Vec<char> = text.chars().collect();
    let len = chars.len() as i64;
    let keep = if n >= 0 { n.min(len) } else { (len + n).max(0) } as usize;
    match left {
        true => chars[..keep].iter().collect(),
        false => chars[chars.len() - keep..].iter().collect(),
    }
}

/// `repeat(text, n)`: empty for `n` below 1.
pub(crate) fn repeat(text: &str, n: i64) -> Option<String> {
    let n = usize::try_from(n.max(0)).ok()?;
    if text.chars().count().checked_mul(n)? > TEXT_RESULT_CHARS_MAX {
        return None;
    }
    Some(text.repeat(n))
}

/// `initcap(text)`: each word's first letter upper case, the rest lower
/// (a word is a run of letters and digits).
pub(crate) fn initcap(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_word = false;
    for c in text.chars() {
        match in_word {
            true => out.extend(c.to_lowercase()),
            false => out.extend(c.to_uppercase()),
        }
        in_word = c.is_alphanumeric();
    }
    out
}

/// `chr(n)`: the character of code point `n`; NULL for 0 and for what is
/// no character.
pub(crate) fn chr(n: i64) -> Option<String> {
    let c = char::from_u32(u32::try_from(n).ok()?)?;
    (c != '\0').then(|| c.to_string())
}

/// A PostgreSQL regexp replacement (`\1` to `\9`, `\&` the whole match,
/// `\\` a backslash) in the regex crate's syntax (`${1}`, `$$`).
pub(crate) fn replacement(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek().copied()) {
            ('\\', Some(d @ '1'..='9')) => {
                chars.next();
                out.push_str(&format!("${{{d}}}"));
            }
            ('\\', Some('&')) => {
                chars.next();
                out.push_str("${0}");
            }
            ('\\', Some('\\')) => {
                chars.next();
                out.push('\\');
            }
            ('$', _) => out.push_str("$$"),
            (c, _) => out.push(c),
        }
    }
    out
}

/// regexp_replace's flags: (global, case-insensitive); `None` for a flag
/// other than `g`, `i` and `c` (case-sensitive, the default).
pub(crate) fn regexp_flags(flags: &str) -> Option<(bool, bool)> {
    let (mut global, mut case_insensitive) = (false, false);
    for flag in flags.chars() {
        match flag {
            'g' => global = true,
            'i' => case_insensitive = true,
            'c' => case_insensitive = false,
            _ => return None,
        }
    }
    Some((global, case_insensitive))
}

/// A `SIMILAR TO` pattern as an anchored regular expression: `%` any run,
/// `_` any character, `|`, `*`, `+`, `?`, `{m,n}`, `(...)` and `[...]` as
/// in regular expressions, every other character itself; `escape` (when
/// there is one) makes the next character literal.
pub(crate) fn similar_to_regex(pattern: &str, escape: Option<char>) -> String {
    let mut out = String::from("^(?s:");
    let mut chars = pattern.chars();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            match chars.next() {
                Some(next) => out.push_str(&regex::escape(&next.to_string())),
                None => out.push_str(&regex::escape(&c.to_string())),
            }
            continue;
        }
        match c {
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            _ if in_class => out.push(c),
            '[' => {
                in_class = true;
                out.push(c);
            }
            '%' => out.push_str(".*"),
            '_' => out.push('.'),
            '|' | '*' | '+' | '?' | '{' | '}' | '(' | ')' | ',' => out.push(c),
            c if c.is_ascii_digit() => out.push(c),
            c => out.push_str(&regex::escape(&c.to_string())),
        }
    }
    out.push_str(")$");
    out
}

/// A LIKE pattern with escape character `escape` (`None`: `ESCAPE ''`, no
/// escape at all) in the form [`like`](crate::eval::like) reads, whose
/// escape character is `\`.
pub(crate) fn like_with_escape(pattern: &str, escape: Option<char>) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            if let Some(next) = chars.next() {
                out.push('\\');
                out.push(next);
            }
        } else if c == '\\' {
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    out
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/// The fields of a timestamp that `to_char` prints.
struct Fields {
    year: i64,
    month: u32,
    day: u32,
    /// Day of the year, 1-based.
    doy: i64,
    /// Day of the week, 0 = Sunday.
    dow: usize,
    hour: i64,
    minute: i64,
    second: i64,
    micros: i64,
}

impl Fields {
    fn of(micros: i64) -> Fields {
        let days = micros.div_euclid(MICROS_PER_DAY);
        let rest = micros.rem_euclid(MICROS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        Fields {
            year,
            month,
            day,
            doy: days - days_from_civil(year, 1, 1) + 1,
            dow: (days + 4).rem_euclid(7) as usize,
            hour: rest / (3600 * MICROS_PER_SECOND),
            minute: rest / (60 * MICROS_PER_SECOND) % 60,
            second: rest / MICROS_PER_SECOND % 60,
            micros: rest % MICROS_PER_SECOND,
        }
    }
}

/// The `to_char` template patterns understood, longest first (so that
/// `HH24` is not read as `HH` then `24`).
const PATTERNS: [&str; 31] = [
    "MONTH", "Month", "month", "HH24", "HH12", "YYYY", "A.M.", "P.M.", "a.m.", "p.m.", "DAY", "Day", "day", "DDD",
    "MON", "Mon", "mon", "YY", "MM", "DD", "HH", "MI", "SS", "MS", "US", "AM", "PM", "am", "pm", "DY", "Dy",
];

/// `to_char(timestamp, template)` with PostgreSQL's template patterns
/// (YYYY, YY, MM, Month, Mon, DD, DDD, D, Day, Dy, HH24, HH12, HH, MI, SS,
/// MS, US, AM/PM, Q and the `FM` prefix, which drops padding); text in
/// double quotes and every other character is copied.
pub(crate) fn to_char(micros: i64, template: &str) -> String {
    let f = Fields::of(micros);
    let mut out = String::new();
    let mut rest = template;
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').unwrap_or(quoted.len());
            out.push_str(&quoted[..end]);
            rest = quoted.get(end + 1..).unwrap_or("");
            continue;
        }
        let (fill_mode, body) = match rest.strip_prefix("FM") {
            Some(body) => (true, body),
            None => (false, rest),
        };
        let single =
            ["D", "Q"].into_iter().find(|p| body.starts_with(p) && !body.starts_with("DD") && !body.starts_with("DY"));
        match PATTERNS.iter().copied().find(|p| body.starts_with(p)).or(single) {
            Some(pattern) => {
                out.push_str(&field(&f, pattern, fill_mode));
                rest = &body[pattern.len()..];
            }
            None => {
                let c = rest.chars().next().expect("not empty");
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

fn field(f: &Fields, pattern: &str, fill_mode: bool) -> String {
    let number = |n: i64, width: usize| if fill_mode { n.to_string() } else { format!("{n:0width$}") };
    let name = |name: &str, width: usize| {
        let cased = match pattern.chars().nth(1) {
            Some(c) if c.is_ascii_uppercase() => name.to_uppercase(),
            _ if pattern.starts_with(|c: char| c.is_ascii_lowercase()) => name.to_lowercase(),
            _ => name.to_owned(),
        };
        if fill_mode { cased } else { format!("{cased:width$}") }
    };
    let hour12 = (f.hour + 11) % 12 + 1;
    let pm = f.hour >= 12;
    match pattern {
        "YYYY" => number(f.year, 4),
        "YY" => number(f.year.rem_euclid(100), 2),
        "MM" => number(i64::from(f.month), 2),
        "MONTH" | "Month" | "month" => name(MONTHS[f.month as usize - 1], 9),
        "MON" | "Mon" | "mon" => name(&MONTHS[f.month as usize - 1][..3], 3),
        "DD" => number(i64::from(f.day), 2),
        "DDD" => number(f.doy, 3),
        "D" => (f.dow + 1).to_string(),
        "DAY" | "Day" | "day" => name(DAYS[f.dow], 9),
        "DY" | "Dy" => name(&DAYS[f.dow][..3], 3),
        "Q" => ((f.month - 1) / 3 + 1).to_string(),
        "HH24" => number(f.hour, 2),
        "HH12" | "HH" => number(hour12, 2),
        "MI" => number(f.minute, 2),
        "SS" => number(f.second, 2),
        "MS" => number(f.micros / 1000, 3),
        "US" => number(f.micros, 6),
        "AM" | "PM" => (if pm { "PM" } else { "AM" }).to_owned(),
        "am" | "pm" => (if pm { "pm" } else { "am" }).to_owned(),
        "A.M." | "P.M." => (if pm { "P.M." } else { "A.M." }).to_owned(),
        "a.m." | "p.m." => (if pm { "p.m." } else { "a.m." }).to_owned(),
        other => unreachable!("a to_char pattern: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_timestamp;

    #[test]
    fn to_char_prints_postgres_patterns() {
        let t = parse_timestamp("2024-03-09 14:05:07.123456").unwrap();
        assert_eq!(to_char(t, "YYYY-MM-DD HH24:MI:SS"), "2024-03-09 14:05:07");
        assert_eq!(to_char(t, "HH12:MI AM, Dy Mon DD"), "02:05 PM, Sat Mar 09");
        assert_eq!(to_char(t, "FMMonth FMDD, YYYY"), "March 9, 2024");
        assert_eq!(to_char(t, "Month|Day|"), "March    |Saturday |");
        assert_eq!(to_char(t, "MONTH mon DDD D Q MS US"), "MARCH     mar 069 7 1 123 123456");
        assert_eq!(to_char(t, "\"week of\" YY"), "week of 24");
        assert_eq!(to_char(parse_timestamp("1969-12-31 00:00:00").unwrap(), "YYYY-MM-DD a.m."), "1969-12-31 a.m.");
    }

    #[test]
    fn pads_cut_and_fill_as_postgres() {
        assert_eq!(pad("hi", 5, "xy", true).unwrap(), "xyxhi");
        assert_eq!(pad("hi", 5, "xy", false).unwrap(), "hixyx");
        assert_eq!(pad("hello", 3, "x", true).unwrap(), "hel");
        assert_eq!(pad("hello", 3, "x", false).unwrap(), "hel");
        assert_eq!(pad("hi", 5, "", true).unwrap(), "hi");
        assert_eq!(pad("hi", -1, "x", true).unwrap(), "");
        assert_eq!(pad("x", (TEXT_RESULT_CHARS_MAX + 1) as i64, " ", true), None);
        assert_eq!(repeat("ab", 3).unwrap(), "ababab");
        assert_eq!(repeat("ab", -2).unwrap(), "");
        assert_eq!(repeat("ab", i64::MAX), None);
    }

    #[test]
    fn text_functions_match_postgres() {
        assert_eq!(left_right("abcde", 2, true), "ab");
        assert_eq!(left_right("abcde", -2, true), "abc");
        assert_eq!(left_right("abcde", 2, false), "de");
        assert_eq!(left_right("abcde", -2, false), "cde");
        assert_eq!(left_right("ab", 9, false), "ab");
        assert_eq!(initcap("hELLO wORLD-foo 9lives"), "Hello World-Foo 9lives");
        assert_eq!(chr(65).as_deref(), Some("A"));
        assert_eq!(chr(0), None);
        assert_eq!(chr(0xD800), None);
    }

    #[test]
    fn patterns_translate() {
        assert_eq!(replacement(r"<\1>\&\\$"), "<${1}>${0}\\$$");
        assert_eq!(regexp_flags("gi"), Some((true, true)));
        assert_eq!(regexp_flags("x"), None);
        let similar = |p: &str, escape| regex::Regex::new(&similar_to_regex(p, escape)).unwrap();
        assert!(similar("%(b|d)%", Some('\\')).is_match("abc"));
        assert!(!similar("(b|d)%", Some('\\')).is_match("abc"));
        assert!(similar("a.c", Some('\\')).is_match("a.c"));
        assert!(!similar("a.c", Some('\\')).is_match("abc"));
        assert!(similar("a_c", None).is_match("abc"));
        assert!(similar("[a-c]{2}x*", None).is_match("bcxx"));
        assert!(similar("100#%", Some('#')).is_match("100%"));
        assert!(!similar("100#%", Some('#')).is_match("1000"));
        assert_eq!(like_with_escape("a#%b\\c", Some('#')), "a\\%b\\\\c");
        assert_eq!(like_with_escape("a\\%", None), "a\\\\%");
    }
}
