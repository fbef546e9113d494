//! The scheduler_perf workloads both benches run (kube-scheduler's
//! thresholds in pods/s).

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
