//! Dates, timestamps and intervals: civil-calendar arithmetic (proleptic
//! Gregorian, no time zones), parsing and printing.
//!
//! Timestamps are microseconds since 1970-01-01 00:00:00, dates are days
//! since 1970-01-01, intervals are microseconds (no months: a month has no
//! fixed length, and INTERVAL '1' MONTH is refused when bound).

pub(crate) const MICROS_PER_SECOND: i64 = 1_000_000;
pub(crate) const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = month as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date (year, month, day) of a day number.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn number<T: std::str::FromStr>(text: &str, digits: std::ops::RangeInclusive<usize>) -> Option<T> {
    (digits.contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit())).then(|| text.parse().ok())?
}

/// "YYYY-MM-DD" → days.
pub(crate) fn parse_date(text: &str) -> Option<i32> {
    let mut parts = text.trim().splitn(3, '-');
    let year: i64 = number(parts.next()?, 4..=4)?;
    let month: u32 = number(parts.next()?, 1..=2)?;
    let day: u32 = number(parts.next()?, 1..=2)?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    i32::try_from(days_from_civil(year, month, day)).ok()
}

/// "YYYY-MM-DD[ T]HH:MM:SS[.ffffff][Z]" (or a bare date) → microseconds.
pub(crate) fn parse_timestamp(text: &str) -> Option<i64> {
    let text = text.trim();
    let text = text.strip_suffix('Z').or_else(|| text.strip_suffix("+00:00")).unwrap_or(text);
    let (date, time) = match text.split_once([' ', 'T']) {
        Some((date, time)) => (date, Some(time)),
        None => (text, None),
    };
    let days = parse_date(date)? as i64;
    let mut micros = days * MICROS_PER_DAY;
    if let Some(time) = time {
        let (hms, fraction) = time.split_once('.').unwrap_or((time, ""));
        let mut parts = hms.splitn(3, ':');
        let hours: i64 = number(parts.next()?, 1..=2)?;
        let minutes: i64 = number(parts.next()?, 2..=2)?;
        let seconds: i64 = match parts.next() {
            Some(s) => number(s, 2..=2)?,
            None => 0,
        };
        if hours > 23 || minutes > 59 || seconds > 59 {
            return None;
        }
        let fraction_micros: i64 = if fraction.is_empty() {
            0
        } else {
            let digits: i64 = number(fraction, 1..=6)?;
            digits * 10i64.pow(6 - fraction.len() as u32)
        };
        micros += (hours * 3600 + minutes * 60 + seconds) * MICROS_PER_SECOND + fraction_micros;
    }
    Some(micros)
}

/// `text` without a trailing zone offset (`Z`, `+HH`, `-HH:MM`, ...): as
/// Postgres, a timestamp or date without time zone ignores one in its input.
pub fn without_zone(text: &str) -> &str {
    let text = text.trim();
    if let Some(rest) = text.strip_suffix('Z') {
        return rest.trim_end();
    }
    match text.rfind(['+', '-']) {
        // Past the date's own dashes ("YYYY-MM-DD" is 10 bytes).
        Some(at) if at >= 10 => {
            let zone = &text[at + 1..];
            let is_zone = (2..=8).contains(&zone.len()) && zone.bytes().all(|b| b.is_ascii_digit() || b == b':');
            if is_zone { text[..at].trim_end() } else { text }
        }
        _ => text,
    }
}

pub(crate) fn format_date(days: i32) -> String {
    let (year, month, day) = civil_from_days(days as i64);
    format!("{year:04}-{month:02}-{day:02}")
}

