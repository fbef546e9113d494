//! One scheduling cycle (upstream `schedulePod`): PreFilter, Filter over the
//! nodes from a rotating start index until `percentageOfNodesToScore` worth
//! of feasible nodes are found, PreScore, Score and NormalizeScore with
//! weights, selection of the best node (ties broken by an injectable RNG),
//! and on failure the `FitError` whose message is the FailedScheduling text.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use rand::{Rng, RngCore, SeedableRng};

use super::cycle_state::CycleState;
use super::interface::{FilterPlugin, MAX_NODE_SCORE, MIN_NODE_SCORE, PreFilterResult};
use super::node_info::{NodeInfo, Snapshot};
use super::profile::{ExtensionPoint, Profile};
use super::status::{Code, Status};

/// Below this many nodes every node is evaluated.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// The lowest adaptive percentage.
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: i64 = 5;

/// What persists between cycles: the rotating start index and the RNG that
/// breaks score ties.
pub struct ScheduleState {
    pub next_start_node_index: usize,
    /// Keep each node's per-plugin scores in the result (for explaining).
    pub record_scores: bool,
    rng: Box<dyn RngCore + Send>,
}

impl fmt::Debug for ScheduleState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScheduleState")
            .field("next_start_node_index", &self.next_start_node_index)
            .finish()
    }
}

impl ScheduleState {
    /// With the given tie-breaking RNG.
    pub fn new(rng: Box<dyn RngCore + Send>) -> Self {
        ScheduleState {
            next_start_node_index: 0,
            record_scores: false,
            rng,
        }
    }

    /// Replaces the tie-breaking RNG (a seeded cluster gives each pod's
    /// cycle its own, so ties break the same whatever else drew before).
    pub fn set_rng(&mut self, rng: Box<dyn RngCore + Send>) {
        self.rng = rng;
    }

    /// With a deterministic RNG seeded by `seed`.
    pub fn seeded(seed: u64) -> Self {
        Self::new(Box::new(rand::rngs::StdRng::seed_from_u64(seed)))
    }
}

/// A successful cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleResult {
    pub suggested_host: String,
    /// Nodes filtered (feasible or not).
    pub evaluated_nodes: usize,
    /// Nodes that passed the filters.
    pub feasible_nodes: usize,
    /// Per feasible node, the weighted score of each plugin and the total
    /// (only with `ScheduleState::record_scores`; empty when only one node
    /// was feasible).
    pub node_scores: Vec<NodePluginScores>,
    /// The nodes filtered out, with the status of the plugin that rejected
    /// each (for explaining decisions).
    pub filtered_out: NodeToStatus,
}

/// The scores of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePluginScores {
    pub node: String,
    /// (plugin, weighted score).
    pub scores: Vec<(&'static str, i64)>,
    pub total: i64,
}

/// Node name → the status of the plugin that rejected it.
pub type NodeToStatus = HashMap<String, Status, foldhash::fast::FixedState>;

/// Why the pod fits no node (upstream `Diagnosis`).
#[derive(Debug, Clone, Default)]
pub struct Diagnosis {
    /// The status of each node that was filtered out.
    pub node_to_status: NodeToStatus,
    /// The status of nodes not in `node_to_status` (those a PreFilter ruled out).
    pub absent_nodes_status: Option<Status>,
    /// Plugins that rejected the pod somewhere.
    pub unschedulable_plugins: BTreeSet<&'static str>,
    /// The message of a PreFilter rejection.
    pub pre_filter_msg: String,
    /// The message of the PostFilter plugins.
    pub post_filter_msg: String,
}

/// No node fits (upstream `FitError`).
#[derive(Debug, Clone)]
pub struct FitError {
    pub num_all_nodes: usize,
    pub diagnosis: Diagnosis,
    /// What PostFilter (preemption) proposes: a nominated node and victims.
    pub post_filter_result: Option<super::interface::PostFilterResult>,
}

