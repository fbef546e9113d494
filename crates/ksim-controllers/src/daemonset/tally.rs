//! One node's part of a DaemonSet's sync, as pure functions: what the
//! node's daemon pods need (a creation, deletions, an outdated pod to
//! replace) and what they add to the status counts. A full sync adds up
//! every node; a sync after pod or node events re-plans only the nodes
//! they touched and adjusts the kept totals ([`Tally`]).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;

use super::placement::NodeFit;
use crate::common::{is_pod_ready, pod_phase};

/// What one node adds to the set's status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct NodeCount {
    pub(crate) desired: bool,
    pub(crate) scheduled: bool,
    pub(crate) ready: bool,
    pub(crate) available: bool,
    pub(crate) updated: bool,
    pub(crate) misscheduled: bool,
}

impl NodeCount {
    /// A desired node whose kept pod runs an old template.
    pub(crate) fn is_outdated(&self) -> bool {
        self.scheduled && !self.updated
    }

    /// A desired node without an available pod.
    pub(crate) fn unavailable(&self) -> bool {
        self.desired && !self.available
    }
}

/// What one node's daemon pods need.
#[derive(Debug, Default)]
pub(crate) struct NodePlan<'a> {
    pub(crate) count: NodeCount,
    /// A pod should be created there.
    pub(crate) create: bool,
    /// Pods to delete (failed, surplus, misplaced).
    pub(crate) delete: Vec<&'a Pod>,
    /// The kept pod when it runs an old template, and whether available.
    pub(crate) outdated: Option<(&'a Pod, bool)>,
}

/// The creation order of pods (oldest first, then by name).
fn oldest_first(a: &&Pod, b: &&Pod) -> std::cmp::Ordering {
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    created(a)
        .cmp(&created(b))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// Plans one node (`podsShouldBeOnNode`): `fit` is `None` for a node that
/// no longer exists; `daemons` are the set's pods meant for it.
pub(crate) fn plan_node<'a>(
    fit: Option<NodeFit>,
    mut daemons: Vec<&'a Pod>,
    updated: impl Fn(&Pod) -> bool,
    available: impl Fn(&Pod) -> bool,
) -> NodePlan<'a> {
    let mut plan = NodePlan::default();
    daemons.sort_by(oldest_first);
    let (terminating, live): (Vec<&Pod>, Vec<&Pod>) = daemons
        .into_iter()
        .partition(|p| p.metadata.deletion_timestamp.is_some());
    let Some(fit) = fit else {
        // The node is gone: so are its pods.
        plan.delete = live;
        return plan;
    };
    if fit.should_run {
        plan.count.desired = true;
        let (failed, running): (Vec<&Pod>, Vec<&Pod>) =
            live.into_iter().partition(|p| pod_phase(p) == "Failed");
        plan.delete.extend(failed);
        match running.split_first() {
            None => plan.create = terminating.is_empty(),
            Some((kept, surplus)) => {
                plan.delete.extend(surplus.iter().copied());
                plan.count.scheduled = true;
                plan.count.ready = is_pod_ready(kept);
                plan.count.available = available(kept);
                plan.count.updated = updated(kept);
                if !plan.count.updated {
                    plan.outdated = Some((kept, plan.count.available));
                }
            }
        }
    } else if !live.is_empty() {
        plan.count.misscheduled = true;
        if !fit.should_continue_running {
            plan.delete = live;
        }
    }
    plan
}

/// The status counts of a set, summed over its nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) desired: i32,
    pub(crate) scheduled: i32,
    pub(crate) ready: i32,
    pub(crate) available: i32,
    pub(crate) updated: i32,
    pub(crate) misscheduled: i32,
    pub(crate) unavailable: i32,
}

impl Totals {
    fn add(&mut self, count: &NodeCount, sign: i32) {
        self.desired += sign * i32::from(count.desired);
        self.scheduled += sign * i32::from(count.scheduled);
        self.ready += sign * i32::from(count.ready);
        self.available += sign * i32::from(count.available && count.desired);
        self.updated += sign * i32::from(count.updated);
        self.misscheduled += sign * i32::from(count.misscheduled);
        self.unavailable += sign * i32::from(count.unavailable());
    }
}

/// A set's counts by node and their totals, kept between syncs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tally {
    nodes: HashMap<String, NodeCount>,
    totals: Totals,
    /// Nodes whose kept pod runs an old template.
    outdated: usize,
}

