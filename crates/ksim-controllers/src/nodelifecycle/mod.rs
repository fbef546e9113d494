//! The node lifecycle controller, as kube-controller-manager's
//! `node-lifecycle-controller` and `taint-eviction-controller` behave: a node
//! whose kubelet stops renewing its Lease (and posting status) for the grace
//! period gets Unknown conditions and the `node.kubernetes.io/unreachable`
//! taints (`not-ready` when Ready is False); conditions and
//! `spec.unschedulable` map to NoSchedule taints; pods that do not tolerate a
//! node's NoExecute taints are deleted, after their tolerationSeconds.
//! Events as upstream: `RegisteredNode` / `RemovingNode` when nodes come and
//! go, `NodeNotReady` on the node and its pods, and `TaintManagerEviction`
//! when a pod is marked for deletion or its pending deletion is cancelled.
//!
//! [`health`] and [`eviction`] are the pure decisions; [`controller`] runs them
//! against the API.

mod controller;
mod eviction;
mod health;

pub use controller::{NodeLifecycleConfig, run, run_with};
pub use eviction::eviction_deadline;
pub use health::{
    NOT_READY_TAINT, UNREACHABLE_TAINT, UNSCHEDULABLE_TAINT, desired_taints, stale_conditions,
};