impl FitError {
    /// The FailedScheduling message, built as kube-scheduler builds it:
    /// `0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod topology spread constraints.`
    pub fn message(&self) -> String {
        let mut message = format!("0/{} nodes are available:", self.num_all_nodes);
        let diagnosis = &self.diagnosis;
        if !diagnosis.pre_filter_msg.is_empty() {
            message.push_str(&format!(" {}.", diagnosis.pre_filter_msg));
        } else {
            let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
            for status in diagnosis.node_to_status.values() {
                for reason in status.reasons() {
                    *reasons.entry(reason).or_default() += 1;
                }
            }
            let absent = self
                .num_all_nodes
                .saturating_sub(diagnosis.node_to_status.len());
            if absent > 0
                && let Some(status) = &diagnosis.absent_nodes_status
            {
                for reason in status.reasons() {
                    *reasons.entry(reason).or_default() += absent;
                }
            }
            let mut histogram: Vec<String> = reasons
                .into_iter()
                .map(|(reason, count)| format!("{count} {reason}"))
                .collect();
            histogram.sort();
            if !histogram.is_empty() {
                message.push_str(&format!(" {}.", histogram.join(", ")));
            }
        }
        if !diagnosis.post_filter_msg.is_empty() {
            message.push_str(&format!(" {}.", diagnosis.post_filter_msg));
        }
        message
    }
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

/// Why a cycle did not place the pod.
#[derive(Debug, Clone)]
pub enum ScheduleError {
    /// The snapshot has no node.
    NoNodesAvailable,
    /// No node fits.
    Unschedulable(Box<FitError>),
    /// A plugin failed.
    Internal(String),
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScheduleError::NoNodesAvailable => f.write_str("no nodes available to schedule pods"),
            ScheduleError::Unschedulable(fit) => f.write_str(&fit.message()),
            ScheduleError::Internal(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ScheduleError {}

/// The message of the `Scheduled` event (`Successfully assigned ns/pod to node`).
pub fn scheduled_message(pod: &Pod, node: &str) -> String {
    format!(
        "Successfully assigned {}/{} to {node}",
        super::pod_info::pod_namespace(pod),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// How many feasible nodes to look for among `num_all_nodes` (upstream
/// `numFeasibleNodesToFind`).
pub fn num_feasible_nodes_to_find(percentage: Option<i32>, num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let all = i64::try_from(num_all_nodes).unwrap_or(i64::MAX);
    let mut percentage = i64::from(percentage.unwrap_or(0));
    if percentage <= 0 {
        percentage = (50 - all / 125).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    }
    let num =
        usize::try_from(all.saturating_mul(percentage.min(100)) / 100).unwrap_or(num_all_nodes);
    num.max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// Runs the PreFilter plugins (upstream `RunPreFilterPlugins`).
fn run_pre_filter_plugins(
    profile: &Profile,
    state: &mut CycleState,
    pod: &Pod,
    snapshot: &Snapshot,
    diagnosis: &mut Diagnosis,
) -> Result<(PreFilterResult, Status), ScheduleError> {
    let mut result = PreFilterResult::default();
    let mut plugins_with_nodes: Vec<&'static str> = Vec::new();
    let mut returned = Status::success();
    for plugin in profile.plugins_at(ExtensionPoint::PreFilter) {
        let Some(pre_filter) = plugin.as_pre_filter() else {
            continue;
        };
        let (plugin_result, status) = pre_filter.pre_filter(state, pod, snapshot);
        if status.is_skip() {
            state.skip_filter_plugins.insert(plugin.name());
            continue;
        }
        if !status.is_success() {
            let status = status.with_plugin(plugin.name());
            match status.code() {
                Code::UnschedulableAndUnresolvable => {
                    diagnosis.unschedulable_plugins.insert(plugin.name());
                    return Ok((result, status));
                }
                Code::Unschedulable => {
                    diagnosis.unschedulable_plugins.insert(plugin.name());
                    returned = status;
                    continue;
                }
                _ => {
                    return Err(ScheduleError::Internal(format!(
                        "running PreFilter plugin {:?}: {}",
                        plugin.name(),
                        status.message()
                    )));
                }
            }
        }
        let plugin_result = plugin_result.unwrap_or_default();
        if !plugin_result.all_nodes() {
            plugins_with_nodes.push(plugin.name());
        }
        result = result.merge(plugin_result);
        if result.node_names.as_ref().is_some_and(BTreeSet::is_empty) {
            let message = if let [only] = plugins_with_nodes.as_slice() {
                format!("node(s) didn't satisfy plugin {only}")
            } else {
                format!(
                    "node(s) didn't satisfy plugin(s) [{}] simultaneously",
                    plugins_with_nodes.join(" ")
                )
            };
            diagnosis.unschedulable_plugins.extend(plugins_with_nodes);
            return Ok((result, Status::unresolvable(message)));
        }
    }
    diagnosis.unschedulable_plugins.extend(plugins_with_nodes);
    Ok((result, returned))
}

/// The Filter plugins that run this cycle (those whose PreFilter did not Skip).
fn active_filters<'a>(
    profile: &'a Profile,
    state: &CycleState,
) -> Vec<(&'static str, &'a dyn FilterPlugin)> {
    profile
        .plugins_at(ExtensionPoint::Filter)
        .iter()
        .filter_map(|p| p.as_filter().map(|f| (p.name(), f)))
        .filter(|(name, _)| !state.skips_filter(name))
        .collect()
}

fn run_filters(
    filters: &[(&'static str, &dyn FilterPlugin)],
    state: &CycleState,
    pod: &Pod,
    node: &NodeInfo,
) -> Status {
    for (name, filter) in filters {
        let status = filter.filter(state, pod, node);
        if !status.is_success() {
            if !status.is_rejected() {
                return Status::error(format!(
                    "running {name:?} filter plugin: {}",
                    status.message()
                ))
                .with_plugin(name);
            }
            return status.with_plugin(name);
        }
    }
    Status::success()
}

use ksim_core::status::pod_priority as priority;

/// Upstream `RunFilterPluginsWithNominatedPods`: when pods of equal or
/// higher priority are nominated to the node, the pod must fit both with
/// them counted as running and without them.
fn run_filters_with_nominated(
    profile: &Profile,
    filters: &[(&'static str, &dyn FilterPlugin)],
    state: &CycleState,
    pod: &Pod,
    node: &NodeInfo,
    snapshot: &Snapshot,
) -> Status {
    if !snapshot.has_nominated_pods() {
        return run_filters(filters, state, pod, node);
    }
    let pod_priority = priority(pod);
    let own_key = (
        super::pod_info::pod_namespace(pod),
        pod.metadata.name.as_deref().unwrap_or_default(),
    );
    let nominated: Vec<_> = snapshot
        .nominated_pods(node.name())
        .iter()
        .filter(|p| priority(&p.pod) >= pod_priority && p.key() != own_key)
        .collect();
    if nominated.is_empty() {
        return run_filters(filters, state, pod, node);
    }
    let mut node_with = node.clone();
    let mut state_with = state.clone();
    for added in nominated {
        node_with.add_pod(added.clone());
        let status =
            profile.run_pre_filter_extension_add_pod(&mut state_with, pod, added, &node_with);
        if !status.is_success() {
            return Status::error(status.message());
        }
    }
    let status = run_filters(filters, &state_with, pod, &node_with);
    if !status.is_success() {
        return status;
    }
    run_filters(filters, state, pod, node)
}

/// Runs the Filter plugins on one node, counting pods nominated to it
/// (see upstream `RunFilterPluginsWithNominatedPods`): the first rejection,
/// with its plugin.
pub fn run_filter_plugins_with_nominated_pods(
    profile: &Profile,
    state: &CycleState,
    pod: &Pod,
    node: &NodeInfo,
    snapshot: &Snapshot,
) -> Status {
    run_filters_with_nominated(
        profile,
        &active_filters(profile, state),
        state,
        pod,
        node,
        snapshot,
    )
}

/// Runs the PreFilter plugins for `pod` over `snapshot` (upstream
/// `RunPreFilterPlugins`): the cycle state the Filter plugins then read, the
/// nodes PreFilter narrowed the cycle to, and a rejection (what a simulation
/// such as the cluster autoscaler's needs before [`run_filter_plugins`]).
pub fn run_pre_filter(
    profile: &Profile,
    pod: &Pod,
    snapshot: &Snapshot,
) -> Result<(CycleState, PreFilterResult, Status), ScheduleError> {
    let mut state = CycleState::new();
    let mut diagnosis = Diagnosis::default();
    let (result, status) =
        run_pre_filter_plugins(profile, &mut state, pod, snapshot, &mut diagnosis)?;
    Ok((state, result, status))
}

/// Runs the Filter plugins on one node: the first rejection, with its plugin.
pub fn run_filter_plugins(
    profile: &Profile,
    state: &CycleState,
    pod: &Pod,
    node: &NodeInfo,
) -> Status {
    run_filters(&active_filters(profile, state), state, pod, node)
}

/// One scheduling cycle for `pod` over `snapshot` with `profile`.
pub fn schedule_one(
    profile: &Profile,
    snapshot: &Snapshot,
    pod: &Pod,
    cursor: &mut ScheduleState,
) -> Result<ScheduleResult, ScheduleError> {
    let all_nodes = snapshot.nodes();
    if all_nodes.is_empty() {
        return Err(ScheduleError::NoNodesAvailable);
    }
    let mut state = CycleState::new();
    let mut diagnosis = Diagnosis::default();
    let (pre_result, status) =
        run_pre_filter_plugins(profile, &mut state, pod, snapshot, &mut diagnosis)?;
    if !status.is_success() {
        diagnosis.pre_filter_msg = status.message();
        diagnosis.absent_nodes_status = Some(status);
        return Err(fit_error(profile, &mut state, pod, snapshot, diagnosis));
    }
    let candidates: Vec<&NodeInfo> = match &pre_result.node_names {
        None => snapshot
            .node_order()
            .iter()
            .filter_map(|&i| all_nodes.get(i))
            .collect(),
        Some(names) => {
            let nodes = names.iter().filter_map(|n| snapshot.get(n)).collect();
            let plugins: Vec<&str> = diagnosis.unschedulable_plugins.iter().copied().collect();
            diagnosis.absent_nodes_status = Some(Status::unresolvable(format!(
                "node(s) didn't satisfy plugin(s) [{}]",
                plugins.join(" ")
            )));
            nodes
        }
    };
    let feasible = find_nodes_that_pass_filters(
        profile,
        snapshot,
        &state,
        pod,
        &candidates,
        all_nodes.len(),
        cursor,
        &mut diagnosis,
    )?;
    let evaluated_nodes = feasible.len() + diagnosis.node_to_status.len();
    if feasible.is_empty() {
        return Err(fit_error(profile, &mut state, pod, snapshot, diagnosis));
    }
    if let [only] = feasible.as_slice() {
        return Ok(ScheduleResult {
            suggested_host: only.name().to_string(),
            evaluated_nodes,
            feasible_nodes: 1,
            node_scores: Vec::new(),
            filtered_out: diagnosis.node_to_status,
        });
    }
    let (totals, node_scores) = prioritize_nodes(
        profile,
        &mut state,
        pod,
        snapshot,
        &feasible,
        cursor.record_scores,
    )?;
    let suggested_host = select_host(&totals, |i| feasible[i].name(), cursor.rng.as_mut())
        .map(|i| feasible[i].name().to_string())
        .unwrap_or_default();
    Ok(ScheduleResult {
        suggested_host,
        evaluated_nodes,
        feasible_nodes: feasible.len(),
        node_scores,
        filtered_out: diagnosis.node_to_status,
    })
}

fn fit_error(
    profile: &Profile,
    state: &mut CycleState,
    pod: &Pod,
    snapshot: &Snapshot,
    mut diagnosis: Diagnosis,
) -> ScheduleError {
    let mut messages = Vec::new();
    let mut post_filter_result = None;
    for plugin in profile.plugins_at(ExtensionPoint::PostFilter) {
        if let Some(post_filter) = plugin.as_post_filter() {
            let (result, status) =
                post_filter.post_filter(state, pod, snapshot, profile, &diagnosis);
            if status.is_success() {
                post_filter_result = result;
                break;
            }
            if result.is_some() {
                post_filter_result = result;
            }
            if !status.message().is_empty() {
                messages.push(status.message());
            }
            if status.code() != Code::Unschedulable {
                break;
            }
        }
    }
    diagnosis.post_filter_msg = messages.join(", ");
    ScheduleError::Unschedulable(Box::new(FitError {
        num_all_nodes: snapshot.len(),
        diagnosis,
        post_filter_result,
    }))
}

#[allow(clippy::too_many_arguments)]
fn find_nodes_that_pass_filters<'a>(
    profile: &Profile,
    snapshot: &Snapshot,
    state: &CycleState,
    pod: &Pod,
    nodes: &[&'a NodeInfo],
    num_all_nodes: usize,
    cursor: &mut ScheduleState,
    diagnosis: &mut Diagnosis,
) -> Result<Vec<&'a NodeInfo>, ScheduleError> {
    if nodes.is_empty() {
        return Ok(Vec::new());
    }
    let num_to_find = num_feasible_nodes_to_find(profile.percentage_of_nodes_to_score, nodes.len());
    let start = cursor.next_start_node_index % nodes.len();
    let mut feasible = Vec::with_capacity(num_to_find.min(nodes.len()));
    if !profile.has_filter_plugins() {
        for i in 0..num_to_find.min(nodes.len()) {
            feasible.push(nodes[(start + i) % nodes.len()]);
        }
    } else {
        let filters = active_filters(profile, state);
        for i in 0..nodes.len() {
            if feasible.len() >= num_to_find {
                break;
            }
            let node = nodes[(start + i) % nodes.len()];
            let status = run_filters_with_nominated(profile, &filters, state, pod, node, snapshot);
            if status.is_success() {
                feasible.push(node);
            } else if status.code() == Code::Error {
                return Err(ScheduleError::Internal(status.message()));
            } else {
                if let Some(plugin) = status.plugin() {
                    diagnosis.unschedulable_plugins.insert(plugin);
                }
                diagnosis
                    .node_to_status
                    .insert(node.name().to_string(), status);
            }
        }
    }
    let processed = feasible.len() + diagnosis.node_to_status.len();
    cursor.next_start_node_index =
        (cursor.next_start_node_index + processed) % num_all_nodes.max(1);
    Ok(feasible)
}

/// Runs PreScore, Score and NormalizeScore; returns each node's weighted
/// total and, when `record` is set, the per-plugin breakdown.
fn prioritize_nodes(
    profile: &Profile,
    state: &mut CycleState,
    pod: &Pod,
    snapshot: &Snapshot,
    nodes: &[&NodeInfo],
    record: bool,
) -> Result<(Vec<i64>, Vec<NodePluginScores>), ScheduleError> {
    let mut totals = vec![0i64; nodes.len()];
    let mut breakdown: Vec<NodePluginScores> = if record {
        nodes
            .iter()
            .map(|n| NodePluginScores {
                node: n.name().to_string(),
                scores: Vec::new(),
                total: 0,
            })
            .collect()
    } else {
        Vec::new()
    };
    if profile.plugins_at(ExtensionPoint::Score).is_empty() {
        totals.iter_mut().for_each(|t| *t = 1);
        breakdown.iter_mut().for_each(|b| b.total = 1);
        return Ok((totals, breakdown));
    }
    for plugin in profile.plugins_at(ExtensionPoint::PreScore) {
        if let Some(pre_score) = plugin.as_pre_score() {
            let status = pre_score.pre_score(state, pod, nodes, snapshot);
            if status.is_skip() {
                state.skip_score_plugins.insert(plugin.name());
            } else if !status.is_success() {
                return Err(ScheduleError::Internal(format!(
                    "running PreScore plugin {:?}: {}",
                    plugin.name(),
                    status.message()
                )));
            }
        }
    }
    let mut scores = vec![0i64; nodes.len()];
    for plugin in profile.plugins_at(ExtensionPoint::Score) {
        let Some(scorer) = plugin.as_score() else {
            continue;
        };
        if state.skips_score(plugin.name()) {
            continue;
        }
        scorer
            .score_nodes(state, pod, nodes, &mut scores)
            .map_err(|status| {
                ScheduleError::Internal(format!(
                    "running Score plugin {:?}: {}",
                    plugin.name(),
                    status.message()
                ))
            })?;
        let status = scorer.normalize_score(state, pod, nodes, &mut scores);
        if !status.is_success() {
            return Err(ScheduleError::Internal(format!(
                "running Normalize on Score plugins: plugin {:?} failed with: {}",
                plugin.name(),
                status.message()
            )));
        }
        let weight = profile.weight(plugin.name());
        for (i, score) in scores.iter().enumerate() {
            if !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(score) {
                return Err(ScheduleError::Internal(format!(
                    "plugin {:?} returns an invalid score {score}, it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                    plugin.name()
                )));
            }
            let weighted = score.saturating_mul(weight);
            totals[i] = totals[i].saturating_add(weighted);
            if let Some(entry) = breakdown.get_mut(i) {
                entry.scores.push((plugin.name(), weighted));
                entry.total = entry.total.saturating_add(weighted);
            }
        }
    }
    Ok((totals, breakdown))
}

/// The index of the highest total; among equals, each is equally likely
/// (as upstream's selectHost). Ties are ordered by `name` before the draw,
/// so the choice does not depend on the order nodes arrived in the cache
/// (with a seeded random source, runs repeat).
pub fn select_host<'a>(
    totals: &[i64],
    name: impl Fn(usize) -> &'a str,
    rng: &mut dyn RngCore,
) -> Option<usize> {
    let best = *totals.iter().max()?;
    let count = totals.iter().filter(|&&t| t == best).count();
    if count == 1 {
        return totals.iter().position(|&t| t == best);
    }
    // The k-th tie in name order: linear, whatever the order of `totals`.
    let k = rng.random_range(0..count);
    let mut ties: Vec<usize> = (0..totals.len()).filter(|&i| totals[i] == best).collect();
    let (_, chosen, _) = ties.select_nth_unstable_by(k, |&a, &b| name(a).cmp(name(b)));
    Some(*chosen)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};

    use super::*;
    use crate::testing::{node, pod};

    fn failure_message(result: Result<ScheduleResult, ScheduleError>) -> String {
        match result {
            Err(error) => error.to_string(),
            Ok(result) => panic!("expected a failure, got {result:?}"),
        }
    }

    #[test]
    fn failed_scheduling_message_histogram() {
        let snapshot = Snapshot::new(
            [
                node("n1").label("zone", "a").cpu("2").obj(),
                node("n2").label("zone", "b").cpu("4").obj(),
                node("n3").label("zone", "b").cpu("4").obj(),
            ],
            [
                pod("db-1").label("app", "db").cpu("1").node("n1").obj(),
                pod("web-1").label("app", "web").node("n2").obj(),
                pod("web-2").label("app", "web").node("n3").obj(),
            ],
        );
        let incoming = pod("web-3")
            .label("app", "web")
            .cpu("2")
            .spread(1, "zone", "DoNotSchedule", &[("app", "web")])
            .obj();
        let result = schedule_one(
            &Profile::default_profile(),
            &snapshot,
            &incoming,
            &mut ScheduleState::seeded(1),
        );
        assert_eq!(
            failure_message(result),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod topology spread constraints. \
             preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
        );
    }

    #[test]
    fn histogram_counts_every_reason_of_a_node_and_sorts_as_strings() {
        let mut diagnosis = Diagnosis::default();
        diagnosis.node_to_status.insert(
            "a".to_string(),
            Status::new(
                Code::Unschedulable,
                ["Insufficient cpu", "Insufficient memory"],
            ),
        );
        for name in ["b", "c"] {
            diagnosis.node_to_status.insert(
                name.to_string(),
                Status::unschedulable("Insufficient memory"),
            );
        }
        diagnosis.absent_nodes_status = Some(Status::unresolvable(
            "node(s) didn't satisfy plugin(s) [NodeAffinity]",
        ));
        let fit = FitError {
            num_all_nodes: 13,
            diagnosis,
            post_filter_result: None,
        };
        assert_eq!(
            fit.message(),
            "0/13 nodes are available: 1 Insufficient cpu, 10 node(s) didn't satisfy plugin(s) [NodeAffinity], 3 Insufficient memory."
        );
    }

    #[test]
    fn pre_filter_rejections_and_narrowing() {
        let snapshot = Snapshot::new(
            [
                node("n1").cpu("1").obj(),
                node("n2").cpu("4").obj(),
                node("n3").cpu("4").obj(),
            ],
            [],
        );
        let name_term = |names: &[&str]| NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".to_string(),
                operator: "In".to_string(),
                values: Some(names.iter().map(|n| n.to_string()).collect()),
            }]),
        };
        let mut pinned = pod("p").cpu("2");
        pinned.required_node_term(name_term(&["n1"]));
        let profile = Profile::default_profile();
        let mut cursor = ScheduleState::seeded(1);
        assert_eq!(
            failure_message(schedule_one(
                &profile,
                &snapshot,
                &pinned.obj(),
                &mut cursor
            )),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. \
             preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
        );
        let mut fits = pod("p").cpu("2");
        fits.required_node_term(name_term(&["n3"]));
        fits.required_node_term(name_term(&["missing"]));
        let result = schedule_one(&profile, &snapshot, &fits.obj(), &mut cursor).expect("fits n3");
        assert_eq!(result.suggested_host, "n3");
        assert!(result.filtered_out.is_empty());
        let mut conflict = pod("p");
        conflict.required_node_term(NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![
                NodeSelectorRequirement {
                    key: "metadata.name".to_string(),
                    operator: "In".to_string(),
                    values: Some(vec!["n1".to_string()]),
                },
                NodeSelectorRequirement {
                    key: "metadata.name".to_string(),
                    operator: "In".to_string(),
                    values: Some(vec!["n2".to_string()]),
                },
            ]),
        });
        assert_eq!(
            failure_message(schedule_one(
                &profile,
                &snapshot,
                &conflict.obj(),
                &mut cursor
            )),
            "0/3 nodes are available: pod affinity terms conflict. \
             preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
        );
    }

