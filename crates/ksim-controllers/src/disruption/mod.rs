//! The disruption controller: keeps each PodDisruptionBudget's status
//! (expectedPods, desiredHealthy, currentHealthy, disruptionsAllowed,
//! disruptedPods, observedGeneration, the DisruptionAllowed condition) as
//! upstream computes it; the API server's eviction subresource reads it.

mod controller;
mod status;

pub use controller::run;
pub use status::{
    ControllerScale, DELETION_TIMEOUT, DISRUPTION_ALLOWED, ExpectedCount, INSUFFICIENT_PODS,
    SUFFICIENT_PODS, SYNC_FAILED, budget_status, count_healthy, disrupted_pod_map,
    expected_pod_count, failed_status, go_selector_string,
};
