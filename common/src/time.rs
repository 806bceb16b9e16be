//! Wall-clock milliseconds, for the edges only (daemons and clients). The scheduler core
//! never calls this: time is passed into it.

/// Milliseconds since the Unix epoch; 0 if the clock is before 1970.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