pub(crate) fn format_timestamp(micros: i64) -> String {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let rest = micros.rem_euclid(MICROS_PER_DAY);
    let (seconds, fraction) = (rest / MICROS_PER_SECOND, rest % MICROS_PER_SECOND);
    let date = format_date(days as i32);
    let time = format!("{:02}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60);
    if fraction == 0 {
        format!("{date} {time}")
    } else {
        let digits = format!("{fraction:06}");
        format!("{date} {time}.{}", digits.trim_end_matches('0'))
    }
}

/// PostgreSQL's style: "3 days 04:05:06.5", "-00:00:01".
pub(crate) fn format_interval(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let abs = micros.unsigned_abs();
    let day = MICROS_PER_DAY as u64;
    let (days, rest) = (abs / day, abs % day);
    let (seconds, fraction) = (rest / 1_000_000, rest % 1_000_000);
    let mut out = String::new();
    if days > 0 {
        out = format!("{sign}{days} day{} ", if days == 1 { "" } else { "s" });
    }
    out += &format!(
        "{}{:02}:{:02}:{:02}",
        if days > 0 { "" } else { sign },
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    if fraction > 0 {
        out += &format!(".{}", format!("{fraction:06}").trim_end_matches('0'));
    }
    out
}

/// Microseconds in one `unit` (SECOND, MINUTE, ...), for intervals.
pub(crate) fn unit_micros(unit: &str) -> Option<i64> {
    Some(match unit.to_ascii_lowercase().trim_end_matches('s') {
        "microsecond" | "u" => 1,
        "millisecond" | "m" => 1_000,
        "second" | "sec" => MICROS_PER_SECOND,
        "minute" | "min" => 60 * MICROS_PER_SECOND,
        "hour" | "h" => 3600 * MICROS_PER_SECOND,
        "day" | "d" => MICROS_PER_DAY,
        "week" | "w" => 7 * MICROS_PER_DAY,
        _ => return None,
    })
}

/// "10 seconds", "1 day 2 hours", "00:00:10", "1.5 minute" → microseconds.
pub(crate) fn parse_interval(text: &str) -> Option<i64> {
    let text = text.trim();
    if text.contains(':') {
        let (sign, body) = match text.strip_prefix('-') {
            Some(rest) => (-1, rest),
            None => (1, text),
        };
        let (days, clock) = match body.split_once(' ') {
            Some((d, rest)) => (d.trim_end_matches("days").trim_end_matches("day").trim().parse::<i64>().ok()?, rest),
            None => (0, body),
        };
        let clock = clock.trim_start_matches(|c: char| c.is_ascii_alphabetic() || c == ' ');
        let seconds_micros = parse_timestamp(&format!("1970-01-01 {clock}"))?;
        return Some(sign * (days * MICROS_PER_DAY + seconds_micros));
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() || !words.len().is_multiple_of(2) {
        return None;
    }
    let mut total: i64 = 0;
    for pair in words.chunks(2) {
        let amount: f64 = pair[0].parse().ok()?;
        let micros = (amount * unit_micros(pair[1])? as f64).round();
        if !micros.is_finite() || micros.abs() > 9.2e18 {
            return None;
        }
        total = total.checked_add(micros as i64)?;
    }
    Some(total)
}

/// Truncates a timestamp to a unit (date_trunc).
pub(crate) fn trunc_timestamp(unit: &str, micros: i64) -> Option<i64> {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let (year, month, _) = civil_from_days(days);
    let floor = |step: i64| micros.div_euclid(step) * step;
    Some(match unit.to_ascii_lowercase().as_str() {
        "microsecond" | "microseconds" => micros,
        "millisecond" | "milliseconds" => floor(1_000),
        "second" => floor(MICROS_PER_SECOND),
        "minute" => floor(60 * MICROS_PER_SECOND),
        "hour" => floor(3600 * MICROS_PER_SECOND),
        "day" => floor(MICROS_PER_DAY),
        // ISO weeks start on Monday; 1970-01-01 was a Thursday.
        "week" => (days - (days + 3).rem_euclid(7)) * MICROS_PER_DAY,
        "month" => days_from_civil(year, month, 1) * MICROS_PER_DAY,
        "quarter" => days_from_civil(year, (month - 1) / 3 * 3 + 1, 1) * MICROS_PER_DAY,
        "year" => days_from_civil(year, 1, 1) * MICROS_PER_DAY,
        _ => return None,
    })
}

/// EXTRACT(field FROM timestamp), as a double (fractional seconds) or integer.
pub(crate) fn extract(field: &str, micros: i64) -> Option<f64> {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let rest = micros.rem_euclid(MICROS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    Some(match field.to_ascii_lowercase().as_str() {
        "year" => year as f64,
        "quarter" => ((month - 1) / 3 + 1) as f64,
        "month" => month as f64,
        "day" => day as f64,
        "hour" => (rest / (3600 * MICROS_PER_SECOND)) as f64,
        "minute" => (rest / (60 * MICROS_PER_SECOND) % 60) as f64,
        "second" => (rest % (60 * MICROS_PER_SECOND)) as f64 / MICROS_PER_SECOND as f64,
        "millisecond" | "milliseconds" => (rest % (60 * MICROS_PER_SECOND)) as f64 / 1000.0,
        "microsecond" | "microseconds" => (rest % (60 * MICROS_PER_SECOND)) as f64,
        // 0 = Sunday, as PostgreSQL's dow.
        "dow" => (days + 4).rem_euclid(7) as f64,
        "isodow" => ((days + 3).rem_euclid(7) + 1) as f64,
        "doy" => (days - days_from_civil(year, 1, 1) + 1) as f64,
        "epoch" => micros as f64 / MICROS_PER_SECOND as f64,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trips() {
        for days in [-800_000i64, -1, 0, 1, 59, 365, 11_016, 20_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(parse_date("2000-02-29"), Some(11_016));
        assert_eq!(parse_date("2001-02-29"), None);
    }

    #[test]
    fn timestamps_and_intervals_print_back() {
        let t = parse_timestamp("2024-03-01 12:34:56.25").unwrap();
        assert_eq!(format_timestamp(t), "2024-03-01 12:34:56.25");
        assert_eq!(parse_timestamp("2024-03-01T12:34:56Z"), parse_timestamp("2024-03-01 12:34:56"));
        assert_eq!(parse_interval("10 seconds"), Some(10 * MICROS_PER_SECOND));
        assert_eq!(parse_interval("1 day 2 hours"), Some(MICROS_PER_DAY + 7200 * MICROS_PER_SECOND));
        assert_eq!(parse_interval("00:01:30"), Some(90 * MICROS_PER_SECOND));
        assert_eq!(format_interval(MICROS_PER_DAY + 1_500_000), "1 day 00:00:01.5");
        assert_eq!(format_timestamp(trunc_timestamp("month", t).unwrap()), "2024-03-01 00:00:00");
        assert_eq!(extract("dow", t), Some(5.0));
    }
}
