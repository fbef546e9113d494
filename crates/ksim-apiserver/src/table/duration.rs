//! Ages and durations as kubectl shows them: apimachinery's
//! `duration.HumanDuration` rules and the `<unknown>` placeholder of
//! timestamps that are not set.

use chrono::{DateTime, Utc};

/// A duration in whole seconds (truncated toward zero, as Go's
/// `int(d.Seconds())`) in the succinct form of `duration.HumanDuration`:
/// `59s`, `119s`, `2m3s`, `10m`, `179m`, `3h5m`, `8h`, `47h`, `2d3h`, `8d`,
/// `729d`, `2y3d`, `8y`. A clock skew of up to one second shows as `0s`;
/// more than that in the future is `<invalid>`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{days}d")
        } else {
            format!("{days}d{h}h")
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        let dy = days % 365;
        return if dy == 0 {
            format!("{years}y")
        } else {
            format!("{years}y{dy}d")
        };
    }
    format!("{years}y")
}

/// Whole seconds from `from` to `to`, truncated toward zero.
pub fn seconds_between(from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
    (to - from).num_milliseconds() / 1000
}

/// Go's zero `time.Time` (`0001-01-01T00:00:00Z`) in Unix seconds.
const GO_ZERO_TIME_UNIX: i64 = -62_135_596_800;

/// Parses a Kubernetes `Time` or `MicroTime` (RFC 3339). The zero time
/// (`0001-01-01T00:00:00Z`) and anything unparsable give `None`.
pub fn parse_time(value: &str) -> Option<DateTime<Utc>> {
    let time = DateTime::parse_from_rfc3339(value)
        .ok()?
        .with_timezone(&Utc);
    if time.timestamp() == GO_ZERO_TIME_UNIX {
        return None;
    }
    Some(time)
}

/// The age of a timestamp (`translateTimestampSince`): `<unknown>` when unset.
pub fn age(timestamp: Option<&str>, now: DateTime<Utc>) -> String {
    match timestamp.and_then(parse_time) {
        Some(time) => human_duration(seconds_between(time, now)),
        None => "<unknown>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_follows_apimachinery_rules() {
        let cases: &[(i64, &str)] = &[
            (-5, "<invalid>"),
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (5, "5s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (123, "2m3s"),
            (599, "9m59s"),
            (600, "10m"),
            (3600, "60m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (8 * 3600, "8h"),
            (25 * 3600, "25h"),
            (47 * 3600 + 59 * 60, "47h"),
            (48 * 3600, "2d"),
            (51 * 3600, "2d3h"),
            (3 * 86400, "3d"),
            (8 * 86400, "8d"),
            (400 * 86400, "400d"),
            (729 * 86400, "729d"),
            (730 * 86400, "2y"),
            (733 * 86400, "2y3d"),
            (8 * 365 * 86400, "8y"),
            (20 * 365 * 86400 + 5 * 86400, "20y"),
        ];
        for (seconds, want) in cases {
            assert_eq!(human_duration(*seconds), *want, "{seconds}s");
        }
    }

    #[test]
    fn age_of_unset_or_zero_timestamp_is_unknown() {
        let now = parse_time("2024-01-01T00:00:00Z").expect("valid time");
        assert_eq!(age(None, now), "<unknown>");
        assert_eq!(age(Some("0001-01-01T00:00:00Z"), now), "<unknown>");
        assert_eq!(age(Some("not a time"), now), "<unknown>");
        assert_eq!(age(Some("2023-12-31T23:58:30Z"), now), "90s");
        assert_eq!(age(Some("2023-12-31T23:59:59.500000Z"), now), "0s");
    }
}
