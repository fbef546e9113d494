//! Go duration strings (`1h30m`, `2.5s`, `-300ms`) as `time.ParseDuration` reads them.

use chrono::TimeDelta;

/// Parses a Go duration; `None` when the text is not one.
pub fn parse_go_duration(text: &str) -> Option<TimeDelta> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(TimeDelta::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut total_nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_len];
        if number.is_empty() || number == "." {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total_nanos += value * scale;
    }
    if !total_nanos.is_finite() || total_nanos > i64::MAX as f64 {
        return None;
    }
    let nanos = total_nanos.round() as i64;
    Some(TimeDelta::nanoseconds(if negative {
        -nanos
    } else {
        nanos
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        let cases = [
            ("0", Some(0)),
            ("1s", Some(1_000_000_000)),
            ("1h30m", Some(5_400_000_000_000)),
            ("2.5s", Some(2_500_000_000)),
            ("-300ms", Some(-300_000_000)),
            ("10us", Some(10_000)),
            ("", None),
            ("5", None),
            ("1x", None),
            ("s", None),
            ("9999999999h", None),
        ];
        for (text, want) in cases {
            assert_eq!(
                parse_go_duration(text).map(|d| d.num_nanoseconds().unwrap_or(i64::MAX)),
                want,
                "{text}"
            );
        }
    }
}
