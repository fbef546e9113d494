//! The scheduler_perf workloads both benches run (kube-scheduler's
//! thresholds in pods/s), and the process CPU time both report.

/// A scheduler_perf workload and its upstream threshold in pods/s.
pub struct Workload {
    pub name: &'static str,
    pub nodes: usize,
    pub init: usize,
    pub pods: usize,
    pub spread: Option<&'static str>,
    pub threshold: f64,
}

pub const WORKLOADS: [Workload; 3] = [
    Workload {
        name: "SchedulingBasic",
        nodes: 5_000,
        init: 1_000,
        pods: 10_000,
        spread: None,
        threshold: 270.0,
    },
    Workload {
        name: "TopologySpreading",
        nodes: 5_000,
        init: 1_000,
        pods: 5_000,
        spread: Some("DoNotSchedule"),
        threshold: 85.0,
    },
    Workload {
        name: "PreferredTopologySpreading",
        nodes: 5_000,
        init: 1_000,
        pods: 5_000,
        spread: Some("ScheduleAnyway"),
        threshold: 125.0,
    },
];

/// CPU seconds this process has used (user + system), from /proc/self/stat
/// (Linux's USER_HZ is 100); `None` elsewhere.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at state.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}
