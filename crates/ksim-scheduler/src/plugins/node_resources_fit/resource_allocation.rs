//! What the resource scoring plugins share (upstream
//! `resourceAllocationScorer`): the pod's request and the node's allocatable
//! and requested amounts per scored resource.

use k8s_openapi::api::core::v1::Pod;
use ksim_core::resources::{
    PodResourcesOptions, RESOURCE_CPU, RESOURCE_EPHEMERAL_STORAGE, RESOURCE_MEMORY,
    is_scalar_resource, pod_requests,
};

use crate::framework::NodeInfo;

/// A scored resource and its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceSpec {
    pub name: String,
    pub weight: i64,
}

/// cpu and memory, weight 1 each (upstream default).
pub fn default_resources() -> Vec<ResourceSpec> {
    vec![
        ResourceSpec {
            name: RESOURCE_CPU.to_string(),
            weight: 1,
        },
        ResourceSpec {
            name: RESOURCE_MEMORY.to_string(),
            weight: 1,
        },
    ]
}

/// The pod's request of each resource: with the non-zero defaults for
/// containers that do not say, unless `use_requested`.
pub fn pod_request_list(pod: &Pod, resources: &[ResourceSpec], use_requested: bool) -> Vec<i64> {
    let options = if use_requested {
        PodResourcesOptions::default()
    } else {
        PodResourcesOptions::non_zero()
    };
    let requests = pod_requests(pod, &options);
    resources
        .iter()
        .map(|r| {
            let quantity = requests.get(&r.name).copied().unwrap_or_default();
            if r.name == RESOURCE_CPU {
                quantity.milli_value()
            } else {
                quantity.value()
            }
        })
        .collect()
}

/// (allocatable, requested including the pod) of one resource on a node;
/// (0, 0) means the resource is not scored on this node.
pub fn allocatable_and_requested(
    node: &NodeInfo,
    resource: &str,
    pod_request: i64,
    use_requested: bool,
) -> (i64, i64) {
    if pod_request == 0 && is_scalar_resource(resource) {
        return (0, 0);
    }
    let requested = if use_requested {
        &node.requested
    } else {
        &node.non_zero_requested
    };
    match resource {
        RESOURCE_CPU => (
            node.allocatable.milli_cpu,
            requested.milli_cpu.saturating_add(pod_request),
        ),
        RESOURCE_MEMORY => (
            node.allocatable.memory,
            requested.memory.saturating_add(pod_request),
        ),
        RESOURCE_EPHEMERAL_STORAGE => (
            node.allocatable.ephemeral_storage,
            node.requested.ephemeral_storage.saturating_add(pod_request),
        ),
        other => match node.allocatable.scalar_resources.get(other) {
            Some(allocatable) => (
                *allocatable,
                node.requested.get(other).saturating_add(pod_request),
            ),
            None => (0, 0),
        },
    }
}

/// Calls `visit(index, allocatable, requested)` for each scored resource the
/// node has (allocatable not zero), without allocating.
pub fn for_each_scored_resource(
    node: &NodeInfo,
    resources: &[ResourceSpec],
    pod_requests: &[i64],
    use_requested: bool,
    mut visit: impl FnMut(usize, i64, i64),
) {
    for (i, resource) in resources.iter().enumerate() {
        let (alloc, req) = allocatable_and_requested(
            node,
            &resource.name,
            pod_requests.get(i).copied().unwrap_or(0),
            use_requested,
        );
        if alloc != 0 {
            visit(i, alloc, req);
        }
    }
}

/// Per scored resource (allocatable, requested) on a node; zeros for
/// resources the node does not have.
pub fn node_amounts(
    node: &NodeInfo,
    resources: &[ResourceSpec],
    pod_requests: &[i64],
    use_requested: bool,
) -> (Vec<i64>, Vec<i64>) {
    let mut allocatable = vec![0; resources.len()];
    let mut requested = vec![0; resources.len()];
    for_each_scored_resource(
        node,
        resources,
        pod_requests,
        use_requested,
        |i, alloc, req| {
            allocatable[i] = alloc;
            requested[i] = req;
        },
    );
    (allocatable, requested)
}
