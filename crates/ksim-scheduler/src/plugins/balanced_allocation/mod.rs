//! NodeResourcesBalancedAllocation: prefers nodes whose resource
//! utilizations (with the pod) are close to each other: score is
//! `(1 - standard deviation of the fractions) * 100`.

use k8s_openapi::api::core::v1::Pod;

use super::node_resources_fit::{
    ResourceSpec, default_resources, for_each_scored_resource, pod_request_list,
};
use crate::framework::{
    CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, PreScorePlugin, ScorePlugin, Snapshot, Status,
};

/// The plugin name.
pub const NAME: &str = "NodeResourcesBalancedAllocation";
const PRE_SCORE_KEY: &str = "PreScoreNodeResourcesBalancedAllocation";

/// `NodeResourcesBalancedAllocationArgs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeResourcesBalancedAllocationArgs {
    pub resources: Vec<ResourceSpec>,
}

impl Default for NodeResourcesBalancedAllocationArgs {
    fn default() -> Self {
        NodeResourcesBalancedAllocationArgs {
            resources: default_resources(),
        }
    }
}

/// The plugin.
#[derive(Debug, Clone)]
pub struct BalancedAllocation {
    resources: Vec<ResourceSpec>,
}

impl BalancedAllocation {
    /// With these arguments.
    pub fn new(args: &NodeResourcesBalancedAllocationArgs) -> Self {
        BalancedAllocation {
            resources: args.resources.clone(),
        }
    }
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl PreScorePlugin for BalancedAllocation {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _nodes: &[&NodeInfo],
        _snapshot: &Snapshot,
    ) -> Status {
        let requests = pod_request_list(pod, &self.resources, true);
        if requests.iter().all(|r| *r == 0) {
            // Best-effort pods are not balanced (upstream issue 129138).
            return Status::skip();
        }
        state.write(PRE_SCORE_KEY, requests);
        Status::success()
    }
}

/// `(1 - std of the utilization fractions) * 100`, fractions capped at 1.
pub fn balanced_resource_score(requested: &[i64], allocatable: &[i64]) -> i64 {
    let fractions: Vec<f64> = requested
        .iter()
        .zip(allocatable)
        .filter(|(_, alloc)| **alloc != 0)
        .map(|(req, alloc)| (*req as f64 / *alloc as f64).min(1.0))
        .collect();
    fractions_score(&fractions)
}

/// `(1 - std of the fractions) * 100`.
fn fractions_score(fractions: &[f64]) -> i64 {
    let std = match fractions {
        [a, b] => ((a - b) / 2.0).abs(),
        f if f.len() > 2 => {
            let mean = f.iter().sum::<f64>() / f.len() as f64;
            (f.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / f.len() as f64).sqrt()
        }
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

impl ScorePlugin for BalancedAllocation {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let requests = state.read::<Vec<i64>>(PRE_SCORE_KEY).ok_or_else(|| {
            Status::error(format!(
                "reading {PRE_SCORE_KEY:?} from cycleState: not found"
            ))
        })?;
        let mut fractions = [0f64; 8];
        let mut count = 0;
        let mut overflow: Vec<f64> = Vec::new();
        for_each_scored_resource(node, &self.resources, requests, true, |_, alloc, req| {
            let fraction = (req as f64 / alloc as f64).min(1.0);
            if count < fractions.len() {
                fractions[count] = fraction;
            } else {
                overflow.push(fraction);
            }
            count += 1;
        });
        if overflow.is_empty() {
            Ok(fractions_score(&fractions[..count]))
        } else {
            let mut all = fractions.to_vec();
            all.extend(overflow);
            Ok(fractions_score(&all))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod, score_all};

    #[test]
    fn balanced_scores_as_upstream() {
        let plugin = BalancedAllocation::new(&NodeResourcesBalancedAllocationArgs::default());
        let cases = [
            (
                "best-effort pod skips",
                pod("p").obj(),
                vec![node("n1").cpu("4000m").memory("10000").obj()],
                vec![],
                None,
            ),
            (
                // n1: cpu 3000/4000=0.75, memory 5000/10000=0.5 -> std .125 -> 87
                // n2: cpu 3000/6000=0.5, memory 0.5 -> 100
                "differently sized nodes",
                pod("p").cpu("3000m").memory("5000").obj(),
                vec![
                    node("n1").cpu("4000m").memory("10000").obj(),
                    node("n2").cpu("6000m").memory("10000").obj(),
                ],
                vec![],
                Some(vec![87, 100]),
            ),
            (
                // n1 with existing 3000m/0: cpu 6000/10000=.6, memory 5000/20000=.25 -> std .175 -> 82
                "existing requests count",
                pod("p").cpu("3000m").memory("5000").obj(),
                vec![
                    node("n1").cpu("10000m").memory("20000").obj(),
                    node("n2").cpu("10000m").memory("20000").obj(),
                ],
                vec![pod("e").cpu("3000m").node("n1")],
                Some(vec![82, 97]),
            ),
            (
                "over capacity caps at one",
                pod("p").cpu("8000m").memory("5000").obj(),
                vec![node("n1").cpu("4000m").memory("10000").obj()],
                vec![],
                Some(vec![75]),
            ),
        ];
        for (name, pod, nodes, existing, expected) in cases {
            let snapshot = Snapshot::new(nodes, existing.into_iter().map(|p| p.obj()));
            assert_eq!(score_all(&plugin, &pod, &snapshot), expected, "{name}");
        }
        assert_eq!(balanced_resource_score(&[1, 1, 1], &[2, 2, 4]), 88);
    }
}
