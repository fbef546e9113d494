//! PodTopologySpread: spreads matching pods across topology domains.
//! Filter enforces `whenUnsatisfiable: DoNotSchedule` constraints
//! (maxSkew, minDomains, nodeAffinityPolicy, nodeTaintsPolicy,
//! matchLabelKeys); Score favours nodes in less crowded domains for
//! `ScheduleAnyway` constraints and for the system default constraints of
//! pods owned by workloads. Counting happens once per cycle in
//! PreFilter/PreScore, from the snapshot's kept domain counts whenever
//! they answer (including the per-hostname counts Score needs).

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use foldhash::fast::FixedState;

use k8s_openapi::api::core::v1::{Pod, TopologySpreadConstraint};
use ksim_core::node_affinity::RequiredNodeAffinity;

use common::{
    count_pods_match_selector, default_selector, filter_constraints, includes_node,
    node_has_all_topology_keys,
};
use ksim_core::selector::{LabelSelectorRequirements, NilableSelector};
use ksim_core::topology_spread::SpreadConstraint;

use crate::framework::{
    CycleState, DomainCounts, FilterPlugin, MAX_NODE_SCORE, NodeInfo, Plugin, PodInfo,
    PreFilterPlugin, PreFilterResult, PreScorePlugin, ScorePlugin, Snapshot, Status,
    TopologyLayout, pod_labels, pod_namespace,
};

/// The plugin name.
pub const NAME: &str = "PodTopologySpread";
/// The reason for a node whose domain is too crowded.
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";
/// The reason for a node without a constraint's topology key.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";
const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
const PRE_FILTER_KEY: &str = "PreFilterPodTopologySpread";
const PRE_SCORE_KEY: &str = "PreScorePodTopologySpread";

/// How default constraints are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DefaultingType {
    /// The system defaults (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway).
    #[default]
    System,
    /// `defaultConstraints` as configured.
    List,
}

/// `PodTopologySpreadArgs`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodTopologySpreadArgs {
    pub default_constraints: Vec<TopologySpreadConstraint>,
    pub defaulting_type: DefaultingType,
}

/// The system default constraints.
pub fn system_default_constraints() -> Vec<TopologySpreadConstraint> {
    vec![
        TopologySpreadConstraint {
            max_skew: 3,
            topology_key: HOSTNAME_LABEL.to_string(),
            when_unsatisfiable: SCHEDULE_ANYWAY.to_string(),
            ..Default::default()
        },
        TopologySpreadConstraint {
            max_skew: 5,
            topology_key: "topology.kubernetes.io/zone".to_string(),
            when_unsatisfiable: SCHEDULE_ANYWAY.to_string(),
            ..Default::default()
        },
    ]
}

/// The plugin.
#[derive(Debug, Clone)]
pub struct PodTopologySpread {
    default_constraints: Vec<TopologySpreadConstraint>,
    system_defaulted: bool,
}

impl PodTopologySpread {
    /// With these arguments.
    pub fn new(args: &PodTopologySpreadArgs) -> Self {
        match args.defaulting_type {
            DefaultingType::System => PodTopologySpread {
                default_constraints: system_default_constraints(),
                system_defaulted: true,
            },
            DefaultingType::List => PodTopologySpread {
                default_constraints: args.default_constraints.clone(),
                system_defaulted: false,
            },
        }
    }

    /// Whether PreScore leaves out nodes lacking any topology key: when the
    /// pod has constraints of its own or the defaults are configured.
    fn requires_all_topologies(&self, pod: &Pod) -> bool {
        let has_own = pod
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_ref())
            .is_some_and(|c| !c.is_empty());
        has_own || !self.system_defaulted
    }

    /// The constraints of `pod` for one `whenUnsatisfiable` kind: its own,
    /// or (when it has none at all) the defaults with the workload selector.
    pub fn constraints(
        &self,
        pod: &Pod,
        snapshot: &Snapshot,
        when_unsatisfiable: &str,
    ) -> Result<Vec<SpreadConstraint>, String> {
        let own = pod
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_deref())
            .unwrap_or_default();
        if !own.is_empty() {
            return filter_constraints(own, pod.metadata.labels.as_ref(), when_unsatisfiable);
        }
        let mut constraints = filter_constraints(
            &self.default_constraints,
            pod.metadata.labels.as_ref(),
            when_unsatisfiable,
        )?;
        if constraints.is_empty() {
            return Ok(constraints);
        }
        let selector = default_selector(pod, snapshot);
        if selector.is_empty() {
            return Ok(Vec::new());
        }
        for c in &mut constraints {
            c.selector = Some(selector.clone());
        }
        Ok(constraints)
    }
}

