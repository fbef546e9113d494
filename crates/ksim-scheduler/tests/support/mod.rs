//! The nodes and pods the scheduler's in-process tests put on
//! ksim-testutils' cluster, made with its builders.

use ksim_testutils::builders::{NodeBuilder, PodBuilder, node, pod};

/// A node with `cpu` and 32Gi allocatable.
pub fn cpu_node(name: &str, cpu: &str) -> NodeBuilder {
    node(name).cpu(cpu).memory("32Gi")
}

/// A pod requesting `cpu`.
pub fn cpu_pod(name: &str, cpu: &str) -> PodBuilder {
    pod(name).image("pause").cpu(cpu)
}