    #[test]
    fn nominated_pods_of_equal_or_higher_priority_hold_their_room() {
        let mut snapshot = Snapshot::new([node("n1").cpu("2").obj()], []);
        snapshot.nominate(pod("nominee").priority(100).cpu("2").obj(), "n1");
        let profile = Profile::default_profile();
        let mut cursor = ScheduleState::seeded(1);
        let lower = pod("lower").priority(10).cpu("1").obj();
        let message = failure_message(schedule_one(&profile, &snapshot, &lower, &mut cursor));
        assert!(
            message.starts_with("0/1 nodes are available: 1 Insufficient cpu."),
            "{message}"
        );
        let higher = pod("higher").priority(200).cpu("1").obj();
        assert_eq!(
            schedule_one(&profile, &snapshot, &higher, &mut cursor)
                .map(|r| r.suggested_host)
                .ok(),
            Some("n1".to_string())
        );
        // The nominee itself is not blocked by its own nomination.
        let nominee = pod("nominee").priority(100).cpu("2").obj();
        assert!(schedule_one(&profile, &snapshot, &nominee, &mut cursor).is_ok());
        // Once bound, the nomination is gone.
        assert!(snapshot.bind_pod(nominee, "n1"));
        assert!(snapshot.nominated_pods("n1").is_empty());
    }

