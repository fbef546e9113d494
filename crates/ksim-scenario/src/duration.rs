//! Durations as Kubernetes and Go write them (`90s`, `10m`, `1h30m`): the
//! parser and printer in ksim-core (`ksim_core::duration`), so scenario files and
//! reports read like the rest of ksim.

use std::time::Duration;

/// Parses a Go duration (`90s`, `10m`, `1h30m`, `1.5h`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    ksim_core::duration::parse_go_duration(text)
}

/// Formats a duration as Go does (`0s`, `1m30s`, `1h0m0s`).
pub fn format_duration(duration: Duration) -> String {
    ksim_core::duration::format_go_duration(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_style_durations_parse_and_print_back() {
        for (text, seconds, printed) in [
            ("90s", 90, "1m30s"),
            ("10m", 600, "10m0s"),
            ("1h30m", 5400, "1h30m0s"),
            ("0", 0, "0s"),
        ] {
            let parsed = parse_duration(text).expect(text);
            assert_eq!(parsed, Duration::from_secs(seconds), "{text}");
            assert_eq!(format_duration(parsed), printed, "{text}");
        }
    }

    #[test]
    fn bad_durations_are_refused_with_go_messages() {
        for text in ["10", "ten minutes", "-5s", "5x", ""] {
            let error = parse_duration(text).expect_err(text);
            assert!(error.starts_with("time: "), "{text}: {error}");
        }
    }
}
