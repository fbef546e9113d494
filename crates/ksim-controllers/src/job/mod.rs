//! The Job controller: runs `parallelism` pods at a time until
//! `completions` of them succeed (NonIndexed), or one per completion index
//! (Indexed); counts failed pods against `backoffLimit`; reports active,
//! ready, succeeded, failed, startTime, completionTime, completedIndexes and
//! the SuccessCriteriaMet/Complete and FailureTarget/Failed conditions, as
//! kube-controller-manager 1.33 does. Pods are completed by the kubelet
//! simulator's pod-complete stage.

mod controller;
mod progress;
#[cfg(test)]
mod tests;

pub use controller::{COMPLETION_INDEX_ANNOTATION, run};
pub use progress::{Counts, Verdict, format_indexes, judge};