    #[test]
    fn scheduled_event_message() {
        assert_eq!(
            scheduled_message(&pod("web-0").namespace("shop").obj(), "node-3"),
            "Successfully assigned shop/web-0 to node-3"
        );
    }

    #[test]
    fn no_nodes_available() {
        let result = schedule_one(
            &Profile::default_profile(),
            &Snapshot::default(),
            &pod("p").obj(),
            &mut ScheduleState::seeded(1),
        );
        assert_eq!(
            failure_message(result),
            "no nodes available to schedule pods"
        );
    }

    #[test]
    fn spread_over_even_and_odd_nodes_ends_six_five() {
        let nodes = (0..10).map(|i| {
            node(&format!("node-{i}"))
                .label("parity", if i % 2 == 0 { "even" } else { "odd" })
                .cpu("8")
                .memory("16Gi")
                .obj()
        });
        let mut snapshot = Snapshot::new(nodes, []);
        let profile = Profile::default_profile();
        let mut cursor = ScheduleState::seeded(7);
        let mut counts: BTreeMap<String, i32> = BTreeMap::new();
        for i in 0..11 {
            let replica = pod(&format!("web-{i}"))
                .label("app", "web")
                .cpu("100m")
                .spread(1, "parity", "DoNotSchedule", &[("app", "web")])
                .obj();
            let result =
                schedule_one(&profile, &snapshot, &replica, &mut cursor).expect("schedulable");
            let parity = snapshot
                .get(&result.suggested_host)
                .and_then(|n| n.labels().get("parity").cloned())
                .expect("labelled node");
            *counts.entry(parity).or_default() += 1;
            let (even, odd) = (
                counts.get("even").copied().unwrap_or(0),
                counts.get("odd").copied().unwrap_or(0),
            );
            assert!((even - odd).abs() <= 1, "skew after {i}: {counts:?}");
            assert!(snapshot.bind_pod(replica, &result.suggested_host));
        }
        let mut final_counts: Vec<i32> = counts.values().copied().collect();
        final_counts.sort();
        assert_eq!(final_counts, [5, 6]);
    }