/// What PreFilter counts: per constraint, matching pods per domain value
/// and the global minimum (kept current when preemption adds or removes pods).
#[derive(Debug, Clone, Default)]
struct PreFilterState {
    constraints: Vec<SpreadConstraint>,
    /// Per constraint, matching pods per domain value (shared with the
    /// snapshot's index until preemption changes them).
    tp_value_to_match_num: Vec<Arc<DomainCounts>>,
    /// Per constraint, the smallest count over domains (i32::MAX when none).
    min_match: Vec<i64>,
    /// Per constraint, 1 when the incoming pod matches its own selector.
    self_match: Vec<i64>,
}

impl PreFilterState {
    fn new(
        pod: &Pod,
        constraints: Vec<SpreadConstraint>,
        tp_value_to_match_num: Vec<Arc<DomainCounts>>,
    ) -> Self {
        let self_match = constraints
            .iter()
            .map(|c| i64::from(c.selector.selects(pod_labels(pod))))
            .collect();
        let mut state = PreFilterState {
            constraints,
            tp_value_to_match_num,
            min_match: Vec::new(),
            self_match,
        };
        state.min_match = (0..state.constraints.len())
            .map(|i| state.compute_min(i))
            .collect();
        state
    }

    fn compute_min(&self, i: usize) -> i64 {
        self.tp_value_to_match_num[i]
            .values()
            .copied()
            .min()
            .unwrap_or(i64::from(i32::MAX))
    }

    /// The global minimum, or 0 when fewer domains than minDomains exist.
    fn min_match_num(&self, i: usize) -> i64 {
        let domains = i64::try_from(self.tp_value_to_match_num[i].len()).unwrap_or(i64::MAX);
        if domains < i64::from(self.constraints[i].min_domains) {
            return 0;
        }
        self.min_match[i]
    }

    /// Accounts `delta` matching pods of `updated` on `node` (upstream `updateWithPod`).
    fn update_with_pod(&mut self, updated: &Pod, preemptor: &Pod, node: &NodeInfo, delta: i64) {
        if pod_namespace(updated) != pod_namespace(preemptor)
            || !node_has_all_topology_keys(node, &self.constraints)
        {
            return;
        }
        let required = RequiredNodeAffinity::from_pod(preemptor);
        for i in 0..self.constraints.len() {
            let c = &self.constraints[i];
            if !c.selector.selects(pod_labels(updated))
                || !includes_node(c, preemptor, node, &required)
            {
                continue;
            }
            let value = node
                .labels()
                .get(&c.topology_key)
                .cloned()
                .unwrap_or_default();
            *Arc::make_mut(&mut self.tp_value_to_match_num[i])
                .entry(value)
                .or_default() += delta;
            self.min_match[i] = self.compute_min(i);
        }
    }
}

