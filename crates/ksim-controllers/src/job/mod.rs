//! The Job controller: runs `parallelism` pods at a time until
//! `completions` of them succeed (NonIndexed), or one per completion index
//! (Indexed), as kube-controller-manager 1.33 does. Pods carry the
//! `batch.kubernetes.io/job-tracking` finalizer until their outcome is
//! counted (through `status.uncountedTerminatedPods`), so counts survive pod
//! deletion. The Job fails on `backoffLimit`, `activeDeadlineSeconds`
//! (re-queued at the deadline) or a `podFailurePolicy` FailJob rule
//! (FailureTarget, then Failed once its pods are gone); it succeeds on its
//! completions or a `successPolicy` rule (SuccessCriteriaMet, then
//! Complete); `suspend` deletes its active pods (Suspended condition). With
//! `backoffLimitPerIndex` each index has its own budget (carried by the
//! `job-index-failure-count` annotation); failed indexes are listed in
//! `status.failedIndexes` and end the Job (FailedIndexes,
//! MaxFailedIndexesExceeded). A failed pod is replaced after upstream's
//! backoff (10 s doubling per failure since the last success, at most 6
//! minutes; per index with `backoffLimitPerIndex`; tunable in
//! [`JobConfig`]).
//!
//! [`progress`], [`policy`] and `backoff` are the pure decisions;
//! `controller` runs the sync from the pod cache of `informers` (one pod
//! watch, pods by controller uid and orphans, with expectations for pod
//! creations, deletions and finalizer removals); `orphans` releases the
//! finalizer of pods whose Job is gone.

mod backoff;
mod controller;
mod informers;
mod orphans;
mod policy;
mod progress;
#[cfg(test)]
mod tests;

pub use backoff::{DEFAULT_POD_FAILURE_BACKOFF, MAX_POD_FAILURE_BACKOFF};
pub use controller::{COMPLETION_INDEX_ANNOTATION, JobConfig, TRACKING_FINALIZER, run, run_with};
pub use policy::{FailureAction, FailureMatch, match_pod_failure_policy, match_success_policy};
pub use progress::{format_indexes, is_complete, parse_indexes, want_active};