    #[test]
    fn feasible_nodes_to_find_as_upstream() {
        let cases = [
            (None, 50, 50),
            (None, 100, 100),
            (None, 1000, 420),
            (None, 5000, 500),
            (None, 6000, 300),
            (Some(30), 1000, 300),
            (Some(1), 1000, 100),
            (Some(100), 5000, 5000),
        ];
        for (percentage, nodes, expected) in cases {
            assert_eq!(
                num_feasible_nodes_to_find(percentage, nodes),
                expected,
                "{percentage:?} of {nodes}"
            );
        }
    }

    #[test]
    fn start_index_rotates_by_processed_nodes() {
        let snapshot = Snapshot::new(
            (0..250).map(|i| node(&format!("n{i:03}")).cpu("1").obj()),
            [],
        );
        let profile = Profile::default_profile();
        let mut cursor = ScheduleState::seeded(1);
        // 250 nodes: 50 - 250/125 = 48% -> 120 feasible nodes to find.
        let result = schedule_one(&profile, &snapshot, &pod("p").obj(), &mut cursor).expect("fits");
        assert_eq!(result.feasible_nodes, 120);
        assert_eq!(result.evaluated_nodes, 120);
        assert_eq!(cursor.next_start_node_index, 120);
        schedule_one(&profile, &snapshot, &pod("p").obj(), &mut cursor).expect("fits");
        assert_eq!(cursor.next_start_node_index, 240);
        schedule_one(&profile, &snapshot, &pod("p").obj(), &mut cursor).expect("fits");
        assert_eq!(cursor.next_start_node_index, (240 + 120) % 250);
    }

