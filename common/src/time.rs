//! Wall-clock milliseconds and their UTC text forms (ISO 8601, log times), for the edges only
//! (daemons and clients). The scheduler core never calls this: time is passed into it.

/// Milliseconds since the Unix epoch; 0 if the clock is before 1970.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `ms` as YARN's `Times.formatISO8601` writes it (`yyyy-MM-dd'T'HH:mm:ss.SSSZ`), in UTC:
/// `2024-03-07T12:34:56.789+0000`. Used for application timeouts (`expiryTime`).
pub fn format_iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}+0000",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        ms % 1000
    )
}

/// A UTC calendar time, for the edges' YARN-style date formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    pub year: i64,
    /// 1-12.
    pub month: u32,
    /// 1-31.
    pub day: u32,
    /// 0 = Sunday .. 6 = Saturday.
    pub weekday: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub millis: u32,
}

impl UtcTime {
    /// The calendar time of `ms` since the Unix epoch.
    pub fn from_ms(ms: u64) -> Self {
        let secs = ms / 1000;
        let days = (secs / 86_400) as i64;
        let rem = secs % 86_400;
        let (y, m, d) = civil_from_days(days);
        Self {
            year: y,
            month: m as u32,
            day: d as u32,
            // 1970-01-01 was a Thursday.
            weekday: ((days + 4).rem_euclid(7)) as u32,
            hour: (rem / 3600) as u32,
            minute: ((rem % 3600) / 60) as u32,
            second: (rem % 60) as u32,
            millis: (ms % 1000) as u32,
        }
    }

    pub fn weekday_name(&self) -> &'static str {
        ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"][self.weekday as usize % 7]
    }

    pub fn month_name(&self) -> &'static str {
        [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ][(self.month as usize + 11) % 12]
    }
}

/// YARN's `Times.format` (`EEE MMM dd HH:mm:ss Z yyyy`), in UTC; `N/A` for 0, as YARN
/// prints a time that was never set: `Thu Mar 07 12:34:56 +0000 2024`.
pub fn format_times(ms: u64) -> String {
    if ms == 0 {
        return "N/A".into();
    }
    format_times_utc(ms)
}

/// YARN's `Times.format` form of any time, 0 included (`Thu Jan 01 00:00:00 +0000 1970`):
/// the form of the NM's log-file times.
pub fn format_times_utc(ms: u64) -> String {
    let t = UtcTime::from_ms(ms);
    format!(
        "{} {} {:02} {:02}:{:02}:{:02} +0000 {}",
        t.weekday_name(),
        t.month_name(),
        t.day,
        t.hour,
        t.minute,
        t.second,
        t.year
    )
}

/// Why a text is not an ISO 8601 time as [`parse_iso8601`] reads it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{text}' is not a time in yyyy-MM-dd'T'HH:mm:ss.SSSZ form ({reason})")]
pub struct Iso8601Error {
    pub text: String,
    pub reason: &'static str,
}

