//! Time as the plan and the report write it: Unix seconds to and from
//! RFC 3339 (UTC, whole seconds). Pure; never reads the clock.

/// Unix seconds as RFC 3339 (UTC, whole seconds).
pub(crate) fn rfc3339(secs: i64) -> String {
    humantime::format_rfc3339_seconds(system_time(secs)).to_string()
}

/// Unix seconds as a time (before 1970 counts as 1970).
pub(crate) fn system_time(secs: i64) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::try_from(secs).unwrap_or(0))
}

/// RFC 3339 (UTC) as Unix seconds.
pub(crate) fn parse_rfc3339(text: &str) -> Option<i64> {
    let t = humantime::parse_rfc3339_weak(text.trim_end_matches('Z')).ok()?;
    i64::try_from(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs()).ok()
}

/// A time as Unix milliseconds (before 1970 counts as 0). Takes the time:
/// reading the clock is the caller's business.
pub(crate) fn unix_ms(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
