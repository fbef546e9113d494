//! The ReplicaSet controller: keeps `spec.replicas` active pods named
//! `<replicaset>-<5 random chars>`, adopts matching orphans, releases pods
//! that stopped matching, deletes surplus pods in upstream's order, and
//! reports replicas, fullyLabeledReplicas, readyReplicas, availableReplicas
//! and observedGeneration.

mod controller;
mod expectations;
mod ranking;

pub use controller::{BURST_REPLICAS, run};
pub(crate) use expectations::{Expectations, PodKey};
pub use ranking::{POD_DELETION_COST, compare_for_deletion, pods_to_delete};
