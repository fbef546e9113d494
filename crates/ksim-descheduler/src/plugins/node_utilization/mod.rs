//! What LowNodeUtilization and HighNodeUtilization share (upstream's
//! `nodeutilization` package): node usage from pod requests, usage as
//! percentages of allocatable, static and deviation thresholds, node
//! classification, and the eviction loop that moves pods from source nodes
//! while the destination nodes have room.
//!
//! Order: upstream classifies nodes through Go maps and sorts them by usage
//! with an unstable sort, so nodes of equal usage are drained in a random
//! order; here they keep listing order (a stable sort). Pods of a source
//! node go in [`crate::nodeutil::compare_pods_for_eviction`] order, pods
//! asking not to be evicted (`descheduler.alpha.kubernetes.io/prefer-no-eviction`)
//! after their equals, whatever the noEvictionPolicy.
//!
//! Amounts are kept as `i64` in upstream's units (milli-cpu, whole units of
//! everything else), one slot per resource name, so a cycle over thousands
//! of nodes allocates one vector per node.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use ksim_core::resources::{RESOURCE_CPU, RESOURCE_MEMORY, RESOURCE_PODS};
use ksim_core::toleration::tolerations_tolerate_taint;

use crate::framework::{ArgsError, ClusterSnapshot, EvictionError, EvictionRequest, PodEvictor};
use crate::nodeutil::{
    active_pods_on_node, node_allocatable, node_taints, resource_amount,
    sort_pods_by_priority_low_to_high,
};

/// The lowest percentage a threshold may have.
pub const MIN_RESOURCE_PERCENTAGE: f64 = 0.0;
/// The highest percentage a threshold may have.
pub const MAX_RESOURCE_PERCENTAGE: f64 = 100.0;

/// Percentages by resource name (upstream `api.ResourceThresholds`).
pub type ResourceThresholds = BTreeMap<String, f64>;

/// Upstream `validateThresholds`: at least one resource, each in [0, 100].
pub fn validate_thresholds(field: &str, thresholds: &ResourceThresholds) -> Result<(), ArgsError> {
    if thresholds.is_empty() {
        return Err(ArgsError::new(field, "no resource threshold is configured"));
    }
    for (name, percent) in thresholds {
        if !(MIN_RESOURCE_PERCENTAGE..=MAX_RESOURCE_PERCENTAGE).contains(percent) {
            return Err(ArgsError::new(
                format!("{field}.{name}"),
                format!("{name} threshold not in [0, 100] range"),
            ));
        }
    }
    Ok(())
}

/// The resource names a plugin tracks: those with a threshold, plus cpu,
/// memory and pods (upstream `uniquifyResourceNames`), sorted.
pub fn tracked_resource_names(thresholds: &ResourceThresholds) -> Vec<String> {
    let mut names: Vec<String> = [RESOURCE_CPU, RESOURCE_MEMORY, RESOURCE_PODS]
        .iter()
        .map(|name| name.to_string())
        .chain(thresholds.keys().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// One node's usage, as the plugins see it at the start of their run.
#[derive(Debug)]
pub struct NodeUsage<'a> {
    /// The node.
    pub node: &'a Node,
    /// Its name.
    pub name: &'a str,
    /// What its non-terminal pods request, per tracked resource.
    pub usage: Vec<i64>,
    /// Its allocatable (or capacity) per tracked resource; None when the
    /// node does not report the resource.
    pub capacity: Vec<Option<i64>>,
    /// Its non-terminal pods, in listing order.
    pub pods: Vec<&'a Pod>,
}

impl NodeUsage<'_> {
    /// Usage as percentages of capacity (upstream
    /// `ResourceUsageToResourceThreshold`): None for a resource the node
    /// does not report, 0 for a zero capacity.
    pub fn percentages(&self) -> Vec<Option<f64>> {
        self.usage
            .iter()
            .zip(&self.capacity)
            .map(|(&used, capacity)| {
                capacity.map(|capacity| {
                    if capacity > 0 {
                        used as f64 / capacity as f64 * 100.0
                    } else {
                        0.0
                    }
                })
            })
            .collect()
    }

    /// The sum upstream sorts nodes by: milli-cpu plus whole units of the rest.
    pub fn usage_sum(&self) -> i64 {
        self.usage
            .iter()
            .fold(0i64, |sum, v| sum.saturating_add(*v))
    }
}

