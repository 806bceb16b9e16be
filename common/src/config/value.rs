//! The syntax of typed configuration values, shared by [`super::Configuration`]'s getters and
//! by anything else that must validate a value before it is stored (the scheduler-conf
//! mutation API, command-line flags). Each parser takes an already trimmed string and
//! returns `None` for anything it does not accept; the caller turns that into an error that
//! names the property, using the matching `EXPECTED_*` text.

/// What [`parse_integer`] accepts, for error messages.
pub const EXPECTED_INTEGER: &str = "an integer";
/// What [`parse_bool`] accepts, for error messages.
pub const EXPECTED_BOOL: &str = "a boolean (true or false)";
/// What [`parse_duration_ms`] accepts, for error messages.
pub const EXPECTED_DURATION: &str = "a duration such as 500ms, 10s, 5m, 2h or 1d";
/// What [`parse_size_bytes`] accepts, for error messages.
pub const EXPECTED_SIZE: &str = "a size such as 512m or 4g";

/// An integer: optional sign, then decimal digits or `0x` and hex digits (Hadoop's
/// `getLong` accepts hex too). Returned as `i128` so that callers narrow it with
/// `try_from` and report an out-of-range value as the same error as a malformed one.
pub fn parse_integer(s: &str) -> Option<i128> {
    let (negative, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (digits, radix) = match rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (rest, 10),
    };
    // `from_str_radix` would accept a second sign; insist on digits only.
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// `true` or `false`, case-insensitively. Nothing else: `yes`, `1` or `on` are almost always
/// a misunderstanding, and Hadoop refuses them too.
pub fn parse_bool(s: &str) -> Option<bool> {
    if s.eq_ignore_ascii_case("true") {
        Some(true)
    } else if s.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// A finite number. Rust's parser would also take `NaN` and `inf`, which no capacity or
/// factor may be.
pub fn parse_f64(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// Splits digits from a unit suffix: `"10s"` -> `(10, "s")`. Digits only (no sign, no
/// fraction); `None` on overflow.
fn number_and_unit(s: &str) -> Option<(u64, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(end);
    if digits.is_empty() {
        return None;
    }
    Some((digits.parse().ok()?, unit))
}

/// A duration in milliseconds, the syntax of Hadoop's `getTimeDuration`: a bare integer is
/// milliseconds; suffixes `ns`, `us`, `ms`, `s`, `m`, `h`, `d` (case-insensitive) scale it.
/// Sub-millisecond units round down. Overflow is refused, not wrapped.
pub fn parse_duration_ms(s: &str) -> Option<u64> {
    let (n, unit) = number_and_unit(s)?;
    match unit.to_ascii_lowercase().as_str() {
        "" | "ms" => Some(n),
        "ns" => Some(n / 1_000_000),
        "us" => Some(n / 1_000),
        "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        _ => None,
    }
}

/// A size in bytes: a bare integer is bytes; `k`, `m`, `g`, `t`, `p` (optionally followed
/// by `b`, case-insensitive) are binary multiples (`1k` = 1024). Overflow is refused.
pub fn parse_size_bytes(s: &str) -> Option<u64> {
    let (n, unit) = number_and_unit(s)?;
    let unit = unit.to_ascii_lowercase();
    let unit = unit.strip_suffix('b').unwrap_or(&unit);
    let shift = match unit {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        "p" => 50,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

/// A comma-separated list, each entry trimmed, empty entries dropped (Hadoop's
/// `getTrimmedStrings`).
pub fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_string)
        .collect()
}