/// Parses YARN's `yyyy-MM-dd'T'HH:mm:ss.SSSZ` (the milliseconds optional; the zone `Z`,
/// `+hhmm` or `+hh:mm`) into milliseconds since the Unix epoch.
pub fn parse_iso8601(text: &str) -> Result<u64, Iso8601Error> {
    let err = |reason| Iso8601Error {
        text: text.to_string(),
        reason,
    };
    let t = text.trim();
    let b = t.as_bytes();
    let num = |s: &str| -> Option<i64> {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(err("expected yyyy-MM-ddTHH:mm:ss"));
    }
    let field = |r: std::ops::Range<usize>| t.get(r).and_then(num);
    let (Some(y), Some(mo), Some(d), Some(h), Some(mi), Some(s)) = (
        field(0..4),
        field(5..7),
        field(8..10),
        field(11..13),
        field(14..16),
        field(17..19),
    ) else {
        return Err(err("a date or time field is not a number"));
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 59 {
        return Err(err("a date or time field is out of range"));
    }
    let mut rest = &t[19..];
    let mut millis = 0i64;
    if let Some(r) = rest.strip_prefix('.') {
        let digits = r.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(err("no digits after the '.'"));
        }
        let frac = &r[..digits];
        // Milliseconds: the first three digits, padded.
        let three: String = frac.chars().chain("000".chars()).take(3).collect();
        millis = three.parse().map_err(|_| err("bad milliseconds"))?;
        rest = &r[digits..];
    }
    let offset_min = match rest {
        "Z" | "z" => 0,
        "" => return Err(err("no time zone (Z or +hhmm)")),
        z => {
            let sign = match z.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return Err(err("the time zone must be Z, +hhmm or -hhmm")),
            };
            let hm = z[1..].replace(':', "");
            if hm.len() != 4 {
                return Err(err("the time zone must be Z, +hhmm or -hhmm"));
            }
            let (Some(zh), Some(zm)) = (hm.get(..2).and_then(num), hm.get(2..).and_then(num))
            else {
                return Err(err("the time zone must be Z, +hhmm or -hhmm"));
            };
            if zh > 23 || zm > 59 {
                return Err(err("the time zone is out of range"));
            }
            sign * (zh * 60 + zm)
        }
    };
    let days = days_from_civil(y, mo, d);
    let total = ((days * 86_400 + h * 3600 + mi * 60 + s) - offset_min * 60) * 1000 + millis;
    u64::try_from(total).map_err(|_| err("before 1970"))
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31); Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month, day) to days since 1970-01-01; the inverse of [`civil_from_days`].
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A time limit Slurm's way (`--time`): `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM` or
/// `D-HH:MM:SS`, as seconds. `0` is refused (Slurm reads it as "no limit"; a Spindle
/// application without a limit simply has none).
pub fn parse_slurm_time(text: &str) -> Result<u64, SlurmTimeError> {
    let t = text.trim();
    let err = |reason| SlurmTimeError {
        text: text.to_string(),
        reason,
    };
    let number = |s: &str| -> Result<u64, SlurmTimeError> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err("each field is a whole number"));
        }
        s.parse::<u64>().map_err(|_| err("a field is too large"))
    };
    let (days, rest) = match t.split_once('-') {
        Some((d, rest)) => (Some(number(d)?), rest),
        None => (None, t),
    };
    let fields: Vec<u64> = rest.split(':').map(number).collect::<Result<_, _>>()?;
    let secs = match (days, fields.as_slice()) {
        (None, [m]) => m.checked_mul(60),
        (None, [m, s]) => m.checked_mul(60).and_then(|m| m.checked_add(*s)),
        (None, [h, m, s]) | (Some(_), [h, m, s]) => h
            .checked_mul(3600)
            .and_then(|h| h.checked_add(m.checked_mul(60)?))
            .and_then(|x| x.checked_add(*s)),
        (Some(_), [h]) => h.checked_mul(3600),
        (Some(_), [h, m]) => h
            .checked_mul(3600)
            .and_then(|h| h.checked_add(m.checked_mul(60)?)),
        _ => return Err(err("use MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS")),
    };
    let secs = days
        .map_or(Some(0), |d| d.checked_mul(86_400))
        .and_then(|d| secs.and_then(|s| s.checked_add(d)))
        .ok_or_else(|| err("the limit is too large"))?;
    if secs == 0 {
        return Err(err("a limit must be above zero"));
    }
    Ok(secs)
}

