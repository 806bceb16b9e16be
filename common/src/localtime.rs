//! Local time for people: `2026-11-28T14:05:09+01:00` (ISO 8601 with the local UTC offset),
//! the form the CLI prints times in. The offset comes from the system's time zone database
//! (a TZif file: `$TZ` as `:Area/City`, `Area/City` or a path, else `/etc/localtime`), read
//! without `unsafe` (no `localtime_r`); a zone that cannot be read is UTC (`+00:00`).

use std::sync::OnceLock;

use crate::time::UtcTime;

/// One zone's offsets: transition times (seconds since the epoch), ascending, with the
/// offset (seconds east of UTC) in force from each; `initial` before the first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Zone {
    transitions: Vec<(i64, i32)>,
    initial: i32,
}

impl Zone {
    /// A zone with one fixed offset.
    pub fn fixed(offset_s: i32) -> Self {
        Self {
            transitions: Vec::new(),
            initial: offset_s,
        }
    }

    /// The offset (seconds east of UTC) in force at `secs` since the epoch.
    pub fn offset_at(&self, secs: i64) -> i32 {
        match self.transitions.partition_point(|(t, _)| *t <= secs) {
            0 => self.initial,
            i => self.transitions[i - 1].1,
        }
    }

    /// Reads a TZif file (RFC 8536, versions 1 to 4): the 64-bit block when there is one.
    /// `None` when it is not one.
    pub fn from_tzif(b: &[u8]) -> Option<Self> {
        let (v1, rest) = block(b, 4)?;
        if b.get(4).copied().unwrap_or(0) >= b'2' {
            if let Some((v2, _)) = block(rest, 8) {
                return Some(v2);
            }
        }
        Some(v1)
    }
}

/// One TZif data block with `tsize`-byte times: the zone and what follows the block.
fn block(b: &[u8], tsize: usize) -> Option<(Zone, &[u8])> {
    if b.get(..4)? != b"TZif" {
        return None;
    }
    let count = |i: usize| -> Option<usize> {
        let at = 20 + 4 * i;
        Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let (isut, isstd, leap, time, typ, chr) = (
        count(0)?,
        count(1)?,
        count(2)?,
        count(3)?,
        count(4)?,
        count(5)?,
    );
    if typ == 0 {
        return None;
    }
    let times = 44;
    let idx = times + time * tsize;
    let types = idx + time;
    let end = types + typ * 6 + chr + leap * (tsize + 4) + isstd + isut;
    if b.len() < end {
        return None;
    }
    let offset_of = |t: usize| -> Option<i32> {
        let at = types + 6 * t;
        Some(i32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let mut transitions = Vec::with_capacity(time);
    for i in 0..time {
        let at = times + i * tsize;
        let raw = b.get(at..at + tsize)?;
        let t = if tsize == 8 {
            i64::from_be_bytes(raw.try_into().ok()?)
        } else {
            i64::from(i32::from_be_bytes(raw.try_into().ok()?))
        };
        let ty = usize::from(*b.get(idx + i)?);
        transitions.push((t, offset_of(ty)?));
    }
    // RFC 8536: before the first transition, the first type (usually LMT) applies.
    let initial = offset_of(0)?;
    Some((
        Zone {
            transitions,
            initial,
        },
        &b[end..],
    ))
}

/// The TZif file `$TZ` names (`:Europe/Paris`, `Europe/Paris`, `/path`), else
/// `/etc/localtime`; UTC for `UTC`/`GMT`/empty names or what cannot be read.
fn load_local_zone() -> Zone {
    let tz = std::env::var("TZ").ok();
    let path = match tz.as_deref().map(|t| t.trim_start_matches(':')) {
        Some("") | Some("UTC") | Some("UTC0") | Some("GMT") | Some("Z") => return Zone::fixed(0),
        Some(p) if p.starts_with('/') => std::path::PathBuf::from(p),
        Some(name) => std::path::Path::new("/usr/share/zoneinfo").join(name),
        None => std::path::PathBuf::from("/etc/localtime"),
    };
    std::fs::read(&path)
        .ok()
        .and_then(|b| Zone::from_tzif(&b))
        .unwrap_or_default()
}

/// This process's local zone, read once.
pub fn local_zone() -> &'static Zone {
    static ZONE: OnceLock<Zone> = OnceLock::new();
    ZONE.get_or_init(load_local_zone)
}

/// `ms` since the epoch as ISO 8601 in `zone`, to the second: `2026-11-28T14:05:09+01:00`.
pub fn format_in(zone: &Zone, ms: u64) -> String {
    let secs = i64::try_from(ms / 1000).unwrap_or(i64::MAX);
    let off = zone.offset_at(secs);
    let local = (secs + i64::from(off)).max(0) as u64;
    let t = UtcTime::from_ms(local * 1000);
    let sign = if off < 0 { '-' } else { '+' };
    let a = off.unsigned_abs();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{sign}{:02}:{:02}",
        t.year,
        t.month,
        t.day,
        t.hour,
        t.minute,
        t.second,
        a / 3600,
        (a % 3600) / 60
    )
}

/// `ms` since the epoch as ISO 8601 in local time (`2026-11-28T14:05:09+01:00`); `N/A` for
/// 0, a time never set (as YARN prints one).
pub fn format_local(ms: u64) -> String {
    if ms == 0 {
        return "N/A".into();
    }
    format_in(local_zone(), ms)
}

/// Why a text is not a time [`parse_local`] reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{0}' is not a time: give a date (2026-11-28), a local date and time \
     (2026-11-28T14:05 or 2026-11-28T14:05:09), ISO 8601 with a zone \
     (2026-11-28T14:05:09+01:00, ...Z) or ms since the epoch"
)]
pub struct LocalTimeError(pub String);

