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

/// Clock ticks per second of the times in `/proc/<pid>/stat` (USER_HZ,
/// 100 on every Linux architecture ksim builds for).
const USER_HZ: u64 = 100;

/// CPU time (user + system, all threads) process `pid` has used so far.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu(&stat)
}

/// utime + stime of a `/proc/<pid>/stat` line. The fields are counted after
/// the command name, which is in parentheses and may hold spaces.
pub fn parse_stat_cpu(stat: &str) -> Option<Duration> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 1000 / USER_HZ))
}

/// `; <who> CPU 1.23 s (4,567 <what> per CPU-second)`, or nothing when the
/// CPU time is unknown: a figure that holds on a shared, busy machine.
pub fn cpu_detail(who: &str, cpu: Option<Duration>, count: u64, what: &str) -> String {
    match cpu {
        Some(cpu) if !cpu.is_zero() => format!(
            "; {who} CPU {:.2} s ({} {what} per CPU-second)",
            cpu.as_secs_f64(),
            thousands(per_second(count, cpu))
        ),
        Some(_) => format!("; {who} CPU < 0.01 s"),
        None => String::new(),
    }
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
    fn cpu_time_is_utime_plus_stime_after_the_command_name() {
        let stat = "42 (ksim (x) y) S 1 42 42 0 -1 4194560 100 0 0 0 250 30 0 0 20 0 3 0";
        assert_eq!(parse_stat_cpu(stat), Some(Duration::from_millis(2_800)));
        assert_eq!(parse_stat_cpu("42 (ksim) S 1"), None);
        assert_eq!(parse_stat_cpu("garbage"), None);
    }

    #[test]
    fn cpu_detail_prints_work_per_cpu_second() {
        let cpu = Some(Duration::from_millis(500));
        assert_eq!(
            cpu_detail("server", cpu, 10_000, "pods"),
            "; server CPU 0.50 s (20,000 pods per CPU-second)"
        );
        assert_eq!(
            cpu_detail("server", Some(Duration::ZERO), 1, "pods"),
            "; server CPU < 0.01 s"
        );
        assert_eq!(cpu_detail("server", None, 1, "pods"), "");
    }

    #[test]
    fn own_cpu_time_is_readable_where_proc_exists() {
        if std::path::Path::new("/proc/self/stat").exists() {
            assert!(cpu_time(std::process::id()).is_some());
        }
    }

    #[test]
    fn own_rss_is_readable_where_proc_exists() {
        if std::path::Path::new("/proc/self/status").exists() {
            let rss = vm_rss_bytes(std::process::id()).expect("own VmRSS");
            assert!(rss > 0);
        }
    }
}