    #[test]
    fn highest_score_wins_and_ties_are_shared() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let names = ["c", "a", "b", "d"];
        let name = |i: usize| names[i];
        assert_eq!(select_host(&[10, 30, 20], name, &mut rng), Some(1));
        assert_eq!(select_host(&[], name, &mut rng), None);
        let mut picked = std::collections::BTreeSet::new();
        for _ in 0..64 {
            picked.insert(select_host(&[5, 30, 30, 30], name, &mut rng));
        }
        assert_eq!(
            picked.into_iter().collect::<Vec<_>>(),
            [Some(1), Some(2), Some(3)]
        );
    }

    #[test]
    fn weighted_scores_add_up_and_best_node_is_chosen() {
        let snapshot = Snapshot::new(
            [
                node("busy").cpu("4").memory("8Gi").obj(),
                node("idle").cpu("4").memory("8Gi").obj(),
            ],
            [pod("e").cpu("3").memory("6Gi").node("busy").obj()],
        );
        let mut recording = ScheduleState::seeded(1);
        recording.record_scores = true;
        let result = schedule_one(
            &Profile::default_profile(),
            &snapshot,
            &pod("p").cpu("500m").memory("1Gi").obj(),
            &mut recording,
        )
        .expect("fits");
        assert_eq!(result.suggested_host, "idle");
        assert!(result.filtered_out.is_empty());
        let idle = result
            .node_scores
            .iter()
            .find(|s| s.node == "idle")
            .expect("scored");
        assert_eq!(idle.total, idle.scores.iter().map(|(_, s)| s).sum::<i64>());
        assert!(
            idle.scores
                .iter()
                .any(|(plugin, score)| *plugin == "TaintToleration" && *score == 300)
        );
    }
}

