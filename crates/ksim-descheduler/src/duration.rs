//! Go's duration strings (`300ms`, `1.5h`, `2h45m`), as `metav1.Duration`
//! and the descheduler's `--descheduling-interval` take them, and Go's
//! `Duration.String` for messages that quote one.

use std::time::Duration;

/// Parses a Go duration (`time.ParseDuration`): a sequence of decimal
/// numbers with units ns, us (µs), ms, s, m, h. Negative durations are
/// refused; `0` alone is zero.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("time: invalid duration {text:?}");
    let mut rest = text.trim();
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if let Some(stripped) = rest.strip_prefix('+') {
        rest = stripped;
    }
    if rest.is_empty() || rest.starts_with('-') {
        return Err(invalid());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("time: missing unit in duration {text:?}"))?;
        if number_end == 0 {
            return Err(invalid());
        }
        let number: f64 = rest[..number_end].parse().map_err(|_| invalid())?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            unit => return Err(format!("time: unknown unit {unit:?} in duration {text:?}")),
        };
        total += number * seconds_per_unit;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| invalid())
}

/// Go's `Duration.String`: `0s`, `1.5ms`, `300µs`, `5m0s`, `1h0m0s`,
/// `2m3.5s` (fractions without trailing zeros).
pub fn format_go_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    let fraction = |value: u128, digits: u32| -> String {
        let unit = 10u128.pow(digits);
        let whole = value / unit;
        let rest = value % unit;
        if rest == 0 {
            whole.to_string()
        } else {
            let text = format!("{whole}.{rest:0width$}", width = digits as usize);
            text.trim_end_matches('0').to_string()
        }
    };
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", fraction(nanos, 3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", fraction(nanos, 6));
    }
    let hours = nanos / 3_600_000_000_000;
    let minutes = nanos / 60_000_000_000 % 60;
    let seconds = fraction(nanos % 60_000_000_000, 9);
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        for (text, seconds) in [
            ("0", 0.0),
            ("30s", 30.0),
            ("5m", 300.0),
            ("1h30m", 5400.0),
            ("1.5h", 5400.0),
            ("250ms", 0.25),
        ] {
            assert_eq!(
                parse_go_duration(text),
                Ok(Duration::from_secs_f64(seconds)),
                "{text}"
            );
        }
    }

    #[test]
    fn bad_durations_are_refused_with_go_messages() {
        assert_eq!(
            parse_go_duration("5"),
            Err("time: missing unit in duration \"5\"".into())
        );
        assert_eq!(
            parse_go_duration("5d"),
            Err("time: unknown unit \"d\" in duration \"5d\"".into())
        );
        assert!(parse_go_duration("-5s").is_err());
        assert!(parse_go_duration("").is_err());
    }

    #[test]
    fn durations_print_as_go_prints_them() {
        for (duration, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(5), "5ns"),
            (Duration::from_micros(300), "300µs"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::from_secs(30), "30s"),
            (Duration::from_secs(300), "5m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_millis(123_500), "2m3.5s"),
            (Duration::from_secs(5400), "1h30m0s"),
        ] {
            assert_eq!(format_go_duration(duration), text);
        }
    }
}
