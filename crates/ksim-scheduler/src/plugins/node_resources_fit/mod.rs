//! NodeResourcesFit: Filter rejects nodes without room for the pod's
//! requests (`pods` count, cpu, memory, ephemeral-storage, extended and
//! hugepages resources); Score by the scoring strategy (LeastAllocated by
//! default, MostAllocated, RequestedToCapacityRatio).

mod resource_allocation;

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use ksim_core::resources::{PodResourcesOptions, is_extended_resource, pod_requests};

pub use resource_allocation::{
    ResourceSpec, allocatable_and_requested, default_resources, for_each_scored_resource,
    node_amounts, pod_request_list,
};

use crate::framework::{
    CycleState, FilterPlugin, MAX_NODE_SCORE, NodeInfo, Plugin, PreFilterPlugin, PreFilterResult,
    PreScorePlugin, Resource, ScorePlugin, Snapshot, Status,
};

/// The plugin name.
pub const NAME: &str = "NodeResourcesFit";
const PRE_FILTER_KEY: &str = "PreFilterNodeResourcesFit";
const PRE_SCORE_KEY: &str = "PreScoreNodeResourcesFit";

/// How nodes are scored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ScoringStrategyType {
    /// Prefer the emptiest nodes.
    #[default]
    LeastAllocated,
    /// Prefer the fullest nodes (bin packing).
    MostAllocated,
    /// A piecewise-linear function of utilization: (utilization %, score 0..10) points.
    RequestedToCapacityRatio(Vec<(i64, i64)>),
}

/// `NodeResourcesFitArgs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeResourcesFitArgs {
    /// Extended resources not checked by Filter.
    pub ignored_resources: BTreeSet<String>,
    /// Extended resource groups (`example.com` of `example.com/gpu`) not checked.
    pub ignored_resource_groups: BTreeSet<String>,
    pub scoring_strategy: ScoringStrategyType,
    pub resources: Vec<ResourceSpec>,
}

impl Default for NodeResourcesFitArgs {
    fn default() -> Self {
        NodeResourcesFitArgs {
            ignored_resources: BTreeSet::new(),
            ignored_resource_groups: BTreeSet::new(),
            scoring_strategy: ScoringStrategyType::LeastAllocated,
            resources: default_resources(),
        }
    }
}

/// One resource the node lacks.
pub use ksim_core::resources::InsufficientResource;

/// The NodeResourcesFit plugin.
#[derive(Debug, Clone)]
pub struct Fit {
    args: NodeResourcesFitArgs,
}

impl Fit {
    /// With these arguments.
    pub fn new(args: &NodeResourcesFitArgs) -> Self {
        Fit { args: args.clone() }
    }

    fn ignored(&self, name: &str) -> bool {
        if !is_extended_resource(name) {
            return false;
        }
        let group = name.split('/').next().unwrap_or_default();
        self.args.ignored_resources.contains(name)
            || self.args.ignored_resource_groups.contains(group)
    }

    /// What the node lacks for a pod requesting `request` (upstream `fitsRequest`).
    pub fn insufficient_resources(
        &self,
        request: &Resource,
        node: &NodeInfo,
    ) -> Vec<InsufficientResource> {
        let pods = i64::try_from(node.pods.len()).unwrap_or(i64::MAX);
        ksim_core::resources::insufficient_resources(
            request,
            &node.allocatable,
            &node.requested,
            pods,
            |name| self.ignored(name),
        )
    }
}

impl Plugin for Fit {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for Fit {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let request = Resource::from_list(&pod_requests(pod, &PodResourcesOptions::default()));
        state.write(PRE_FILTER_KEY, request);
        (None, Status::success())
    }
}

impl FilterPlugin for Fit {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(request) = state.read::<Resource>(PRE_FILTER_KEY) else {
            return Status::error(format!(
                "reading {PRE_FILTER_KEY:?} from cycleState: not found"
            ));
        };
        let insufficient = self.insufficient_resources(request, node);
        if insufficient.is_empty() {
            return Status::success();
        }
        let code = if insufficient.iter().any(|r| r.unresolvable) {
            crate::framework::Code::UnschedulableAndUnresolvable
        } else {
            crate::framework::Code::Unschedulable
        };
        Status::new(code, insufficient.into_iter().map(|r| r.reason))
    }
}