/// Computes every node's usage of `resource_names`.
pub fn node_usages<'a>(
    snapshot: &'a ClusterSnapshot,
    nodes: &[&'a Node],
    resource_names: &[String],
) -> Vec<NodeUsage<'a>> {
    nodes
        .iter()
        .map(|node| {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let pods: Vec<&Pod> = active_pods_on_node(snapshot, name).collect();
            let usage =
                crate::nodeutil::node_utilization(snapshot, pods.iter().copied(), resource_names);
            let allocatable = node_allocatable(node);
            let capacity = resource_names
                .iter()
                .map(|resource| {
                    allocatable
                        .get(resource)
                        .map(|quantity| resource_amount(resource, *quantity))
                })
                .collect();
            NodeUsage {
                node,
                name,
                usage,
                capacity,
                pods,
            }
        })
        .collect()
}

/// Thresholds aligned with the tracked resource names: None where no
/// threshold applies.
pub type Thresholds = Vec<Option<f64>>;

/// Aligns user thresholds with `resource_names`.
pub fn align_thresholds(resource_names: &[String], thresholds: &ResourceThresholds) -> Thresholds {
    resource_names
        .iter()
        .map(|name| thresholds.get(name).copied())
        .collect()
}

/// Upstream's deviation thresholds: the average usage percentage of each
/// thresholded resource over the nodes that report it, minus `low` and
/// plus `high`, clamped to [0, 100].
pub fn deviation_thresholds(
    resource_names: &[String],
    percentages: &[Vec<Option<f64>>],
    low: &ResourceThresholds,
    high: &ResourceThresholds,
) -> (Thresholds, Thresholds) {
    let mut lower = vec![None; resource_names.len()];
    let mut upper = vec![None; resource_names.len()];
    for (index, name) in resource_names.iter().enumerate() {
        if !low.contains_key(name) {
            continue;
        }
        let (sum, count) = percentages
            .iter()
            .filter_map(|node| node[index])
            .fold((0.0, 0usize), |(sum, count), v| (sum + v, count + 1));
        if count == 0 {
            continue;
        }
        let average = sum / count as f64;
        let clamp = |v: f64| v.clamp(MIN_RESOURCE_PERCENTAGE, MAX_RESOURCE_PERCENTAGE);
        lower[index] = Some(clamp(average - low.get(name).copied().unwrap_or(0.0)));
        upper[index] = Some(clamp(average + high.get(name).copied().unwrap_or(0.0)));
        tracing::debug!(resource = %name, average, "Assessed average usage");
    }
    (lower, upper)
}

/// Upstream `isNodeBelowThreshold`: every thresholded resource at or
/// under its threshold (a resource the node does not report counts as 0%).
pub fn is_below_threshold(percentages: &[Option<f64>], threshold: &Thresholds) -> bool {
    percentages
        .iter()
        .zip(threshold)
        .all(|(usage, limit)| limit.is_none_or(|limit| usage.unwrap_or(0.0) <= limit))
}

/// Upstream `isNodeAboveThreshold`: some thresholded resource above it.
pub fn is_above_threshold(percentages: &[Option<f64>], threshold: &Thresholds) -> bool {
    percentages
        .iter()
        .zip(threshold)
        .any(|(usage, limit)| limit.is_some_and(|limit| usage.unwrap_or(0.0) > limit))
}

/// Whether the underutilized nodes warrant a pass, as both utilization
/// plugins check (logging why not): some exist, more than `numberOfNodes`,
/// and not every node is one.
pub fn enough_underutilized_nodes(underutilized: usize, all: usize, number_of_nodes: i64) -> bool {
    if underutilized == 0 {
        tracing::debug!(
            "No node is underutilized, nothing to do here, you might tune your thresholds further"
        );
        return false;
    }
    if i64::try_from(underutilized).unwrap_or(i64::MAX) <= number_of_nodes {
        tracing::debug!(
            underutilized_nodes = underutilized,
            number_of_nodes,
            "Number of nodes underutilized is less or equal than NumberOfNodes, nothing to do here"
        );
        return false;
    }
    if underutilized == all {
        tracing::debug!("All nodes are underutilized, nothing to do here");
        return false;
    }
    true
}