impl Plugin for PodTopologySpread {
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

/// Whether no inclusion policy can leave a node out of `c`'s counts (node
/// affinity honoured only matters when the pod has a required one; taints
/// only when the policy says Honor).
fn policies_include_every_node(c: &SpreadConstraint, required: &RequiredNodeAffinity) -> bool {
    c.policies.includes_every_node(required)
}

/// Whether a scan that skips every node lacking any of `constraints`'
/// topology keys counts, for each constraint `counted` selects, exactly the
/// nodes carrying that constraint's own key (what the kept counts cover):
/// the only key some node lacks is the counted constraints' own.
fn keyless_nodes_skipped_alike(
    constraints: &[SpreadConstraint],
    counted: impl Fn(&SpreadConstraint) -> bool,
    snapshot: &Snapshot,
) -> bool {
    constraints
        .iter()
        .filter(|c| snapshot.nodes_with_label(&c.topology_key) != snapshot.len())
        .all(|lacking| {
            constraints
                .iter()
                .filter(|c| counted(c))
                .all(|c| c.topology_key == lacking.topology_key)
        })
}

/// Whether the snapshot's kept counts are the ones PreFilter's scan would
/// find (upstream `calPreFilterState` skips nodes lacking any key).
fn counts_from_index(
    constraints: &[SpreadConstraint],
    required: &RequiredNodeAffinity,
    snapshot: &Snapshot,
) -> bool {
    constraints
        .iter()
        .all(|c| policies_include_every_node(c, required))
        && keyless_nodes_skipped_alike(constraints, |_| true, snapshot)
}

/// Whether the snapshot's kept counts (with the matching pods on nodes
/// without the key counted into the domain "") are the ones PreScore's scan
/// would find for every constraint it counts (hostname ones are counted
/// per node): upstream counts every node, nodes without the key into "",
/// unless all topologies are required, when it skips nodes lacking any key.
fn score_counts_from_index(
    constraints: &[SpreadConstraint],
    required: &RequiredNodeAffinity,
    require_all_topologies: bool,
    snapshot: &Snapshot,
) -> bool {
    let counted = |c: &SpreadConstraint| c.topology_key != HOSTNAME_LABEL;
    constraints
        .iter()
        .filter(|c| counted(c))
        .all(|c| policies_include_every_node(c, required))
        && (!require_all_topologies || keyless_nodes_skipped_alike(constraints, counted, snapshot))
}

/// Adds to `pod_counts` (the domains PreScore's nodes span) the matching
/// pods of every node counted (upstream PreScore's scan), for constraints
/// the kept counts do not answer (`count` gives a node's matching pods for
/// the constraint at an index).
fn scan_score_counts(
    pod: &Pod,
    constraints: &[SpreadConstraint],
    required: &RequiredNodeAffinity,
    require_all_topologies: bool,
    snapshot: &Snapshot,
    pod_counts: &mut [DomainCounts],
    count: impl Fn(usize, &NodeInfo) -> i64,
) {
    for node in snapshot.nodes() {
        if require_all_topologies && !node_has_all_topology_keys(node, constraints) {
            continue;
        }
        for (i, c) in constraints.iter().enumerate() {
            if !includes_node(c, pod, node, required) {
                continue;
            }
            let value = node
                .labels()
                .get(&c.topology_key)
                .map(String::as_str)
                .unwrap_or("");
            let Some(total) = pod_counts[i].get_mut(value) else {
                continue;
            };
            *total += count(i, node);
        }
    }
}

/// One selector's matching pods per node of the snapshot: from the kept
/// per-hostname counts when no two nodes share a hostname (a lookup per
/// node), else (and for nodes without a hostname) by counting the node's pods.
struct NodeCounts<'a> {
    per_hostname: Option<Arc<DomainCounts>>,
    selector: &'a Option<LabelSelectorRequirements>,
    namespace: &'a str,
}

impl<'a> NodeCounts<'a> {
    fn for_constraints(
        snapshot: &Snapshot,
        namespace: &'a str,
        constraints: &'a [SpreadConstraint],
    ) -> Vec<Self> {
        constraints
            .iter()
            .map(|c| {
                let kept = snapshot.kept_domain_counts(namespace, &c.selector, HOSTNAME_LABEL);
                NodeCounts {
                    per_hostname: kept.one_node_per_domain.then_some(kept.counts),
                    selector: &c.selector,
                    namespace,
                }
            })
            .collect()
    }

    /// The matching pods on `node`, one of the snapshot's nodes.
    fn of(&self, node: &NodeInfo) -> i64 {
        match (&self.per_hostname, node.labels().get(HOSTNAME_LABEL)) {
            (Some(kept), Some(hostname)) => kept.get(hostname).copied().unwrap_or(0),
            _ => count_pods_match_selector(&node.pods, self.selector, self.namespace),
        }
    }
}

