//! The StatefulSet controller: pods named `<set>-<ordinal>` created in
//! order and removed in reverse (OrderedReady) or all at once (Parallel),
//! ControllerRevisions named `<set>-<hash>`, RollingUpdate in reverse
//! ordinal order down to the partition, and the status `kubectl rollout
//! status sts/<name>` reads (replicas, ready/current/updated/available
//! replicas, currentRevision, updateRevision, observedGeneration).
//! volumeClaimTemplates are not turned into PersistentVolumeClaims.

mod controller;
mod plan;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

pub use controller::{POD_INDEX_LABEL, POD_NAME_LABEL, REVISION_LABEL, run};
pub use plan::{MemberPod, PodState, SetShape, Step, plan_steps};
