//! The DistributedPodDisruptionBudget (DPDB) controller: one budget across
//! namespaces and clusters. Each DPDB owns one ordinary PodDisruptionBudget
//! (its child, same name and namespace) whose integer minAvailable it sets
//! from the status of the PodDisruptionBudgets named in its federation, so
//! that the eviction API and `kubectl drain` enforce the federation's budget.
//! Members in other clusters are reached through kubeconfig contexts (in a
//! ksim cluster: the sibling ksim clusters of the same KSIM_HOME).
//!
//! [`types`] holds the API types, [`plan`] the decisions as a pure
//! function, [`clusters`] the clients of other clusters, [`controller`] the
//! loop.

pub mod clusters;
pub mod controller;
pub mod plan;
pub mod types;

#[cfg(test)]
mod plan_tests;

pub use controller::{DpdbConfig, run};
pub use types::{
    Coordination, DistributedPodDisruptionBudget, DistributedPodDisruptionBudgetSpec,
    DistributedPodDisruptionBudgetStatus, FederationMember, MemberState, MemberStatus,
};
