//! The nodes and pods the descheduler's in-process tests put on
//! ksim-testutils' cluster, made with its builders.

use ksim_testutils::builders::{NodeBuilder, PodBuilder, node, pod};

/// A Ready node with room for everything these tests run.
pub fn roomy_node(name: &str) -> NodeBuilder {
    node(name).cpu("32").memory("64Gi").ready()
}

/// A Running and Ready pod owned by ReplicaSet `web` (which does not
/// exist, so an evicted pod is not replaced), bound to `node`. Ready: the
/// eviction API lets unready pods go while the budget is healthy
/// (IfHealthyBudget), so budgets only hold Ready pods.
pub fn web_pod(name: &str, node: &str) -> PodBuilder {
    pod(name)
        .image("nginx")
        .label("app", "web")
        .owner("apps/v1", "ReplicaSet", "web", "web-uid")
        .node(node)
        .running()
}
