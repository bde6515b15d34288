//! Parsing `--from-time`: milliseconds since the epoch, or RFC 3339.

use anyhow::{Context, Result, bail};

/// Days from 1970-01-01 to the given civil date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Parses `1700000000000` or `2026-11-29T10:00:00Z`, `2026-11-29T10:00:00.250+01:00`.
pub(crate) fn parse_time_ms(text: &str) -> Result<i64> {
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    let bad =
        || format!("'{text}' is neither milliseconds since the epoch nor an RFC 3339 time like 2026-11-29T10:00:00Z");
    let (date, rest) = text.split_once(['T', 't', ' ']).with_context(bad)?;
    let mut date_parts = date.splitn(3, '-');
    let next_num = |parts: &mut std::str::SplitN<'_, char>| -> Result<i64> {
        parts.next().and_then(|p| p.parse().ok()).with_context(bad)
    };
    let (year, month, day) = (next_num(&mut date_parts)?, next_num(&mut date_parts)?, next_num(&mut date_parts)?);
    let (clock, offset_minutes) = if let Some(clock) = rest.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else {
        let at = rest.rfind(['+', '-']).with_context(bad)?;
        let (clock, offset) = rest.split_at(at);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let (hours, minutes) = offset[1..].split_once(':').with_context(bad)?;
        let hours: i64 = hours.parse().ok().with_context(bad)?;
        let minutes: i64 = minutes.parse().ok().with_context(bad)?;
        (clock, sign * (hours * 60 + minutes))
    };
    let (hms, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut hms_parts = hms.splitn(3, ':');
    let mut next = || -> Result<i64> { hms_parts.next().and_then(|p| p.parse().ok()).with_context(bad) };
    let (hour, minute, second) = (next()?, next()?, next()?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        bail!(bad());
    }
    let millis = if fraction.is_empty() {
        0
    } else {
        let digits: String = fraction.chars().chain("000".chars()).take(3).collect();
        digits.parse::<i64>().ok().with_context(bad)?
    };
    let days = days_from_civil(year, month, day);
    Ok(((days * 24 + hour) * 60 + minute - offset_minutes) * 60_000 + second * 1000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_milliseconds_and_rfc3339() {
        assert_eq!(parse_time_ms("1700000000000").unwrap(), 1_700_000_000_000);
        assert_eq!(parse_time_ms("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(parse_time_ms("2023-11-14T22:13:20Z").unwrap(), 1_700_000_000_000);
        assert_eq!(parse_time_ms("2023-11-14T23:13:20.5+01:00").unwrap(), 1_700_000_000_500);
        assert!(parse_time_ms("yesterday").is_err());
        assert!(parse_time_ms("2023-13-01T00:00:00Z").is_err());
    }
}