impl PreScorePlugin for Fit {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _nodes: &[&NodeInfo],
        _snapshot: &Snapshot,
    ) -> Status {
        state.write(
            PRE_SCORE_KEY,
            pod_request_list(pod, &self.args.resources, false),
        );
        Status::success()
    }
}

impl ScorePlugin for Fit {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let requests = state.read::<Vec<i64>>(PRE_SCORE_KEY).ok_or_else(|| {
            Status::error(format!(
                "reading {PRE_SCORE_KEY:?} from cycleState: not found"
            ))
        })?;
        let resources = &self.args.resources;
        let weighted = |score: &dyn Fn(i64, i64) -> i64| {
            let (mut node_score, mut weight_sum) = (0i64, 0i64);
            for_each_scored_resource(node, resources, requests, false, |i, alloc, req| {
                let weight = resources[i].weight;
                node_score = node_score.saturating_add(score(req, alloc).saturating_mul(weight));
                weight_sum = weight_sum.saturating_add(weight);
            });
            if weight_sum == 0 {
                0
            } else {
                node_score / weight_sum
            }
        };
        Ok(match &self.args.scoring_strategy {
            ScoringStrategyType::LeastAllocated => weighted(&least_requested_score),
            ScoringStrategyType::MostAllocated => weighted(&most_requested_score),
            ScoringStrategyType::RequestedToCapacityRatio(shape) => {
                let scaled: Vec<(i64, i64)> = shape
                    .iter()
                    .map(|(utilization, score)| (*utilization, score * (MAX_NODE_SCORE / 10)))
                    .collect();
                weighted(&|req, cap| broken_linear(&scaled, utilization_percent(req, cap)))
            }
        })
    }
}

/// `(capacity - requested) * 100 / capacity`, 0 when over capacity.
pub fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity <= 0 || requested > capacity {
        return 0;
    }
    scale(i128::from(capacity) - i128::from(requested), capacity)
}

/// `requested * 100 / capacity`, capped at capacity.
pub fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity <= 0 {
        return 0;
    }
    scale(i128::from(requested.min(capacity)), capacity)
}

/// `amount * 100 / capacity` in 0..=100, without overflow.
fn scale(amount: i128, capacity: i64) -> i64 {
    let score = amount * i128::from(MAX_NODE_SCORE) / i128::from(capacity);
    i64::try_from(score.clamp(0, i128::from(MAX_NODE_SCORE))).unwrap_or(0)
}

/// Utilization in percent (0 when there is no capacity).
fn utilization_percent(requested: i64, capacity: i64) -> i64 {
    if capacity <= 0 {
        return 0;
    }
    i64::try_from(i128::from(requested) * 100 / i128::from(capacity)).unwrap_or(i64::MAX)
}