/// A time as people type it, to ms since the epoch: ms since the epoch; a date (midnight,
/// local time); a date and time without a zone (local time, seconds optional); or ISO 8601
/// with a zone (`Z`, `+01:00`, `+0100`).
pub fn parse_local(text: &str) -> Result<u64, LocalTimeError> {
    parse_in(local_zone(), text)
}

/// [`parse_local`] in `zone`.
pub fn parse_in(zone: &Zone, text: &str) -> Result<u64, LocalTimeError> {
    let t = text.trim();
    let err = || LocalTimeError(text.to_string());
    if !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()) {
        return t.parse().map_err(|_| err());
    }
    if let Ok(ms) = crate::time::parse_iso8601(t) {
        return Ok(ms);
    }
    // Without a zone: local. Read as UTC, then moved by the offset in force there.
    let as_utc = match t.len() {
        10 => format!("{t}T00:00:00Z"),
        16 => format!("{t}:00Z"),
        19 => format!("{t}Z"),
        _ => return Err(err()),
    };
    let local_ms = crate::time::parse_iso8601(&as_utc).map_err(|_| err())?;
    let local_s = (local_ms / 1000) as i64;
    let guess = local_s - i64::from(zone.offset_at(local_s));
    let utc_s = local_s - i64::from(zone.offset_at(guess));
    u64::try_from(utc_s * 1000).map_err(|_| err())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TZif v1 file for a zone at +01:00 that moves to +02:00 at `at`.
    fn tzif(at: i32) -> Vec<u8> {
        let mut b = b"TZif".to_vec();
        b.push(0); // version 1
        b.extend([0u8; 15]);
        // isut, isstd, leap, time, type, char counts.
        for n in [0u32, 0, 0, 1, 2, 8] {
            b.extend(n.to_be_bytes());
        }
        b.extend(at.to_be_bytes());
        b.push(1);
        b.extend(3600i32.to_be_bytes());
        b.extend([0, 0]);
        b.extend(7200i32.to_be_bytes());
        b.extend([1, 4]);
        b.extend(b"CET\0CEST");
        b
    }

    #[test]
    fn a_tzif_zone_gives_the_offset_in_force() {
        let z = Zone::from_tzif(&tzif(1_000_000)).expect("a TZif file");
        assert_eq!(z.offset_at(0), 3600);
        assert_eq!(z.offset_at(999_999), 3600);
        assert_eq!(z.offset_at(1_000_000), 7200);
        assert!(Zone::from_tzif(b"not a zone").is_none());
        assert!(Zone::from_tzif(&tzif(5)[..30]).is_none(), "a cut file");
    }

    #[test]
    fn local_times_carry_their_offset() {
        // 2026-11-28T13:05:09Z.
        let ms = 1_795_871_109_000;
        assert_eq!(format_in(&Zone::fixed(0), ms), "2026-11-28T13:05:09+00:00");
        assert_eq!(
            format_in(&Zone::fixed(3600), ms + 999),
            "2026-11-28T14:05:09+01:00"
        );
        assert_eq!(
            format_in(&Zone::fixed(-(5 * 3600 + 30 * 60)), ms),
            "2026-11-28T07:35:09-05:30"
        );
        assert_eq!(format_local(0), "N/A");
    }

    #[test]
    fn typed_times_are_read_as_local_unless_they_name_a_zone() {
        let paris = Zone::fixed(3600);
        let ms = 1_795_871_109_000; // 2026-11-28T13:05:09Z
        assert_eq!(parse_in(&paris, "2026-11-28T14:05:09"), Ok(ms));
        assert_eq!(parse_in(&paris, "2026-11-28T14:05:09+01:00"), Ok(ms));
        assert_eq!(parse_in(&paris, "2026-11-28T13:05:09Z"), Ok(ms));
        assert_eq!(parse_in(&paris, "2026-11-28T14:05"), Ok(ms - 9_000));
        assert_eq!(
            parse_in(&paris, "2026-11-28"),
            Ok(ms - (13 * 3600 + 5 * 60 + 9) * 1000 - 3_600_000)
        );
        assert_eq!(parse_in(&paris, "1234"), Ok(1234));
        for bad in ["yesterday", "2026-11-31x", "2026-13-01", ""] {
            assert!(parse_in(&paris, bad).is_err(), "{bad}");
        }
        assert!(parse_in(&paris, "2026-11-2")
            .unwrap_err()
            .to_string()
            .contains("give a date (2026-11-28)"));
    }
}
