//! InterPodAffinity: Filter enforces the pod's required affinity and
//! anti-affinity and the required anti-affinity of pods already running;
//! Score weighs preferred terms both ways (and existing pods' required
//! affinity by `hardPodAffinityWeight`). PreFilter/PreScore count matches
//! per topology pair once per cycle.

use std::collections::HashMap;

use foldhash::fast::FixedState;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use ksim_core::selector::{Labels, NoLabels};

use crate::framework::{
    AffinityTerm, CycleState, FilterPlugin, MAX_NODE_SCORE, NodeInfo, Plugin, PodInfo,
    PreFilterPlugin, PreFilterResult, PreScorePlugin, ScorePlugin, Snapshot, Status,
    WeightedAffinityTerm, pod_namespace,
};

/// The plugin name.
pub const NAME: &str = "InterPodAffinity";
/// The pod's required affinity is not met on the node.
pub const ERR_REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
/// The pod's required anti-affinity is not met on the node.
pub const ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't match pod anti-affinity rules";
/// An existing pod's anti-affinity rejects the pod on the node.
pub const ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";
const PRE_FILTER_KEY: &str = "PreFilterInterPodAffinity";
const PRE_SCORE_KEY: &str = "PreScoreInterPodAffinity";

/// `InterPodAffinityArgs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterPodAffinityArgs {
    /// Weight of existing pods' required affinity terms in scoring (default 1).
    pub hard_pod_affinity_weight: i32,
    /// Skip existing pods' preferred terms when the pod has none.
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        InterPodAffinityArgs {
            hard_pod_affinity_weight: 1,
            ignore_preferred_terms_of_existing_pods: false,
        }
    }
}

/// The plugin.
#[derive(Debug, Clone)]
pub struct InterPodAffinity {
    args: InterPodAffinityArgs,
}

impl InterPodAffinity {
    /// With these arguments.
    pub fn new(args: &InterPodAffinityArgs) -> Self {
        InterPodAffinity { args: args.clone() }
    }
}

/// Counts per topology key and value; entries that reach zero are dropped.
#[derive(Debug, Clone, Default)]
struct TopologyCounts(HashMap<String, HashMap<String, i64, FixedState>, FixedState>);

impl TopologyCounts {
    fn update(&mut self, node: &NodeInfo, key: &str, value: i64) {
        let Some(tv) = node.labels().get(key) else {
            return;
        };
        let values = match self.0.get_mut(key) {
            Some(values) => values,
            None => self.0.entry(key.to_string()).or_default(),
        };
        let count = match values.get_mut(tv.as_str()) {
            Some(count) => count,
            None => values.entry(tv.clone()).or_default(),
        };
        *count += value;
        if *count == 0 {
            values.remove(tv.as_str());
            if values.is_empty() {
                self.0.remove(key);
            }
        }
    }

    fn get(&self, key: &str, value: &str) -> i64 {
        self.0
            .get(key)
            .and_then(|values| values.get(value))
            .copied()
            .unwrap_or(0)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Whether `pod` matches every term (false for no terms).
fn pod_matches_all_terms(terms: &[AffinityTerm], pod: &Pod) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches_pod(pod, &NoLabels))
}

/// Resolves a term's namespaceSelector into its namespace list, as upstream
/// `mergeAffinityTermNamespacesIfNotEmpty` (an empty selector, matching all
/// namespaces, stays a selector).
fn merge_term_namespaces(term: &mut AffinityTerm, snapshot: &Snapshot) {
    if term.selects_every_namespace() {
        return;
    }
    if let Some(selector) = term.namespace_selector.take() {
        term.namespaces
            .extend(snapshot.namespaces_matching(&selector));
    }
}

#[derive(Clone)]
struct PreFilterState {
    namespace_labels: std::collections::BTreeMap<String, String>,
    pod_info: PodInfo,
    existing_anti_affinity_counts: TopologyCounts,
    affinity_counts: TopologyCounts,
    anti_affinity_counts: TopologyCounts,
}