/// Whether a node is one of the snapshot's own (whose pods the kept counts
/// cover), not a copy.
fn in_snapshot(node: &NodeInfo, snapshot: &Snapshot) -> bool {
    snapshot
        .nodes()
        .as_ptr_range()
        .contains(&std::ptr::from_ref(node))
}

/// Counts matching pods per domain by visiting every node (upstream
/// `calPreFilterState`), for constraints the kept counts do not answer.
/// (`count` gives a node's matching pods for the constraint at an index.)
fn count_per_domain(
    pod: &Pod,
    constraints: &[SpreadConstraint],
    required: &RequiredNodeAffinity,
    snapshot: &Snapshot,
    count: impl Fn(usize, &NodeInfo) -> i64,
) -> Vec<Arc<DomainCounts>> {
    // Counted with domain names borrowed from the snapshot; owned once at the end.
    let mut borrowed: Vec<HashMap<&str, i64, FixedState>> =
        vec![HashMap::default(); constraints.len()];
    let mut values: Vec<&str> = Vec::with_capacity(constraints.len());
    'nodes: for node in snapshot.nodes() {
        let labels = node.labels();
        values.clear();
        for c in constraints {
            match labels.get(&c.topology_key) {
                Some(value) => values.push(value.as_str()),
                None => continue 'nodes,
            }
        }
        for (i, c) in constraints.iter().enumerate() {
            if !includes_node(c, pod, node, required) {
                continue;
            }
            let count = if node.pods.is_empty() {
                0
            } else {
                count(i, node)
            };
            *borrowed[i].entry(values[i]).or_insert(0) += count;
        }
    }
    borrowed
        .into_iter()
        .map(|m| Arc::new(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))
        .collect()
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let constraints = match self.constraints(pod, snapshot, DO_NOT_SCHEDULE) {
            Ok(c) => c,
            Err(e) => return (None, Status::error(e)),
        };
        if constraints.is_empty() {
            return (None, Status::skip());
        }
        let required = RequiredNodeAffinity::from_pod(pod);
        let namespace = pod_namespace(pod);
        let counts = if counts_from_index(&constraints, &required, snapshot) {
            constraints
                .iter()
                .map(|c| snapshot.domain_counts(namespace, &c.selector, &c.topology_key))
                .collect()
        } else {
            let per_node = NodeCounts::for_constraints(snapshot, namespace, &constraints);
            count_per_domain(pod, &constraints, &required, snapshot, |i, node| {
                per_node[i].of(node)
            })
        };
        state.write(
            PRE_FILTER_KEY,
            PreFilterState::new(pod, constraints, counts),
        );
        (None, Status::success())
    }

    fn add_pod(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        added: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        if let Some(s) = state.read_mut::<PreFilterState>(PRE_FILTER_KEY) {
            s.update_with_pod(&added.pod, pod, node, 1);
        }
        Status::success()
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        removed: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        if let Some(s) = state.read_mut::<PreFilterState>(PRE_FILTER_KEY) {
            s.update_with_pod(&removed.pod, pod, node, -1);
        }
        Status::success()
    }
}

impl FilterPlugin for PodTopologySpread {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_KEY) else {
            return Status::error(format!(
                "reading {PRE_FILTER_KEY:?} from cycleState: not found"
            ));
        };
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = node.labels().get(&c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            let min_match = s.min_match_num(i);
            let self_match = s.self_match[i];
            let match_num = s.tp_value_to_match_num[i].get(value).copied().unwrap_or(0);
            let skew = match_num + self_match - min_match;
            if skew > i64::from(c.max_skew) {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }
}