/// Upstream `capNodeCapacitiesToThreshold`: per tracked resource, the
/// node's capacity (0 if it does not report it) capped to the threshold
/// percentage when one is set.
pub fn cap_capacity_to_threshold(node: &NodeUsage<'_>, threshold: &Thresholds) -> Vec<i64> {
    node.capacity
        .iter()
        .zip(threshold)
        .map(|(capacity, limit)| match (capacity, limit) {
            (None, _) => 0,
            (Some(capacity), None) => *capacity,
            (Some(capacity), Some(limit)) => (limit * 0.01 * *capacity as f64) as i64,
        })
        .collect()
}

/// A classified node: its usage and the amount it may hold (upstream
/// `NodeInfo`).
#[derive(Debug)]
pub struct NodeInfo<'u, 'a> {
    /// The node's usage (updated as pods are evicted from it).
    pub usage: &'u NodeUsage<'a>,
    /// What it currently requests, per tracked resource.
    pub current: Vec<i64>,
    /// What it may hold, per tracked resource.
    pub available: Vec<i64>,
}

/// Sorts nodes by their usage sum, descending (LowNodeUtilization) or
/// ascending (HighNodeUtilization); equal nodes keep their order.
pub fn sort_nodes_by_usage(nodes: &mut [NodeInfo<'_, '_>], ascending: bool) {
    if ascending {
        nodes.sort_by_key(|node| node.usage.usage_sum());
    } else {
        nodes.sort_by_key(|node| std::cmp::Reverse(node.usage.usage_sum()));
    }
}

/// Whether to go on evicting from `node` given the room left on the
/// destination nodes.
pub type ContinueEviction<'f> = &'f dyn Fn(&NodeInfo<'_, '_>, &[i64]) -> bool;

/// Everything [`evict_pods_from_source_nodes`] needs besides the nodes.
pub struct EvictionPass<'f> {
    /// The cycle's snapshot (the pods' requests are cached there).
    pub snapshot: &'f ClusterSnapshot,
    /// The plugin's name (logged as `strategy`).
    pub strategy: &'static str,
    /// The tracked resource names.
    pub resource_names: &'f [String],
    /// Which pods are removable (the evictor's filter and plugin filters).
    pub pod_filter: &'f dyn Fn(&dyn PodEvictor, &Pod) -> bool,
    /// Namespaces whose pods are never evicted (`evictableNamespaces.exclude`).
    pub excluded_namespaces: &'f [String],
    /// The stop condition.
    pub continue_eviction: ContinueEviction<'f>,
    /// At most this many evictions per source node (`evictionLimits.node`).
    pub max_per_node: Option<u32>,
}

/// Upstream `evictPodsFromSourceNodes`: the room on the destination nodes
/// (their available amounts minus their usage, summed), then for each
/// source node in order its removable pods from lowest priority and QoS
/// up, evicting those that tolerate some destination's taints and pass the
/// preEvictionFilter, until the stop condition says so.
pub fn evict_pods_from_source_nodes(
    sources: &mut [NodeInfo<'_, '_>],
    destinations: &[NodeInfo<'_, '_>],
    evictor: &mut dyn PodEvictor,
    pass: &EvictionPass<'_>,
) {
    let mut total_available = vec![0i64; pass.resource_names.len()];
    for destination in destinations {
        for (slot, (available, used)) in total_available
            .iter_mut()
            .zip(destination.available.iter().zip(&destination.current))
        {
            *slot += available - used;
        }
    }
    tracing::debug!(
        strategy = pass.strategy,
        available = ?pass.resource_names.iter().zip(&total_available).collect::<Vec<_>>(),
        "Total capacity to be moved"
    );
    let mut destination_taints: Vec<&[Taint]> = Vec::new();
    for destination in destinations {
        let taints = node_taints(destination.usage.node);
        if !destination_taints.contains(&taints) {
            destination_taints.push(taints);
        }
    }
    for source in sources.iter_mut() {
        let mut removable: Vec<&Pod> = source
            .usage
            .pods
            .iter()
            .copied()
            .filter(|pod| (pass.pod_filter)(&*evictor, pod))
            .collect();
        tracing::debug!(
            node = source.usage.name,
            all_pods = source.usage.pods.len(),
            non_removable_pods = source.usage.pods.len() - removable.len(),
            removable_pods = removable.len(),
            "Pods on node"
        );
        if removable.is_empty() {
            tracing::debug!(
                node = source.usage.name,
                "No removable pods on node, try next node"
            );
            continue;
        }
        sort_pods_by_priority_low_to_high(&mut removable);
        let result = evict_pods(
            &removable,
            source,
            &mut total_available,
            &destination_taints,
            evictor,
            pass,
        );
        if result == Err(EvictionError::TotalLimitReached) {
            return;
        }
    }
}