impl Plugin for InterPodAffinity {
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

/// Whether the pod has any pod affinity or anti-affinity (terms or not).
fn has_pod_affinity(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some())
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let namespace_labels = snapshot.namespace_labels(pod_namespace(pod));
        let mut existing_anti_affinity_counts = TopologyCounts::default();
        for node in snapshot.nodes_with_required_anti_affinity_pods() {
            for existing in &node.pods_with_required_anti_affinity {
                for term in &existing.required_anti_affinity_terms {
                    if term.matches_pod(pod, namespace_labels) {
                        existing_anti_affinity_counts.update(node, &term.topology_key, 1);
                    }
                }
            }
        }
        if existing_anti_affinity_counts.is_empty() && !has_pod_affinity(pod) {
            // Nothing to check, and no term to parse (or to fail parsing).
            return (None, Status::skip());
        }
        let mut pod_info = match PodInfo::new(Arc::new(pod.clone())) {
            Ok(info) => info,
            Err(e) => return (None, Status::unresolvable(format!("parsing pod: {e}"))),
        };
        for term in pod_info
            .required_affinity_terms
            .iter_mut()
            .chain(pod_info.required_anti_affinity_terms.iter_mut())
        {
            merge_term_namespaces(term, snapshot);
        }
        let mut affinity_counts = TopologyCounts::default();
        let mut anti_affinity_counts = TopologyCounts::default();
        if !pod_info.required_affinity_terms.is_empty()
            || !pod_info.required_anti_affinity_terms.is_empty()
        {
            for node in snapshot.nodes() {
                for existing in &node.pods {
                    if pod_matches_all_terms(&pod_info.required_affinity_terms, &existing.pod) {
                        for term in &pod_info.required_affinity_terms {
                            affinity_counts.update(node, &term.topology_key, 1);
                        }
                    }
                    for term in &pod_info.required_anti_affinity_terms {
                        if term.matches_pod(&existing.pod, &NoLabels) {
                            anti_affinity_counts.update(node, &term.topology_key, 1);
                        }
                    }
                }
            }
        }
        if existing_anti_affinity_counts.is_empty()
            && pod_info.required_affinity_terms.is_empty()
            && pod_info.required_anti_affinity_terms.is_empty()
        {
            return (None, Status::skip());
        }
        state.write(
            PRE_FILTER_KEY,
            PreFilterState {
                namespace_labels: namespace_labels.clone(),
                pod_info,
                existing_anti_affinity_counts,
                affinity_counts,
                anti_affinity_counts,
            },
        );
        (None, Status::success())
    }

    fn add_pod(
        &self,
        state: &mut CycleState,
        _pod: &Pod,
        added: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        if let Some(s) = state.read_mut::<PreFilterState>(PRE_FILTER_KEY) {
            s.update_with_pod(added, node, 1);
        }
        Status::success()
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        _pod: &Pod,
        removed: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        if let Some(s) = state.read_mut::<PreFilterState>(PRE_FILTER_KEY) {
            s.update_with_pod(removed, node, -1);
        }
        Status::success()
    }
}

impl PreFilterState {
    /// Accounts `multiplier` times the pod `updated` on `node` (upstream `updateWithPod`).
    fn update_with_pod(&mut self, updated: &PodInfo, node: &NodeInfo, multiplier: i64) {
        for term in &updated.required_anti_affinity_terms {
            if term.matches_pod(&self.pod_info.pod, &self.namespace_labels) {
                self.existing_anti_affinity_counts
                    .update(node, &term.topology_key, multiplier);
            }
        }
        if pod_matches_all_terms(&self.pod_info.required_affinity_terms, &updated.pod) {
            for term in &self.pod_info.required_affinity_terms {
                self.affinity_counts
                    .update(node, &term.topology_key, multiplier);
            }
        }
        for term in &self.pod_info.required_anti_affinity_terms {
            if term.matches_pod(&updated.pod, &NoLabels) {
                self.anti_affinity_counts
                    .update(node, &term.topology_key, multiplier);
            }
        }
    }
}

fn satisfy_pod_affinity(s: &PreFilterState, node: &NodeInfo) -> bool {
    let mut pods_exist = true;
    for term in &s.pod_info.required_affinity_terms {
        let Some(value) = node.labels().get(&term.topology_key) else {
            return false;
        };
        if s.affinity_counts.get(&term.topology_key, value) <= 0 {
            pods_exist = false;
        }
    }
    if !pods_exist {
        // The first pod of a group with affinity to itself may go anywhere
        // that has the topology keys.
        return s.affinity_counts.is_empty()
            && pod_matches_all_terms(&s.pod_info.required_affinity_terms, &s.pod_info.pod);
    }
    true
}

fn satisfy_pod_anti_affinity(s: &PreFilterState, node: &NodeInfo) -> bool {
    if s.anti_affinity_counts.is_empty() {
        return true;
    }
    s.pod_info.required_anti_affinity_terms.iter().all(|term| {
        node.labels()
            .get(&term.topology_key)
            .is_none_or(|value| s.anti_affinity_counts.get(&term.topology_key, value) <= 0)
    })
}

fn satisfy_existing_pods_anti_affinity(s: &PreFilterState, node: &NodeInfo) -> bool {
    if s.existing_anti_affinity_counts.is_empty() {
        return true;
    }
    node.labels()
        .iter()
        .all(|(key, value)| s.existing_anti_affinity_counts.get(key, value) <= 0)
}

impl FilterPlugin for InterPodAffinity {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_KEY) else {
            return Status::error(format!(
                "reading {PRE_FILTER_KEY:?} from cycleState: not found"
            ));
        };
        if !satisfy_pod_affinity(s, node) {
            return Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH);
        }
        if !satisfy_pod_anti_affinity(s, node) {
            return Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        if !satisfy_existing_pods_anti_affinity(s, node) {
            return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        Status::success()
    }
}

/// Per topology key, per value, the summed weights.
type ScoreMap = HashMap<String, HashMap<String, i64>>;

#[derive(Clone)]
struct PreScoreState {
    topology_score: ScoreMap,
}