/// What PreScore counts.
#[derive(Debug, Clone, Default)]
struct PreScoreState {
    constraints: Vec<SpreadConstraint>,
    /// Nodes without all topology keys (score 0).
    ignored_nodes: HashSet<String, FixedState>,
    /// Per constraint, matching pods per domain value (hostname constraints
    /// are counted per node at Score).
    pod_counts: Vec<DomainCounts>,
    normalizing_weights: Vec<f64>,
    /// The nodes PreScore was given (their addresses, only compared), so
    /// that Score can use what PreScore resolved per node.
    node_addresses: Vec<usize>,
    /// Per node PreScore was given, whether it is ignored.
    node_ignored: Vec<bool>,
    /// Per node PreScore was given and per constraint (row-major), the
    /// position of its domain in `domain_values`, or [`NO_DOMAIN`] /
    /// [`OWN_NODE`].
    node_domains: Vec<u32>,
    /// Per constraint, the domain values in order of first sight.
    domain_values: Vec<Arc<Vec<String>>>,
    /// Per node PreScore was given and per constraint (row-major), the
    /// node's own matching pods where `node_domains` says [`OWN_NODE`] and
    /// `own_counts_kept` holds for the constraint.
    own_counts: Vec<i64>,
    /// Per constraint, whether `own_counts` holds its per-node counts
    /// (taken from the snapshot's kept hostname counts).
    own_counts_kept: Vec<bool>,
}

/// The node lacks the constraint's topology key: it adds nothing.
const NO_DOMAIN: u32 = u32::MAX;
/// A hostname constraint: the node's own matching pods count.
const OWN_NODE: u32 = u32::MAX - 1;

fn node_address(node: &NodeInfo) -> usize {
    std::ptr::from_ref(node) as usize
}

impl PreScoreState {
    /// Whether `nodes` are the nodes PreScore was given, in its order.
    fn resolved_for(&self, nodes: &[&NodeInfo]) -> bool {
        self.node_addresses.len() == nodes.len()
            && self
                .node_addresses
                .iter()
                .zip(nodes)
                .all(|(address, node)| *address == node_address(node))
    }
}

fn topology_normalizing_weight(size: usize) -> f64 {
    ((size + 2) as f64).ln()
}

fn score_for_count(count: i64, max_skew: i32, weight: f64) -> f64 {
    count as f64 * weight + (f64::from(max_skew) - 1.0)
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        nodes: &[&NodeInfo],
        snapshot: &Snapshot,
    ) -> Status {
        if nodes.is_empty() || snapshot.is_empty() {
            return Status::skip();
        }
        let constraints = match self.constraints(pod, snapshot, SCHEDULE_ANYWAY) {
            Ok(c) => c,
            Err(e) => return Status::error(e),
        };
        if constraints.is_empty() {
            return Status::skip();
        }
        let require_all_topologies = self.requires_all_topologies(pod);
        let mut s = PreScoreState {
            pod_counts: vec![DomainCounts::default(); constraints.len()],
            ..Default::default()
        };
        let mut topology_size = vec![0usize; constraints.len()];
        s.node_addresses.reserve(nodes.len());
        s.node_ignored.reserve(nodes.len());
        s.node_domains.reserve(nodes.len() * constraints.len());
        s.domain_values = resolve_domains(
            &mut s,
            &mut topology_size,
            &constraints,
            require_all_topologies,
            nodes,
            snapshot,
        );
        s.normalizing_weights = constraints
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let size = if c.topology_key == HOSTNAME_LABEL {
                    nodes.len().saturating_sub(s.ignored_nodes.len())
                } else {
                    topology_size[i]
                };
                topology_normalizing_weight(size)
            })
            .collect();
        let required = RequiredNodeAffinity::from_pod(pod);
        let namespace = pod_namespace(pod);
        if score_counts_from_index(&constraints, &required, require_all_topologies, snapshot) {
            for (i, c) in constraints.iter().enumerate() {
                if s.pod_counts[i].is_empty() {
                    continue;
                }
                let kept = snapshot.kept_domain_counts(namespace, &c.selector, &c.topology_key);
                for (value, count) in s.pod_counts[i].iter_mut() {
                    *count = kept.counts.get(value).copied().unwrap_or(0);
                    if value.is_empty() && !require_all_topologies {
                        *count += kept.missing_key;
                    }
                }
            }
        } else {
            let per_node = NodeCounts::for_constraints(snapshot, namespace, &constraints);
            scan_score_counts(
                pod,
                &constraints,
                &required,
                require_all_topologies,
                snapshot,
                &mut s.pod_counts,
                |i, node| per_node[i].of(node),
            );
        }
        resolve_own_counts(&mut s, &constraints, namespace, nodes, snapshot);
        s.constraints = constraints;
        state.write(PRE_SCORE_KEY, s);
        Status::success()
    }
}

