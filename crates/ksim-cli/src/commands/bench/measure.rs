//! The pure arithmetic and formatting of benchmark figures: percentiles,
//! rates, numbers with thousands separators, sizes in MiB, and VmRSS read
//! from `/proc/<pid>/status`.

use std::time::Duration;

/// The `p`th percentile (nearest rank) of sorted `values`; zero when empty.
pub fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// `count` things done in `elapsed`, per second; zero when no time passed.
pub fn per_second(count: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 { count as f64 / secs } else { 0.0 }
}

/// `value` rounded to a whole number with `,` between thousands: `23,456`.
pub fn thousands(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    let rounded = value.round();
    let digits = format!("{:.0}", rounded.abs());
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if rounded < 0.0 {
        out.push('-');
    }
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `d` in milliseconds with one decimal: `12.3 ms`.
pub fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// `bytes` in MiB with one decimal: `48.2 MiB`.
pub fn mebibytes(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// VmRSS of process `pid` in bytes, from `/proc/<pid>/status`.
pub fn vm_rss_bytes(pid: u32) -> Option<u64> {
    proc_status_bytes(pid, "VmRSS:")
}

/// VmHWM (peak RSS) of process `pid` in bytes, from `/proc/<pid>/status`.
pub fn vm_hwm_bytes(pid: u32) -> Option<u64> {
    proc_status_bytes(pid, "VmHWM:")
}

fn proc_status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_status_kib(&status, field).map(|kib| kib * 1024)
}

/// The value in KiB of `field` (e.g. `VmRSS:`) in a `/proc/<pid>/status` text.
pub fn parse_status_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_uses_nearest_rank() {
        let values: Vec<_> = (1..=20).map(Duration::from_millis).collect();
        let cases = [(50, 10), (90, 18), (99, 20), (100, 20), (0, 1), (1, 1)];
        for (p, want) in cases {
            assert_eq!(percentile(&values, p), Duration::from_millis(want), "p{p}");
        }
        assert_eq!(percentile(&values[..1], 90), Duration::from_millis(1));
        assert_eq!(percentile(&[], 50), Duration::ZERO);
    }

    #[test]
    fn per_second_divides_by_elapsed_and_survives_zero_time() {
        assert_eq!(per_second(20_000, Duration::from_millis(500)), 40_000.0);
        assert_eq!(per_second(5, Duration::ZERO), 0.0);
    }

    #[test]
    fn thousands_groups_digits_by_three() {
        let cases = [
            (0.0, "0"),
            (7.0, "7"),
            (999.4, "999"),
            (999.6, "1,000"),
            (1_000.0, "1,000"),
            (23_456.2, "23,456"),
            (100_000.0, "100,000"),
            (1_234_567.0, "1,234,567"),
            (-12_345.0, "-12,345"),
        ];
        for (value, want) in cases {
            assert_eq!(thousands(value), want, "{value}");
        }
        assert_eq!(thousands(f64::INFINITY), "inf");
    }

    #[test]
    fn durations_and_sizes_print_with_units() {
        assert_eq!(millis(Duration::from_micros(12_345)), "12.3 ms");
        assert_eq!(mebibytes(3 * 1024 * 1024 / 2), "1.5 MiB");
    }

    #[test]
    fn status_fields_are_parsed_from_proc_status() {
        let status = "Name:\tksim\nVmHWM:\t  900 kB\nVmRSS:\t   12345 kB\nThreads:\t3\n";
        assert_eq!(parse_status_kib(status, "VmRSS:"), Some(12345));
        assert_eq!(parse_status_kib(status, "VmHWM:"), Some(900));
        assert_eq!(parse_status_kib("Name:\tksim\n", "VmRSS:"), None);
        assert_eq!(parse_status_kib("VmRSS:\tlots kB\n", "VmRSS:"), None);
    }

    #[test]
    fn own_rss_is_readable_where_proc_exists() {
        if std::path::Path::new("/proc/self/status").exists() {
            let rss = vm_rss_bytes(std::process::id()).expect("own VmRSS");
            assert!(rss > 0);
        }
    }
}
