//! The StatefulSet controller: pods named `<set>-<ordinal>` created in
//! order and removed in reverse (OrderedReady) or all at once (Parallel),
//! ControllerRevisions named `<set>-<hash>` (old ones beyond
//! `revisionHistoryLimit` deleted), RollingUpdate in reverse ordinal order
//! down to the partition, orphan pods and revisions adopted and pods that
//! stop matching released, and the status `kubectl rollout status
//! sts/<name>` reads (replicas, ready/current/updated/available replicas,
//! currentRevision, updateRevision, observedGeneration).
//!
//! `volumeClaimTemplates` become PersistentVolumeClaims named
//! `<template>-<set>-<ordinal>`, created before their pod, with the owner
//! references `persistentVolumeClaimRetentionPolicy` asks for so that the
//! garbage collector deletes them. ksim has no volume provisioner and its
//! scheduler no VolumeBinding plugin: the claims stay Pending and pods are
//! scheduled without regard to them.

mod claims;
mod controller;
mod history;
mod plan;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

pub(crate) use controller::revision_data;
pub use controller::{POD_INDEX_LABEL, POD_NAME_LABEL, REVISION_LABEL, run};
pub(crate) use history::sort_revisions;
pub use plan::{MemberPod, PodState, SetShape, Step, plan_steps};