/// Resolves each node's domain per constraint into `s.node_domains` (and
/// which nodes are ignored), registers the domains among `nodes` in
/// `s.pod_counts` with `topology_size` counting them, and returns per
/// constraint the domain values the positions refer to. Nodes of the
/// snapshot are resolved through its kept [`TopologyLayout`]s (no label
/// lookup per node); others (a what-if copy) by their labels.
fn resolve_domains(
    s: &mut PreScoreState,
    topology_size: &mut [usize],
    constraints: &[SpreadConstraint],
    require_all_topologies: bool,
    nodes: &[&NodeInfo],
    snapshot: &Snapshot,
) -> Vec<Arc<Vec<String>>> {
    let positions: Option<Vec<usize>> = nodes.iter().map(|n| snapshot.position_of(n)).collect();
    let layouts: Vec<Arc<TopologyLayout>> = match &positions {
        Some(_) => constraints
            .iter()
            .map(|c| snapshot.topology_layout(&c.topology_key))
            .collect(),
        None => constraints
            .iter()
            .map(|c| Arc::new(TopologyLayout::of(nodes.iter().copied(), &c.topology_key)))
            .collect(),
    };
    // Hostname domains are the nodes' own (OWN_NODE): no value is looked up.
    let hostname: Vec<bool> = constraints
        .iter()
        .map(|c| c.topology_key == HOSTNAME_LABEL)
        .collect();
    let mut seen: Vec<Vec<bool>> = hostname
        .iter()
        .zip(&layouts)
        .map(|(&own, l)| vec![false; if own { 0 } else { l.values.len() }])
        .collect();
    for (k, node) in nodes.iter().enumerate() {
        let at = positions.as_ref().map_or(k, |p| p[k]);
        s.node_addresses.push(node_address(node));
        let ignored = require_all_topologies && layouts.iter().any(|l| !l.present[at]);
        s.node_ignored.push(ignored);
        if ignored {
            s.ignored_nodes.insert(node.name().to_string());
            s.node_domains
                .extend(std::iter::repeat_n(NO_DOMAIN, constraints.len()));
            continue;
        }
        for (i, (&own, layout)) in hostname.iter().zip(&layouts).enumerate() {
            let present = layout.present[at];
            if own {
                s.node_domains
                    .push(if present { OWN_NODE } else { NO_DOMAIN });
                continue;
            }
            let position = layout.positions[at];
            let first = &mut seen[i][position as usize];
            if !*first {
                *first = true;
                s.pod_counts[i].insert(layout.values[position as usize].clone(), 0);
                topology_size[i] += 1;
            }
            s.node_domains
                .push(if present { position } else { NO_DOMAIN });
        }
    }
    hostname
        .iter()
        .zip(&layouts)
        .map(|(&own, l)| {
            if own {
                Arc::default()
            } else {
                Arc::clone(&l.values)
            }
        })
        .collect()
}

/// Takes each node's own matching pods for hostname constraints from the
/// snapshot's kept per-hostname counts, when they are one node's each and
/// the nodes are the snapshot's (Score then counts no pod); otherwise Score
/// counts each node's pods.
fn resolve_own_counts(
    s: &mut PreScoreState,
    constraints: &[SpreadConstraint],
    namespace: &str,
    nodes: &[&NodeInfo],
    snapshot: &Snapshot,
) {
    let n = constraints.len();
    s.own_counts_kept = vec![false; n];
    if !constraints.iter().any(|c| c.topology_key == HOSTNAME_LABEL)
        || !nodes.iter().all(|node| in_snapshot(node, snapshot))
    {
        return;
    }
    s.own_counts = vec![0; nodes.len() * n];
    for (i, c) in constraints.iter().enumerate() {
        if c.topology_key != HOSTNAME_LABEL {
            continue;
        }
        let kept = snapshot.kept_domain_counts(namespace, &c.selector, HOSTNAME_LABEL);
        if !kept.one_node_per_domain {
            continue;
        }
        s.own_counts_kept[i] = true;
        for (k, node) in nodes.iter().enumerate() {
            if s.node_domains[k * n + i] != OWN_NODE {
                continue;
            }
            s.own_counts[k * n + i] = node
                .labels()
                .get(HOSTNAME_LABEL)
                .and_then(|value| kept.counts.get(value))
                .copied()
                .unwrap_or(0);
        }
    }
}