/// Upstream `evictPods` for one source node.
fn evict_pods(
    pods: &[&Pod],
    node: &mut NodeInfo<'_, '_>,
    total_available: &mut [i64],
    destination_taints: &[&[Taint]],
    evictor: &mut dyn PodEvictor,
    pass: &EvictionPass<'_>,
) -> Result<(), EvictionError> {
    if !(pass.continue_eviction)(node, total_available) {
        return Ok(());
    }
    let mut evicted = 0u32;
    for pod in pods {
        if pass.max_per_node.is_some_and(|max| evicted >= max) {
            tracing::debug!(
                limit = pass.max_per_node,
                "Max number of evictions per node per plugin reached"
            );
            break;
        }
        if !pod_tolerates_some_taints(pod, destination_taints) {
            tracing::debug!(
                pod = %crate::podutil::pod_key(pod),
                "Skipping eviction for pod, doesn't tolerate node taint"
            );
            continue;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        if pass.excluded_namespaces.iter().any(|ns| ns == namespace)
            || !evictor.pre_eviction_filter(pod)
        {
            continue;
        }
        let request = EvictionRequest {
            strategy: pass.strategy,
            reason: "",
        };
        match evictor.evict(pod, request) {
            Ok(()) => {}
            Err(error @ (EvictionError::NodeLimitReached | EvictionError::TotalLimitReached)) => {
                return Err(error);
            }
            Err(error) => {
                tracing::warn!(pod = %crate::podutil::pod_key(pod), error = %error, "eviction failed");
                continue;
            }
        }
        evicted += 1;
        let requests = pass.snapshot.pod_requests(pod);
        for (index, name) in pass.resource_names.iter().enumerate() {
            let amount = if name == RESOURCE_PODS {
                1
            } else {
                requests
                    .get(name)
                    .map_or(0, |quantity| resource_amount(name, *quantity))
            };
            node.current[index] -= amount;
            total_available[index] -= amount;
        }
        tracing::debug!(node = node.usage.name, usage = ?node.current, "Updated node usage");
        if !(pass.continue_eviction)(node, total_available) {
            break;
        }
    }
    Ok(())
}

/// Upstream `PodToleratesTaints`: the pod tolerates every taint (of any
/// effect) of at least one destination node, and has at least as many
/// tolerations as that node has taints.
fn pod_tolerates_some_taints(pod: &Pod, taint_sets: &[&[Taint]]) -> bool {
    let tolerations = ksim_core::toleration::pod_tolerations(pod);
    taint_sets.iter().any(|taints| {
        tolerations.len() >= taints.len()
            && taints
                .iter()
                .all(|taint| tolerations_tolerate_taint(tolerations, taint))
    })
}

/// A pod filter that keeps pods requesting any of `names` in a container
/// or init container (upstream `withResourceRequestForAny`).
pub fn requests_any_of(pod: &Pod, names: &[String]) -> bool {
    pod.spec.as_ref().is_some_and(|spec| {
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .any(|container| {
                container
                    .resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .is_some_and(|requests| names.iter().any(|name| requests.contains_key(name)))
            })
    })
}

/// Upstream's log line for a classified node.
pub fn log_classified(category: &str, node: &NodeUsage<'_>, resource_names: &[String]) {
    tracing::info!(
        category,
        node = node.name,
        usage = ?usage_fields(resource_names, &node.usage),
        usage_percentage = ?rounded_percentages(resource_names, &node.percentages()),
        "Node has been classified"
    );
}

/// `name=value` pairs for logs.
pub fn usage_fields<'n>(resource_names: &'n [String], values: &[i64]) -> Vec<(&'n str, i64)> {
    resource_names
        .iter()
        .map(String::as_str)
        .zip(values.iter().copied())
        .collect()
}

