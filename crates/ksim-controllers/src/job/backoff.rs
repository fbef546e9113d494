//! The delay before a Job replaces a failed pod, as upstream's
//! `backoff_utils.go`: the base delay (10 s) doubles with each failure
//! since the last success, up to a maximum (6 minutes), and counts from the
//! last failure's finish time. A Job keeps one [`BackoffRecord`], advanced
//! by the pods that finished since the previous sync; with
//! `backoffLimitPerIndex` each index waits by its own failure count.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Upstream's `DefaultJobPodFailureBackOff`.
pub const DEFAULT_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10);
/// Upstream's `MaxJobPodFailureBackOff`.
pub const MAX_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(360);

/// The failures since the last success and when the last one finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct BackoffRecord {
    pub(crate) failures_after_last_success: i32,
    pub(crate) last_failure: Option<Timestamp>,
}

/// When a pod finished (`getFinishedTime`): its containers' latest finish
/// when all have terminated, else when Ready turned False, else its
/// deletion time less the grace period, else its creation.
pub(crate) fn finished_time(pod: &Pod) -> Timestamp {
    let status = pod.status.as_ref();
    let containers = status.and_then(|s| s.container_statuses.as_ref());
    if let Some(containers) = containers.filter(|c| !c.is_empty()) {
        let finished: Option<Vec<Timestamp>> = containers
            .iter()
            .map(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .and_then(|t| t.finished_at.as_ref())
                    .map(|t| t.0)
            })
            .collect();
        if let Some(latest) = finished.and_then(|f| f.into_iter().max()) {
            return latest;
        }
    }
    let ready_false = ksim_core::status::pod_ready_condition(pod)
        .filter(|c| c.status == "False")
        .and_then(|c| c.last_transition_time.as_ref());
    if let Some(at) = ready_false {
        return at.0;
    }
    if let Some(deleted) = pod.metadata.deletion_timestamp.as_ref() {
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        return deleted.0 - SignedDuration::from_secs(grace);
    }
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map_or(Timestamp::UNIX_EPOCH, |t| t.0)
}

impl BackoffRecord {
    /// The record after pods newly succeeded and failed
    /// (`newBackoffRecord`): a success resets the count to the failures
    /// that finished after it.
    pub(crate) fn advance(self, succeeded: &[&Pod], failed: &[&Pod]) -> Self {
        let mut failed_times: Vec<Timestamp> = failed.iter().map(|p| finished_time(p)).collect();
        failed_times.sort_unstable();
        let last_success = succeeded.iter().map(|p| finished_time(p)).max();
        let to_i32 = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        match last_success {
            None if failed_times.is_empty() => self,
            None => BackoffRecord {
                failures_after_last_success: self
                    .failures_after_last_success
                    .saturating_add(to_i32(failed_times.len())),
                last_failure: failed_times.last().copied(),
            },
            Some(success) => {
                let after: Vec<Timestamp> =
                    failed_times.into_iter().filter(|t| *t > success).collect();
                BackoffRecord {
                    failures_after_last_success: to_i32(after.len()),
                    last_failure: after.last().copied(),
                }
            }
        }
    }

    /// How long the next pod creation must still wait (`getRemainingTime`).
    pub(crate) fn remaining(&self, now: Timestamp, base: Duration, max: Duration) -> Duration {
        remaining_for(
            self.failures_after_last_success,
            self.last_failure,
            now,
            base,
            max,
        )
    }
}

/// How long to wait after `failures` failures, the last at `last_failure`
/// (`getRemainingTimeForFailuresCount`).
pub(crate) fn remaining_for(
    failures: i32,
    last_failure: Option<Timestamp>,
    now: Timestamp,
    base: Duration,
    max: Duration,
) -> Duration {
    let Some(last_failure) = last_failure.filter(|_| failures > 0) else {
        return Duration::ZERO;
    };
    let mut backoff = base;
    for _ in 1..failures {
        backoff = backoff.saturating_mul(2);
        if backoff >= max {
            backoff = max;
            break;
        }
    }
    let elapsed = Duration::try_from(now.duration_since(last_failure)).unwrap_or(Duration::ZERO);
    backoff.saturating_sub(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).expect("time")
    }

    /// A pod whose Ready condition turned False at `seconds`.
    fn finished(seconds: i64) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "creationTimestamp": at(0).to_string()},
            "status": {"conditions": [{"type": "Ready", "status": "False",
                "lastTransitionTime": at(seconds).to_string()}]}
        }))
        .expect("pod")
    }

    #[test]
    fn the_finish_time_prefers_containers_then_ready_then_deletion_then_creation() {
        let containers: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "status": {
                "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": at(50).to_string()}],
                "containerStatuses": [
                    {"name": "a", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                     "state": {"terminated": {"exitCode": 1, "finishedAt": at(10).to_string()}}},
                    {"name": "b", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                     "state": {"terminated": {"exitCode": 1, "finishedAt": at(20).to_string()}}}
                ]
            }
        }))
        .expect("pod");
        assert_eq!(finished_time(&containers), at(20));
        assert_eq!(finished_time(&finished(30)), at(30));
        let deleted: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "deletionTimestamp": at(40).to_string(),
                         "deletionGracePeriodSeconds": 30, "creationTimestamp": at(0).to_string()}
        }))
        .expect("pod");
        assert_eq!(finished_time(&deleted), at(10));
        let created: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "creationTimestamp": at(5).to_string()}
        }))
        .expect("pod");
        assert_eq!(finished_time(&created), at(5));
    }

    #[test]
    fn the_delay_doubles_per_failure_up_to_the_maximum() {
        let base = DEFAULT_POD_FAILURE_BACKOFF;
        let max = MAX_POD_FAILURE_BACKOFF;
        let cases = [
            // (failures, seconds since the last failure, remaining seconds)
            (0, 0, 0),
            (1, 0, 10),
            (1, 4, 6),
            (1, 11, 0),
            (2, 0, 20),
            (3, 5, 35),
            (6, 0, 320),
            (7, 0, 360),
            (30, 60, 300),
        ];
        for (failures, elapsed, want) in cases {
            let got = remaining_for(failures, Some(at(0)), at(elapsed), base, max);
            assert_eq!(
                got,
                Duration::from_secs(want),
                "{failures} after {elapsed}s"
            );
        }
        assert_eq!(remaining_for(3, None, at(0), base, max), Duration::ZERO);
    }

    #[test]
    fn failures_accumulate_until_a_success_resets_them() {
        let (f1, f2, f3) = (finished(10), finished(20), finished(30));
        let s = finished(25);
        let record = BackoffRecord::default().advance(&[], &[&f2, &f1]);
        assert_eq!(
            record,
            BackoffRecord {
                failures_after_last_success: 2,
                last_failure: Some(at(20))
            }
        );
        assert_eq!(record.advance(&[], &[]), record, "nothing new");
        let record = record.advance(&[&s], &[&f3]);
        assert_eq!(
            record,
            BackoffRecord {
                failures_after_last_success: 1,
                last_failure: Some(at(30))
            },
            "only the failure after the success counts"
        );
        assert_eq!(
            record.advance(&[&s], &[]),
            BackoffRecord::default(),
            "a success alone resets"
        );
    }
}