/// A piecewise-linear function through `shape` points, flat outside them.
fn broken_linear(shape: &[(i64, i64)], x: i64) -> i64 {
    let Some(first) = shape.first() else {
        return 0;
    };
    if x <= first.0 {
        return first.1;
    }
    for pair in shape.windows(2) {
        let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
        if x <= x1 {
            if x1 == x0 {
                return y1;
            }
            let y = i128::from(y0)
                + (i128::from(y1) - i128::from(y0)) * (i128::from(x) - i128::from(x0))
                    / (i128::from(x1) - i128::from(x0));
            return i64::try_from(y).unwrap_or(0);
        }
    }
    shape.last().map(|p| p.1).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::testing::{filter_all, messages, node, pod, score_all};

    fn fit() -> Fit {
        Fit::new(&NodeResourcesFitArgs::default())
    }

    #[test]
    fn filter_reports_every_insufficient_resource() {
        // Node: 10 cpu, 20 memory, 32 pods; existing pod uses 5 cpu 19 memory.
        let capacity = || {
            node("n")
                .cpu("10m")
                .memory("20")
                .pods("32")
                .capacity("example.com/gpu", "2")
                .capacity("hugepages-2Mi", "4")
        };
        let existing = || pod("e").cpu("5m").memory("19").node("n");
        let cases = [
            (
                "no requests fit",
                pod("p").obj(),
                vec![existing()],
                vec![""],
                Code::Success,
            ),
            (
                "fits",
                pod("p").cpu("5m").memory("1").obj(),
                vec![existing()],
                vec![""],
                Code::Success,
            ),
            (
                "too much cpu",
                pod("p").cpu("6m").memory("1").obj(),
                vec![existing()],
                vec!["Insufficient cpu"],
                Code::Unschedulable,
            ),
            (
                "too much memory",
                pod("p").cpu("1m").memory("2").obj(),
                vec![existing()],
                vec!["Insufficient memory"],
                Code::Unschedulable,
            ),
            (
                "both",
                pod("p").cpu("6m").memory("2").obj(),
                vec![existing()],
                vec!["Insufficient cpu, Insufficient memory"],
                Code::Unschedulable,
            ),
            (
                "more than capacity is unresolvable",
                pod("p").cpu("11m").obj(),
                vec![],
                vec!["Insufficient cpu"],
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "extended resource",
                pod("p").request("example.com/gpu", "3").obj(),
                vec![],
                vec!["Insufficient example.com/gpu"],
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "extended resource fits",
                pod("p").request("example.com/gpu", "2").obj(),
                vec![],
                vec![""],
                Code::Success,
            ),
            (
                "unknown extended resource",
                pod("p").request("example.com/fpga", "1").obj(),
                vec![],
                vec!["Insufficient example.com/fpga"],
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "hugepages",
                pod("p").request("hugepages-2Mi", "5").obj(),
                vec![],
                vec!["Insufficient hugepages-2Mi"],
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "ephemeral storage",
                pod("p").request("ephemeral-storage", "1").obj(),
                vec![],
                vec!["Insufficient ephemeral-storage"],
                Code::UnschedulableAndUnresolvable,
            ),
        ];
        for (name, pod, existing, expected, code) in cases {
            let snapshot = Snapshot::new([capacity().obj()], existing.into_iter().map(|p| p.obj()));
            let statuses = filter_all(&fit(), &pod, &snapshot);
            assert_eq!(messages(&statuses), expected, "{name}");
            assert_eq!(statuses[0].code(), code, "{name}");
        }
    }

    #[test]
    fn filter_counts_init_containers_sidecars_and_overhead() {
        // Node 10m cpu, 5m used.
        let snapshot = Snapshot::new(
            [node("n").cpu("10m").pods("32").obj()],
            [pod("e").cpu("5m").node("n").obj()],
        );
        let cases = [
            (
                "init container within room",
                pod("p").cpu("1m").init_container("5m", false).obj(),
                "",
            ),
            (
                "init container too big",
                pod("p").cpu("1m").init_container("6m", false).obj(),
                "Insufficient cpu",
            ),
            (
                "init containers take the max, not the sum",
                pod("p")
                    .init_container("3m", false)
                    .init_container("4m", false)
                    .obj(),
                "",
            ),
            (
                "sidecar adds to containers",
                pod("p").cpu("3m").init_container("3m", true).obj(),
                "Insufficient cpu",
            ),
            (
                "init after sidecar runs beside it",
                pod("p")
                    .cpu("1m")
                    .init_container("2m", true)
                    .init_container("4m", false)
                    .obj(),
                "Insufficient cpu",
            ),
            (
                "overhead counts",
                pod("p").cpu("4m").overhead("cpu", "2m").obj(),
                "Insufficient cpu",
            ),
            (
                "overhead within room",
                pod("p").cpu("3m").overhead("cpu", "2m").obj(),
                "",
            ),
        ];
        for (name, pod, expected) in cases {
            assert_eq!(
                messages(&filter_all(&fit(), &pod, &snapshot)),
                [expected],
                "{name}"
            );
        }
    }

    #[test]
    fn filter_counts_pods_against_the_pods_capacity() {
        let snapshot = Snapshot::new(
            [node("n").cpu("10").pods("1").obj()],
            [pod("e").node("n").obj()],
        );
        assert_eq!(
            messages(&filter_all(&fit(), &pod("p").obj(), &snapshot)),
            ["Too many pods"]
        );
        assert_eq!(
            messages(&filter_all(&fit(), &pod("p").cpu("20").obj(), &snapshot)),
            ["Too many pods, Insufficient cpu"]
        );
    }

    #[test]
    fn ignored_extended_resources_are_not_checked() {
        let args = NodeResourcesFitArgs {
            ignored_resource_groups: BTreeSet::from(["example.com".to_string()]),
            ..Default::default()
        };
        let snapshot = Snapshot::new([node("n").obj()], []);
        let p = pod("p").request("example.com/gpu", "1").obj();
        assert_eq!(messages(&filter_all(&Fit::new(&args), &p, &snapshot)), [""]);
    }

    #[test]
    fn least_allocated_scores_as_upstream() {
        // Upstream table: node1 4000m/10000 memory, node2 6000m/10000; existing pods.
        let cases = [
            (
                "nothing scheduled, nothing requested: defaults count",
                pod("p").obj(),
                vec![
                    node("n1").cpu("4000m").memory("10000").obj(),
                    node("n2").cpu("4000m").memory("10000").obj(),
                ],
                vec![],
                // cpu (4000-100)*100/4000 = 97, memory request 200Mi > 10000 -> 0 => (97+0)/2 = 48
                vec![48, 48],
            ),
            (
                "differently sized nodes",
                pod("p").cpu("3000m").memory("5000").obj(),
                vec![
                    node("n1").cpu("4000m").memory("10000").obj(),
                    node("n2").cpu("6000m").memory("10000").obj(),
                ],
                vec![],
                // n1: cpu 25, memory 50 => 37; n2: cpu 50, memory 50 => 50
                vec![37, 50],
            ),
            (
                "existing requests count",
                pod("p").cpu("1000m").memory("2000").obj(),
                vec![
                    node("n1").cpu("10000m").memory("20000").obj(),
                    node("n2").cpu("10000m").memory("20000").obj(),
                ],
                vec![pod("e1").cpu("3000m").memory("5000").node("n2")],
                // n1: cpu 90, memory 90 => 90; n2: cpu 60, memory 65 => 62
                vec![90, 62],
            ),
        ];
        for (name, pod, nodes, existing, expected) in cases {
            let snapshot = Snapshot::new(nodes, existing.into_iter().map(|p| p.obj()));
            assert_eq!(score_all(&fit(), &pod, &snapshot), Some(expected), "{name}");
        }
    }

    #[test]
    fn most_allocated_and_ratio_strategies() {
        let nodes = || {
            vec![
                node("n1").cpu("4000m").memory("10000").obj(),
                node("n2").cpu("6000m").memory("10000").obj(),
            ]
        };
        let p = pod("p").cpu("3000m").memory("5000").obj();
        let most = Fit::new(&NodeResourcesFitArgs {
            scoring_strategy: ScoringStrategyType::MostAllocated,
            ..Default::default()
        });
        // n1: cpu 75, memory 50 => 62; n2: cpu 50, memory 50 => 50
        assert_eq!(
            score_all(&most, &p, &Snapshot::new(nodes(), [])),
            Some(vec![62, 50])
        );
        let ratio = Fit::new(&NodeResourcesFitArgs {
            scoring_strategy: ScoringStrategyType::RequestedToCapacityRatio(vec![
                (0, 0),
                (100, 10),
            ]),
            ..Default::default()
        });
        assert_eq!(
            score_all(&ratio, &p, &Snapshot::new(nodes(), [])),
            Some(vec![62, 50])
        );
        assert_eq!(broken_linear(&[(0, 100), (100, 0)], 25), 75);
        assert_eq!(broken_linear(&[], 25), 0);
    }
}