#[cfg(test)]
mod extreme_input_tests {
    use super::*;
    use crate::testing::{node, pod};

    #[test]
    fn extreme_quantities_and_weights_do_not_panic() {
        let snapshot = Snapshot::new(
            [
                node("negative").cpu("-1").memory("-5Gi").obj(),
                node("huge")
                    .cpu("99999999999999999999999Ei")
                    .memory("9e18")
                    .capacity("example.com/x", "9e99")
                    .obj(),
                node("zero").cpu("0").memory("0").pods("0").obj(),
            ],
            [pod("big").cpu("9e18").memory("9e18").node("huge").obj()],
        );
        let profile = Profile::new(
            "x",
            &[
                ("NodeResourcesFit", i64::MAX),
                ("NodeResourcesBalancedAllocation", i64::MAX),
                ("TaintToleration", i64::MAX),
            ],
            &crate::plugins::PluginArgs::default(),
        )
        .expect("known plugins");
        for incoming in [
            pod("p")
                .cpu("9e18")
                .memory("9e18")
                .request("example.com/x", "9e99")
                .obj(),
            pod("q").cpu("-9e18").obj(),
            pod("r").obj(),
        ] {
            let mut cursor = ScheduleState::seeded(1);
            cursor.record_scores = true;
            // Any outcome is fine; only panics are not.
            let _ = schedule_one(&profile, &snapshot, &incoming, &mut cursor);
            let _ = schedule_one(
                &Profile::default_profile(),
                &snapshot,
                &incoming,
                &mut cursor,
            );
        }
    }
}