impl Tally {
    /// Records `node`'s count, replacing what it counted before.
    pub(crate) fn set(&mut self, node: &str, count: NodeCount) {
        let old = if count == NodeCount::default() {
            self.nodes.remove(node)
        } else {
            self.nodes.insert(node.to_string(), count)
        };
        if let Some(old) = old {
            self.totals.add(&old, -1);
            if old.is_outdated() {
                self.outdated -= 1;
            }
        }
        self.totals.add(&count, 1);
        if count.is_outdated() {
            self.outdated += 1;
        }
    }

    pub(crate) fn totals(&self) -> Totals {
        self.totals
    }

    /// Whether some node's kept pod runs an old template (a rollout is
    /// under way: the next sync plans every node).
    pub(crate) fn has_outdated(&self) -> bool {
        self.outdated > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, phase: &str, ready: bool, deleting: bool, hash: &str) -> Pod {
        let mut value = json!({
            "metadata": {"name": name, "labels": {"controller-revision-hash": hash},
                         "creationTimestamp": format!("2026-01-01T00:00:0{}Z", &name[1..])},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" }}
            ]}
        });
        if deleting {
            value["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:01:00Z");
        }
        serde_json::from_value(value).expect("pod")
    }

    const RUN: NodeFit = NodeFit {
        should_run: true,
        should_continue_running: true,
    };
    const STAY: NodeFit = NodeFit {
        should_run: false,
        should_continue_running: true,
    };
    const NO: NodeFit = NodeFit {
        should_run: false,
        should_continue_running: false,
    };

    fn names(pods: &[&Pod]) -> Vec<String> {
        pods.iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    #[test]
    fn each_node_keeps_its_oldest_running_pod_and_drops_the_rest() {
        let updated = |p: &Pod| {
            p.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l["controller-revision-hash"] == "new")
        };
        let available = |p: &Pod| is_pod_ready(p);
        let (a1, a2, f3) = (
            pod("a1", "Running", true, false, "new"),
            pod("a2", "Running", true, false, "new"),
            pod("f3", "Failed", false, false, "new"),
        );
        let (t4, o5) = (
            pod("t4", "Running", false, true, "new"),
            pod("o5", "Running", false, false, "old"),
        );
        // (what, fit, pods, create, deletions, count, outdated)
        let plan = plan_node(Some(RUN), vec![&a2, &f3, &a1], updated, available);
        assert!(!plan.create);
        assert_eq!(names(&plan.delete), ["f3", "a2"], "failed and surplus go");
        assert!(plan.count.scheduled && plan.count.ready && plan.count.updated);
        assert!(plan.outdated.is_none());

        let plan = plan_node(Some(RUN), vec![], updated, available);
        assert!(plan.create && plan.count.desired && !plan.count.scheduled);
        assert!(plan.count.unavailable());

        let plan = plan_node(Some(RUN), vec![&t4], updated, available);
        assert!(!plan.create, "a terminating pod is waited for");

        let plan = plan_node(Some(RUN), vec![&o5], updated, available);
        assert_eq!(
            plan.outdated.map(|(p, a)| (names(&[p]), a)),
            Some((vec!["o5".to_string()], false))
        );

        let plan = plan_node(Some(STAY), vec![&a1], updated, available);
        assert!(plan.count.misscheduled && plan.delete.is_empty());
        let plan = plan_node(Some(NO), vec![&a1], updated, available);
        assert_eq!(names(&plan.delete), ["a1"]);
        let plan = plan_node(None, vec![&a1, &t4], updated, available);
        assert_eq!(names(&plan.delete), ["a1"], "a gone node's live pods go");
        assert_eq!(plan.count, NodeCount::default());
    }

    #[test]
    fn the_tally_replaces_a_nodes_count_in_the_totals() {
        let mut tally = Tally::default();
        let ready = NodeCount {
            desired: true,
            scheduled: true,
            ready: true,
            available: true,
            updated: true,
            misscheduled: false,
        };
        let waiting = NodeCount {
            desired: true,
            ..NodeCount::default()
        };
        tally.set("a", waiting);
        tally.set("b", waiting);
        assert_eq!(tally.totals().desired, 2);
        assert_eq!(tally.totals().unavailable, 2);
        tally.set("a", ready);
        let totals = tally.totals();
        assert_eq!(
            (
                totals.desired,
                totals.ready,
                totals.available,
                totals.unavailable
            ),
            (2, 1, 1, 1)
        );
        let outdated = NodeCount {
            updated: false,
            ..ready
        };
        tally.set("b", outdated);
        assert!(tally.has_outdated());
        tally.set("b", NodeCount::default());
        assert!(!tally.has_outdated(), "the node is gone");
        assert_eq!(tally.totals().desired, 1);
        assert_eq!(tally.nodes.len(), 1);
    }
}
