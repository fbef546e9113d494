//! The disruption controller: keeps each PodDisruptionBudget's status
//! (expectedPods, desiredHealthy, currentHealthy, disruptionsAllowed,
//! disruptedPods, observedGeneration, the DisruptionAllowed condition) as
//! upstream computes it from its caches; the API server's eviction
//! subresource reads it. It also resets DisruptionTarget pod conditions
//! that no deletion followed within 2 minutes.

mod budgets;
mod controller;
mod status;

pub use controller::{STALE_POD_DISRUPTION_TIMEOUT, run, stale_disruption_wait};
pub use status::{
    ControllerScale, DELETION_TIMEOUT, DISRUPTION_ALLOWED, ExpectedCount, INSUFFICIENT_PODS,
    SUFFICIENT_PODS, SYNC_FAILED, budget_status, count_healthy, disrupted_pod_map,
    expected_pod_count, failed_status, go_selector_string,
};