/// Seconds the way Slurm prints a time limit: `HH:MM:SS`, with `D-` in front from a day on.
pub fn format_slurm_time(secs: u64) -> String {
    let (d, rest) = (secs / 86_400, secs % 86_400);
    let hms = format!(
        "{:02}:{:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    );
    if d > 0 {
        format!("{d}-{hms}")
    } else {
        hms
    }
}

/// A `--time` value that is not one of Slurm's formats.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid time limit '{text}': {reason}")]
pub struct SlurmTimeError {
    pub text: String,
    pub reason: &'static str,
}

#[cfg(test)]
mod tests {
    #[test]
    fn slurm_times_print_as_slurm_reads_them() {
        for secs in [1, 59, 3_600, 86_399, 86_400, 90_061, 1_000_000] {
            let text = super::format_slurm_time(secs);
            assert_eq!(super::parse_slurm_time(&text), Ok(secs), "{text}");
        }
        assert_eq!(super::format_slurm_time(5), "00:00:05");
        assert_eq!(super::format_slurm_time(90_061), "1-01:01:01");
    }

    #[test]
    fn times() {
        assert_eq!(super::format_times_utc(0), "Thu Jan 01 00:00:00 +0000 1970");
        // 2024-03-07T12:34:56Z
        assert_eq!(
            super::format_times_utc(1_709_814_896_000),
            "Thu Mar 07 12:34:56 +0000 2024"
        );
        // 2000-02-29T23:59:59Z, a leap day
        assert_eq!(
            super::format_times_utc(951_868_799_000),
            "Tue Feb 29 23:59:59 +0000 2000"
        );
    }

    #[test]
    fn a_zone_with_a_multibyte_character_is_an_error_not_a_panic() {
        for z in ["+a\u{e9}b", "-\u{e9}\u{e9}", "+12\u{e9}"] {
            let t = format!("2026-01-01T00:00:00{z}");
            assert!(parse_iso8601(&t).is_err(), "{t}");
        }
    }

    use super::*;

    #[test]
    fn times_format_like_yarn() {
        assert_eq!(format_times(0), "N/A");
        assert_eq!(
            format_times(1_709_814_896_789),
            "Thu Mar 07 12:34:56 +0000 2024"
        );
        let t = UtcTime::from_ms(0);
        assert_eq!(
            (t.weekday_name(), t.month_name(), t.year),
            ("Thu", "Jan", 1970)
        );
    }

    #[test]
    fn iso8601_round_trips_and_reads_yarn_forms() {
        assert_eq!(format_iso8601(0), "1970-01-01T00:00:00.000+0000");
        let ms = 1_709_814_896_789;
        assert_eq!(format_iso8601(ms), "2024-03-07T12:34:56.789+0000");
        assert_eq!(parse_iso8601("2024-03-07T12:34:56.789+0000"), Ok(ms));
        assert_eq!(parse_iso8601("2024-03-07T18:04:56.789+0530"), Ok(ms));
        assert_eq!(parse_iso8601("2024-03-07T18:04:56.789+05:30"), Ok(ms));
        assert_eq!(parse_iso8601("2024-03-07T12:34:56Z"), Ok(ms - 789));
        for x in [0, 951_782_400_000, 4_102_444_799_999, ms] {
            assert_eq!(parse_iso8601(&format_iso8601(x)), Ok(x));
        }
        for bad in [
            "",
            "2024-03-07",
            "2024-13-07T12:34:56.789+0000",
            "2024-03-07T12:34:56.789",
            "2024-03-07T12:34:56.+0000",
            "2024-03-07T12:34:56.789+05",
            "tomorrow at noon, please",
        ] {
            assert!(parse_iso8601(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn slurm_time_limits_in_every_format() {
        assert_eq!(parse_slurm_time("5"), Ok(300));
        assert_eq!(parse_slurm_time("0:05"), Ok(5));
        assert_eq!(parse_slurm_time("1:30"), Ok(90));
        assert_eq!(parse_slurm_time("2:00:00"), Ok(7200));
        assert_eq!(parse_slurm_time("1-2"), Ok(93_600));
        assert_eq!(parse_slurm_time("1-2:30"), Ok(95_400));
        assert_eq!(parse_slurm_time("1-02:30:15"), Ok(95_415));
        for bad in [
            "",
            "0",
            "a",
            "1:2:3:4",
            "1-",
            "-5",
            "1-1:2:3:4",
            "1.5",
            "99999999999999999999",
        ] {
            let e = parse_slurm_time(bad).unwrap_err();
            assert!(e.to_string().contains("invalid time limit"), "{bad}: {e}");
        }
    }
}