/// Rounded percentages for logs (upstream `normalizer.Round`).
pub fn rounded_percentages<'n>(
    resource_names: &'n [String],
    percentages: &[Option<f64>],
) -> Vec<(&'n str, f64)> {
    resource_names
        .iter()
        .zip(percentages)
        .filter_map(|(name, percent)| percent.map(|p| (name.as_str(), p.round())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodeutil::testing::{node, pod, snapshot};
    use serde_json::json;

    #[test]
    fn thresholds_out_of_range_are_named_by_resource() {
        let thresholds = ResourceThresholds::from([("cpu".to_string(), 120.0)]);
        let error = validate_thresholds("thresholds", &thresholds).expect_err("120 > 100");
        assert_eq!(error.field, "thresholds.cpu");
        assert_eq!(error.message, "cpu threshold not in [0, 100] range");
        let error = validate_thresholds("thresholds", &ResourceThresholds::new())
            .expect_err("empty thresholds");
        assert_eq!(error.message, "no resource threshold is configured");
    }

    #[test]
    fn usage_counts_requests_of_non_terminal_pods_and_the_pods_themselves() {
        let snapshot = snapshot(
            vec![node("n1", "4", "8Gi", "10", json!({}))],
            vec![
                pod("ns", "a", "n1", "1", "1Gi", json!({})),
                pod("ns", "b", "n1", "500m", "", json!({})),
                pod(
                    "ns",
                    "done",
                    "n1",
                    "2",
                    "",
                    json!({"status": {"phase": "Succeeded"}}),
                ),
            ],
        );
        let names = tracked_resource_names(&ResourceThresholds::new());
        assert_eq!(names, ["cpu", "memory", "pods"]);
        let nodes: Vec<&Node> = snapshot.nodes().iter().collect();
        let usages = node_usages(&snapshot, &nodes, &names);
        assert_eq!(usages[0].usage, [1500, 1 << 30, 2]);
        assert_eq!(usages[0].capacity, [Some(4000), Some(8 << 30), Some(10)]);
        let percentages = usages[0].percentages();
        assert_eq!(percentages[0], Some(37.5));
        assert_eq!(percentages[2], Some(20.0));
    }

    #[test]
    fn below_means_every_resource_at_or_under_and_above_means_any_over() {
        let threshold = vec![Some(20.0), None, Some(30.0)];
        assert!(is_below_threshold(
            &[Some(20.0), Some(90.0), Some(10.0)],
            &threshold
        ));
        assert!(!is_below_threshold(
            &[Some(20.0), Some(0.0), Some(31.0)],
            &threshold
        ));
        assert!(is_above_threshold(&[Some(21.0), None, None], &threshold));
        assert!(!is_above_threshold(
            &[Some(20.0), Some(99.0), Some(30.0)],
            &threshold
        ));
    }

    #[test]
    fn deviation_thresholds_are_the_average_plus_or_minus_the_span() {
        let names = vec!["cpu".to_string(), "memory".to_string()];
        let percentages = vec![vec![Some(10.0), Some(50.0)], vec![Some(30.0), None]];
        let low = ResourceThresholds::from([("cpu".to_string(), 15.0)]);
        let high = ResourceThresholds::from([("cpu".to_string(), 5.0)]);
        let (lower, upper) = deviation_thresholds(&names, &percentages, &low, &high);
        assert_eq!(lower, [Some(5.0), None]);
        assert_eq!(upper, [Some(25.0), None]);
    }

    #[test]
    fn a_pod_must_tolerate_all_taints_of_one_destination() {
        let taint: Taint = serde_json::from_value(
            json!({"key": "dedicated", "value": "x", "effect": "PreferNoSchedule"}),
        )
        .expect("taint");
        let plain = pod("ns", "p", "n", "", "", json!({}));
        let tolerant = pod(
            "ns",
            "t",
            "n",
            "",
            "",
            json!({"spec": {"tolerations": [{"key": "dedicated", "operator": "Exists"}]}}),
        );
        let tainted = [taint];
        assert!(!pod_tolerates_some_taints(&plain, &[&tainted]));
        assert!(pod_tolerates_some_taints(&tolerant, &[&tainted]));
        assert!(pod_tolerates_some_taints(&plain, &[&tainted, &[]]));
    }
}