impl ScorePlugin for PodTopologySpread {
    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &Pod,
        nodes: &[&NodeInfo],
        scores: &mut [i64],
    ) -> Result<(), Status> {
        let s = state.read::<PreScoreState>(PRE_SCORE_KEY).ok_or_else(|| {
            Status::error(format!(
                "reading {PRE_SCORE_KEY:?} from cycleState: not found"
            ))
        })?;
        if !s.resolved_for(nodes) {
            for (slot, node) in scores.iter_mut().zip(nodes) {
                *slot = self.score(state, pod, node)?;
            }
            return Ok(());
        }
        // Counts per domain position, looked up once per cycle.
        let counts: Vec<Vec<i64>> = s
            .domain_values
            .iter()
            .zip(&s.pod_counts)
            .map(|(values, counts)| {
                values
                    .iter()
                    .map(|v| counts.get(v).copied().unwrap_or(0))
                    .collect()
            })
            .collect();
        let namespace = pod_namespace(pod);
        let n = s.constraints.len();
        for (k, (slot, node)) in scores.iter_mut().zip(nodes).enumerate() {
            if s.node_ignored[k] {
                *slot = 0;
                continue;
            }
            let mut score = 0.0;
            for (i, c) in s.constraints.iter().enumerate() {
                let count = match s.node_domains[k * n + i] {
                    NO_DOMAIN => continue,
                    OWN_NODE if s.own_counts_kept[i] => s.own_counts[k * n + i],
                    OWN_NODE => count_pods_match_selector(&node.pods, &c.selector, namespace),
                    position => counts[i]
                        .get(position as usize)
                        .copied()
                        .unwrap_or_default(),
                };
                score += score_for_count(count, c.max_skew, s.normalizing_weights[i]);
            }
            *slot = score.round() as i64;
        }
        Ok(())
    }

    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let s = state.read::<PreScoreState>(PRE_SCORE_KEY).ok_or_else(|| {
            Status::error(format!(
                "reading {PRE_SCORE_KEY:?} from cycleState: not found"
            ))
        })?;
        if s.ignored_nodes.contains(node.name()) {
            return Ok(0);
        }
        let mut score = 0.0;
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = node.labels().get(&c.topology_key) else {
                continue;
            };
            let count = if c.topology_key == HOSTNAME_LABEL {
                count_pods_match_selector(&node.pods, &c.selector, pod_namespace(pod))
            } else {
                s.pod_counts[i].get(value).copied().unwrap_or(0)
            };
            score += score_for_count(count, c.max_skew, s.normalizing_weights[i]);
        }
        Ok(score.round() as i64)
    }

    fn normalize_score(
        &self,
        state: &CycleState,
        _pod: &Pod,
        nodes: &[&NodeInfo],
        scores: &mut [i64],
    ) -> Status {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_KEY) else {
            return Status::success();
        };
        let (mut min_score, mut max_score) = (i64::MAX, 0i64);
        let ignored: Vec<bool> = if s.resolved_for(nodes) {
            s.node_ignored.clone()
        } else {
            nodes
                .iter()
                .map(|n| s.ignored_nodes.contains(n.name()))
                .collect()
        };
        for (score, ignored) in scores.iter().zip(&ignored) {
            if *ignored {
                continue;
            }
            min_score = min_score.min(*score);
            max_score = max_score.max(*score);
        }
        for (score, ignored) in scores.iter_mut().zip(&ignored) {
            if *ignored {
                *score = 0;
            } else if max_score == 0 {
                *score = MAX_NODE_SCORE;
            } else {
                let normalized = i128::from(MAX_NODE_SCORE)
                    * (i128::from(max_score) + i128::from(min_score) - i128::from(*score))
                    / i128::from(max_score);
                *score =
                    i64::try_from(normalized.clamp(0, i128::from(MAX_NODE_SCORE))).unwrap_or(0);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests;
