//! Go's duration strings (`500ms`, `90s`, `10m`, `1h30m`, `1.5h`), as
//! `metav1.Duration`, kubectl flags and ksim's clock take them, and Go's
//! `Duration.String` to print one back.

use std::time::Duration;

const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// Parses a Go duration (`time.ParseDuration`): one or more decimal numbers,
/// each with a unit among `ns`, `us` (`µs`), `ms`, `s`, `m`, `h`. A lone `0`
/// is zero; negative durations are refused. The error reads as Go's does
/// (`time: invalid duration "x"`).
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("time: invalid duration {text:?}");
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("time: missing unit in duration {text:?}"))?;
        let (whole, fraction) = match rest[..number_end].split_once('.') {
            Some((whole, fraction)) => (whole, fraction),
            None => (&rest[..number_end], ""),
        };
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(invalid());
        }
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit: u128 = match &rest[..unit_end] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => NANOS_PER_SECOND,
            "m" => 60 * NANOS_PER_SECOND,
            "h" => 3_600 * NANOS_PER_SECOND,
            "" => return Err(format!("time: missing unit in duration {text:?}")),
            unit => return Err(format!("time: unknown unit {unit:?} in duration {text:?}")),
        };
        rest = &rest[unit_end..];
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| invalid())?
        };
        let mut value = whole.checked_mul(unit).ok_or_else(invalid)?;
        // The fraction's digits, each a tenth of the one before (digits
        // beyond a nanosecond are dropped, as Go does).
        let mut scale = unit;
        for digit in fraction.bytes() {
            scale /= 10;
            value += u128::from(digit - b'0') * scale;
        }
        total = total.checked_add(value).ok_or_else(invalid)?;
    }
    let seconds = u64::try_from(total / NANOS_PER_SECOND).map_err(|_| invalid())?;
    let nanos = u32::try_from(total % NANOS_PER_SECOND).map_err(|_| invalid())?;
    Ok(Duration::new(seconds, nanos))
}

/// Go's `Duration.String`: `0s`, `300µs`, `1.5ms`, `1m30s`, `1h0m0s`.
pub fn format_go_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    // `value` in units of 10^-digits, without trailing zeros.
    let decimal = |value: u128, digits: u32| -> String {
        let unit = 10u128.pow(digits);
        let (whole, rest) = (value / unit, value % unit);
        if rest == 0 {
            whole.to_string()
        } else {
            let text = format!("{whole}.{rest:0width$}", width = digits as usize);
            text.trim_end_matches('0').to_string()
        }
    };
    match nanos {
        0 => "0s".to_string(),
        1..1_000 => format!("{nanos}ns"),
        1_000..1_000_000 => format!("{}µs", decimal(nanos, 3)),
        1_000_000..NANOS_PER_SECOND => format!("{}ms", decimal(nanos, 6)),
        _ => {
            let hours = nanos / (3_600 * NANOS_PER_SECOND);
            let minutes = nanos / (60 * NANOS_PER_SECOND) % 60;
            let seconds = decimal(nanos % (60 * NANOS_PER_SECOND), 9);
            if hours > 0 {
                format!("{hours}h{minutes}m{seconds}s")
            } else if minutes > 0 {
                format!("{minutes}m{seconds}s")
            } else {
                format!("{seconds}s")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        for (text, expected) in [
            ("0", Duration::ZERO),
            ("90s", Duration::from_secs(90)),
            ("10m", Duration::from_secs(600)),
            ("1h30m", Duration::from_secs(5_400)),
            ("500ms", Duration::from_millis(500)),
            ("1.5h", Duration::from_secs(5_400)),
            (".5s", Duration::from_millis(500)),
            ("+2m", Duration::from_secs(120)),
            ("1m0.25s", Duration::from_millis(60_250)),
            ("3us", Duration::from_micros(3)),
            ("7ns", Duration::from_nanos(7)),
        ] {
            assert_eq!(parse_go_duration(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn malformed_durations_are_refused_as_go_says() {
        for (text, message) in [
            ("", "time: invalid duration \"\""),
            ("10", "time: missing unit in duration \"10\""),
            ("10x", "time: unknown unit \"x\" in duration \"10x\""),
            ("-5m", "time: invalid duration \"-5m\""),
            ("m", "time: invalid duration \"m\""),
            ("1..5s", "time: invalid duration \"1..5s\""),
            ("ten minutes", "time: invalid duration \"ten minutes\""),
        ] {
            assert_eq!(
                parse_go_duration(text),
                Err(message.to_string()),
                "{text:?}"
            );
        }
    }

    #[test]
    fn durations_print_as_go_prints_them() {
        for (duration, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_millis(1_500), "1.5s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(600), "10m0s"),
            (Duration::from_secs(3_600), "1h0m0s"),
            (Duration::from_micros(300), "300µs"),
            (Duration::from_nanos(1_500_000), "1.5ms"),
        ] {
            assert_eq!(format_go_duration(duration), text);
        }
    }
}