fn process_term(
    scores: &mut ScoreMap,
    term: &AffinityTerm,
    weight: i64,
    pod: &Pod,
    namespace_labels: &dyn Labels,
    node: &NodeInfo,
    multiplier: i64,
) {
    if term.matches_pod(pod, namespace_labels)
        && let Some(value) = node.labels().get(&term.topology_key)
    {
        *scores
            .entry(term.topology_key.clone())
            .or_default()
            .entry(value.clone())
            .or_default() += weight.saturating_mul(multiplier);
    }
}

fn process_terms(
    scores: &mut ScoreMap,
    terms: &[WeightedAffinityTerm],
    pod: &Pod,
    namespace_labels: &dyn Labels,
    node: &NodeInfo,
    multiplier: i64,
) {
    for weighted in terms {
        process_term(
            scores,
            &weighted.term,
            i64::from(weighted.weight),
            pod,
            namespace_labels,
            node,
            multiplier,
        );
    }
}

impl InterPodAffinity {
    fn process_existing_pod(
        &self,
        scores: &mut ScoreMap,
        incoming: &PodInfo,
        namespace_labels: &dyn Labels,
        existing: &PodInfo,
        node: &NodeInfo,
    ) {
        if node.labels().is_empty() {
            return;
        }
        process_terms(
            scores,
            &incoming.preferred_affinity_terms,
            &existing.pod,
            &NoLabels,
            node,
            1,
        );
        process_terms(
            scores,
            &incoming.preferred_anti_affinity_terms,
            &existing.pod,
            &NoLabels,
            node,
            -1,
        );
        if self.args.hard_pod_affinity_weight > 0 {
            for term in &existing.required_affinity_terms {
                process_term(
                    scores,
                    term,
                    i64::from(self.args.hard_pod_affinity_weight),
                    &incoming.pod,
                    namespace_labels,
                    node,
                    1,
                );
            }
        }
        process_terms(
            scores,
            &existing.preferred_affinity_terms,
            &incoming.pod,
            namespace_labels,
            node,
            1,
        );
        process_terms(
            scores,
            &existing.preferred_anti_affinity_terms,
            &incoming.pod,
            namespace_labels,
            node,
            -1,
        );
    }
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        nodes: &[&NodeInfo],
        snapshot: &Snapshot,
    ) -> Status {
        if nodes.is_empty()
            || (!has_pod_affinity(pod) && snapshot.nodes_with_affinity_pods().next().is_none())
        {
            // No term of the pod's and no existing pod with terms: no score.
            return Status::skip();
        }
        let mut incoming = match PodInfo::new(Arc::new(pod.clone())) {
            Ok(info) => info,
            Err(e) => return Status::error(format!("failed to parse pod: {e}")),
        };
        let has_constraints = !incoming.preferred_affinity_terms.is_empty()
            || !incoming.preferred_anti_affinity_terms.is_empty();
        if self.args.ignore_preferred_terms_of_existing_pods && !has_constraints {
            return Status::skip();
        }
        for weighted in incoming
            .preferred_affinity_terms
            .iter_mut()
            .chain(incoming.preferred_anti_affinity_terms.iter_mut())
        {
            merge_term_namespaces(&mut weighted.term, snapshot);
        }
        let namespace_labels = snapshot.namespace_labels(pod_namespace(pod));
        let mut topology_score = ScoreMap::new();
        let visited: Box<dyn Iterator<Item = &NodeInfo>> = if has_constraints {
            Box::new(snapshot.nodes().iter())
        } else {
            Box::new(snapshot.nodes_with_affinity_pods())
        };
        for node in visited {
            let pods = if has_constraints {
                &node.pods
            } else {
                &node.pods_with_affinity
            };
            for existing in pods {
                self.process_existing_pod(
                    &mut topology_score,
                    &incoming,
                    namespace_labels,
                    existing,
                    node,
                );
            }
        }
        if topology_score.is_empty() {
            return Status::skip();
        }
        state.write(PRE_SCORE_KEY, PreScoreState { topology_score });
        Status::success()
    }
}

impl ScorePlugin for InterPodAffinity {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let s = state.read::<PreScoreState>(PRE_SCORE_KEY).ok_or_else(|| {
            Status::error(format!(
                "reading {PRE_SCORE_KEY:?} from cycleState: not found"
            ))
        })?;
        let labels = node.labels();
        Ok(s.topology_score
            .iter()
            .filter_map(|(key, values)| labels.get(key).and_then(|v| values.get(v)))
            .fold(0i64, |a, b| a.saturating_add(*b)))
    }

    fn normalize_score(
        &self,
        state: &CycleState,
        _pod: &Pod,
        _nodes: &[&NodeInfo],
        scores: &mut [i64],
    ) -> Status {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_KEY) else {
            return Status::success();
        };
        if s.topology_score.is_empty() {
            return Status::success();
        }
        let min = scores.iter().copied().min().unwrap_or(0);
        let max = scores.iter().copied().max().unwrap_or(0);
        let diff = i128::from(max) - i128::from(min);
        for score in scores.iter_mut() {
            *score = if diff > 0 {
                (MAX_NODE_SCORE as f64
                    * ((i128::from(*score) - i128::from(min)) as f64 / diff as f64))
                    as i64
            } else {
                0
            };
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests;
