//! RemovePodsViolatingTopologySpreadConstraint (upstream
//! `removepodsviolatingtopologyspreadconstraint`): for every distinct
//! topology spread constraint of the selected pods of a namespace, count the
//! matching pods per topology domain; when the largest and smallest domains
//! differ by more than maxSkew, move pods from the largest domains to the
//! smallest, never taking a domain below the ideal average nor raising one
//! above it, taking first the pods that would fit on a node of a domain
//! under the average, and evict them.
//!
//! Order: upstream visits namespaces, builds domains and collects the pods
//! to evict in Go maps (random order), and sorts domains with an unstable
//! sort. Here namespaces go by name, domains of equal size keep the order
//! of the eligible nodes' listing, and pods are evicted in the order they
//! were chosen. This shows only when two domains tie for largest or
//! smallest (which one gives or receives first) or when an eviction limit
//! is reached (which chosen pods are evicted).

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::{Node, Pod, Toleration, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use ksim_core::node_affinity::RequiredNodeAffinity;
use ksim_core::selector::{LabelSelectorRequirements, NilableSelector, Requirement};
use ksim_core::topology_spread::{NodeInclusionPolicies, SpreadConstraint};
use serde::Deserialize;

use crate::framework::{
    ArgsError, BalancePlugin, ClusterSnapshot, EvictionError, EvictionRequest, PluginStatus,
    PodEvictor, decode_args,
};
use crate::nodeutil::{NodeFitChecker, active_pods_on_node};
use crate::podutil::{self, Namespaces, pod_key};

/// The plugin's name in the policy.
pub const PLUGIN_NAME: &str = "RemovePodsViolatingTopologySpreadConstraint";

const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";

/// Upstream `RemovePodsViolatingTopologySpreadConstraintArgs`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RemovePodsViolatingTopologySpreadConstraintArgs {
    /// Namespaces to include or exclude (one of the two).
    pub namespaces: Option<Namespaces>,
    /// Only pods with these labels are considered.
    pub label_selector: Option<LabelSelector>,
    /// The `whenUnsatisfiable` values balanced (default `[DoNotSchedule]`).
    pub constraints: Vec<String>,
    /// Only evict pods that fit a node of a domain under the average
    /// (default true).
    pub topology_balance_node_fit: Option<bool>,
}

impl RemovePodsViolatingTopologySpreadConstraintArgs {
    /// Upstream's defaults and `ValidateRemovePodsViolatingTopologySpreadConstraintArgs`.
    fn validated(mut self) -> Result<(Self, Option<LabelSelectorRequirements>), ArgsError> {
        if let Some(namespaces) = &self.namespaces {
            namespaces.validate("namespaces")?;
        }
        let selector = match &self.label_selector {
            Some(selector) => Some(
                LabelSelectorRequirements::from_label_selector(selector).map_err(|error| {
                    ArgsError::new(
                        "labelSelector",
                        format!("failed to get label selectors from strategy's params: {error}"),
                    )
                })?,
            ),
            None => None,
        };
        for (index, constraint) in self.constraints.iter().enumerate() {
            if constraint != DO_NOT_SCHEDULE && constraint != SCHEDULE_ANYWAY {
                return Err(ArgsError::new(
                    format!("constraints[{index}]"),
                    format!("constraint {constraint} is not one of [DoNotSchedule ScheduleAnyway]"),
                ));
            }
        }
        if self.constraints.is_empty() {
            self.constraints.push(DO_NOT_SCHEDULE.to_string());
        }
        Ok((self, selector))
    }
}

/// The RemovePodsViolatingTopologySpreadConstraint balance plugin.
#[derive(Debug)]
pub struct RemovePodsViolatingTopologySpreadConstraint {
    args: RemovePodsViolatingTopologySpreadConstraintArgs,
    label_selector: Option<LabelSelectorRequirements>,
}

impl RemovePodsViolatingTopologySpreadConstraint {
    /// Builds the plugin from args (defaulted, then validated).
    pub fn new(args: RemovePodsViolatingTopologySpreadConstraintArgs) -> Result<Self, ArgsError> {
        let (args, label_selector) = args.validated()?;
        Ok(RemovePodsViolatingTopologySpreadConstraint {
            args,
            label_selector,
        })
    }

    /// The registry's factory.
    pub fn factory(args: Option<&serde_json::Value>) -> Result<Box<dyn BalancePlugin>, ArgsError> {
        Ok(Box::new(Self::new(decode_args(args)?)?))
    }

    /// The plugin's pod filter: namespaces, labelSelector, the evictor's filter.
    fn selects(&self, evictor: &dyn PodEvictor, pod: &Pod) -> bool {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        if self
            .args
            .namespaces
            .as_ref()
            .is_some_and(|ns| !ns.admits(namespace))
        {
            return false;
        }
        if let Some(selector) = &self.label_selector {
            let empty = BTreeMap::new();
            if !selector.matches(pod.metadata.labels.as_ref().unwrap_or(&empty)) {
                return false;
            }
        }
        evictor.filter(pod)
    }
}

/// A topology spread constraint as the plugin compares them (upstream's
/// internal `topologySpreadConstraint`): the selector merged with the
/// pod's matchLabelKeys values, and the node inclusion policies with the
/// pod's node affinity and tolerations they need. It is built from
/// ksim-core's [`SpreadConstraint`] but is not one: the namespace's pods'
/// constraints are deduplicated by these fields (whenUnsatisfiable and
/// minDomains do not tell two apart, the pod's node affinity and
/// tolerations do), as upstream's.
#[derive(Debug, Clone, PartialEq)]
struct Constraint {
    max_skew: i32,
    topology_key: String,
    /// None: a constraint without labelSelector, which selects nothing.
    selector: Option<LabelSelectorRequirements>,
    policies: NodeInclusionPolicies,
    pod_node_affinity: RequiredNodeAffinity,
    pod_tolerations: Vec<Toleration>,
}

impl Constraint {
    fn new(constraint: &TopologySpreadConstraint, pod: &Pod) -> Result<Self, ksim_core::Error> {
        let parsed = SpreadConstraint::parse(constraint, pod.metadata.labels.as_ref())?;
        let policies = parsed.policies;
        Ok(Constraint {
            max_skew: parsed.max_skew,
            topology_key: parsed.topology_key,
            selector: parsed.selector,
            policies,
            pod_node_affinity: if policies.honor_node_affinity {
                RequiredNodeAffinity::from_pod(pod)
            } else {
                RequiredNodeAffinity::default()
            },
            pod_tolerations: if policies.honor_node_taints {
                pod.spec
                    .as_ref()
                    .and_then(|spec| spec.tolerations.clone())
                    .unwrap_or_default()
            } else {
                Vec::new()
            },
        })
    }

    fn selects(&self, pod: &Pod) -> bool {
        self.selector.selects(podutil::labels(pod))
    }

    /// Upstream `matchNodeInclusionPolicies`.
    fn includes_node(&self, node: &Node) -> bool {
        self.policies
            .includes_node(node, &self.pod_node_affinity, &self.pod_tolerations)
    }

    /// Whether every node with the key is included whatever its labels
    /// or taints (so eligible nodes can be shared per topology key).
    fn includes_every_node(&self) -> bool {
        self.policies.includes_every_node(&self.pod_node_affinity)
    }
}

/// One topology domain and the constraint's pods in it.
struct Domain<'a> {
    value: &'a str,
    pods: Vec<&'a Pod>,
}

/// The nodes a constraint counts, grouped by domain: the domains in the
/// order their first node is listed, and each domain's nodes in order.
struct EligibleNodes<'a> {
    domains: Vec<&'a str>,
    nodes_by_domain: HashMap<&'a str, Vec<&'a Node>>,
}

impl<'a> EligibleNodes<'a> {
    fn compute(nodes: &[&'a Node], constraint: &Constraint) -> Self {
        let mut domains = Vec::new();
        let mut nodes_by_domain: HashMap<&str, Vec<&Node>> = HashMap::new();
        for node in nodes {
            let Some(value) = node_label(node, &constraint.topology_key) else {
                continue;
            };
            if !constraint.includes_node(node) {
                continue;
            }
            nodes_by_domain
                .entry(value)
                .or_insert_with(|| {
                    domains.push(value);
                    Vec::new()
                })
                .push(*node);
        }
        EligibleNodes {
            domains,
            nodes_by_domain,
        }
    }
}

fn node_label<'n>(node: &'n Node, key: &str) -> Option<&'n str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(key))
        .map(String::as_str)
}

/// A namespace's pods by label, so that a constraint whose selector
/// requires one label value only looks at the pods carrying it.
struct LabelIndex<'a> {
    by_label: HashMap<(&'a str, &'a str), Vec<&'a Pod>>,
}

impl<'a> LabelIndex<'a> {
    fn new(pods: &[&'a Pod]) -> Self {
        let mut by_label: HashMap<(&str, &str), Vec<&Pod>> = HashMap::new();
        for pod in pods {
            for (key, value) in pod.metadata.labels.iter().flatten() {
                by_label
                    .entry((key.as_str(), value.as_str()))
                    .or_default()
                    .push(*pod);
            }
        }
        LabelIndex { by_label }
    }

    /// The pods the constraint may select, in listing order: those with
    /// the value of its first single-value `In` requirement, else all.
    fn candidates<'s>(&'s self, pods: &'s [&'a Pod], constraint: &'s Constraint) -> &'s [&'a Pod] {
        let required = constraint.selector.as_ref().and_then(|selector| {
            selector
                .requirements
                .iter()
                .find_map(|requirement| match requirement {
                    Requirement::In(key, values) if values.len() == 1 => {
                        Some((key.as_str(), values[0].as_str()))
                    }
                    _ => None,
                })
        });
        match required {
            Some(label) => self
                .by_label
                .get(&label)
                .map(Vec::as_slice)
                .unwrap_or_default(),
            None => pods,
        }
    }
}

/// The pods chosen for eviction, in the order they were chosen.
#[derive(Default)]
struct Chosen<'a> {
    pods: Vec<&'a Pod>,
    seen: HashSet<*const Pod>,
}

impl<'a> Chosen<'a> {
    fn insert(&mut self, pod: &'a Pod) {
        if self.seen.insert(pod as *const Pod) {
            self.pods.push(pod);
        }
    }
}

impl BalancePlugin for RemovePodsViolatingTopologySpreadConstraint {
    fn name(&self) -> &'static str {
        PLUGIN_NAME
    }

    fn balance(
        &self,
        snapshot: &ClusterSnapshot,
        nodes: &[&Node],
        evictor: &mut dyn PodEvictor,
    ) -> PluginStatus {
        tracing::debug!("Processing namespaces for topology spread constraints");
        let node_map: HashMap<&str, &Node> = nodes
            .iter()
            .map(|node| (node.metadata.name.as_deref().unwrap_or_default(), *node))
            .collect();
        let mut namespaced: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
        for node in nodes {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            for pod in active_pods_on_node(snapshot, name) {
                if self.selects(&*evictor, pod) {
                    namespaced
                        .entry(pod.metadata.namespace.as_deref().unwrap_or_default())
                        .or_default()
                        .push(pod);
                }
            }
        }

        let fit = NodeFitChecker::new(snapshot);
        let node_fit = self.args.topology_balance_node_fit.unwrap_or(true);
        let mut chosen = Chosen::default();
        // Eligible nodes per topology key for constraints that include
        // every node having the key.
        let mut shared_eligible: HashMap<String, EligibleNodes<'_>> = HashMap::new();
        for (namespace, pods) in &namespaced {
            tracing::trace!(
                namespace,
                "Processing namespace for topology spread constraints"
            );
            let constraints = self.namespace_constraints(pods);
            if constraints.is_empty() {
                continue;
            }
            let label_index = LabelIndex::new(pods);
            for constraint in &constraints {
                let owned;
                let eligible = if constraint.includes_every_node() {
                    shared_eligible
                        .entry(constraint.topology_key.clone())
                        .or_insert_with(|| EligibleNodes::compute(nodes, constraint))
                } else {
                    owned = EligibleNodes::compute(nodes, constraint);
                    &owned
                };
                let mut index: HashMap<&str, usize> = HashMap::new();
                let mut domains: Vec<Domain<'_>> = Vec::new();
                for value in &eligible.domains {
                    index.entry(value).or_insert_with(|| {
                        domains.push(Domain {
                            value,
                            pods: Vec::new(),
                        });
                        domains.len() - 1
                    });
                }
                let mut sum_pods = 0usize;
                for pod in label_index.candidates(pods, constraint) {
                    if podutil::is_terminating(pod) || !constraint.selects(pod) {
                        continue;
                    }
                    let Some(node) = node_map.get(podutil::node_name(pod)) else {
                        continue;
                    };
                    let Some(value) = node_label(node, &constraint.topology_key) else {
                        continue;
                    };
                    let slot = *index.entry(value).or_insert_with(|| {
                        domains.push(Domain {
                            value,
                            pods: Vec::new(),
                        });
                        domains.len() - 1
                    });
                    domains[slot].pods.push(pod);
                    sum_pods += 1;
                }
                if topology_is_balanced(&domains, constraint.max_skew) {
                    tracing::debug!(
                        namespace,
                        topology_key = %constraint.topology_key,
                        "Skipping topology constraint because it is already balanced"
                    );
                    continue;
                }
                balance_domains(
                    &mut chosen,
                    constraint,
                    domains,
                    sum_pods,
                    eligible,
                    &*evictor,
                    &fit,
                    node_fit,
                );
            }
        }

        let mut node_limit_exceeded: HashSet<&str> = HashSet::new();
        for pod in chosen.pods {
            let node = podutil::node_name(pod);
            if node_limit_exceeded.contains(node) || !self.selects(&*evictor, pod) {
                continue;
            }
            if !evictor.pre_eviction_filter(pod) {
                continue;
            }
            let request = EvictionRequest {
                strategy: PLUGIN_NAME,
                reason: "",
            };
            match evictor.evict(pod, request) {
                Ok(()) => {}
                Err(EvictionError::NodeLimitReached) => {
                    node_limit_exceeded.insert(node);
                }
                Err(EvictionError::TotalLimitReached) => return PluginStatus::Success,
                Err(error) => {
                    tracing::warn!(pod = %pod_key(pod), error = %error, "eviction failed");
                }
            }
        }
        PluginStatus::Success
    }
}

impl RemovePodsViolatingTopologySpreadConstraint {
    /// The distinct allowed constraints of a namespace's pods, in the
    /// order they are first seen.
    fn namespace_constraints(&self, pods: &[&Pod]) -> Vec<Constraint> {
        let mut constraints: Vec<Constraint> = Vec::new();
        // Pods of one controller usually share their spec: a pod whose
        // constraints, labels and node constraints equal those of the first
        // pod seen of its controller adds no new constraint.
        let mut first_of_owner: HashMap<&str, &Pod> = HashMap::new();
        for pod in pods {
            if let Some(owner) = controller_uid(pod) {
                match first_of_owner.get(owner) {
                    Some(first) if same_spread_inputs(first, pod) => continue,
                    Some(_) => {}
                    None => {
                        first_of_owner.insert(owner, pod);
                    }
                }
            }
            let spread = pod
                .spec
                .as_ref()
                .and_then(|spec| spec.topology_spread_constraints.as_deref())
                .unwrap_or_default();
            for raw in spread {
                if !self.args.constraints.contains(&raw.when_unsatisfiable) {
                    continue;
                }
                match Constraint::new(raw, pod) {
                    Ok(constraint) => {
                        if !constraints.contains(&constraint) {
                            constraints.push(constraint);
                        }
                    }
                    Err(error) => {
                        tracing::error!(
                            pod = %pod_key(pod),
                            error = %error,
                            "cannot process topology spread constraint"
                        );
                    }
                }
            }
        }
        constraints
    }
}

/// The uid of the pod's controller, if any.
fn controller_uid(pod: &Pod) -> Option<&str> {
    ksim_core::status::controller_of(&pod.metadata).map(|owner| owner.uid.as_str())
}

/// Whether two pods would yield the same constraints: same spread
/// constraints, labels, nodeSelector, affinity and tolerations.
fn same_spread_inputs(a: &Pod, b: &Pod) -> bool {
    let (Some(sa), Some(sb)) = (a.spec.as_ref(), b.spec.as_ref()) else {
        return false;
    };
    sa.topology_spread_constraints == sb.topology_spread_constraints
        && a.metadata.labels == b.metadata.labels
        && sa.node_selector == sb.node_selector
        && sa.affinity == sb.affinity
        && sa.tolerations == sb.tolerations
}

/// Upstream `topologyIsBalanced`: the largest and smallest domains differ
/// by at most maxSkew.
fn topology_is_balanced(domains: &[Domain<'_>], max_skew: i32) -> bool {
    let sizes = domains.iter().map(|domain| domain.pods.len());
    match (sizes.clone().min(), sizes.max()) {
        (Some(min), Some(max)) => {
            i64::try_from(max - min).unwrap_or(i64::MAX) <= i64::from(max_skew)
        }
        _ => true,
    }
}

/// Whether the pod has a nodeSelector or node affinity.
fn has_selector_or_affinity(pod: &Pod) -> bool {
    pod.spec.as_ref().is_some_and(|spec| {
        spec.node_selector.is_some()
            || spec
                .affinity
                .as_ref()
                .is_some_and(|affinity| affinity.node_affinity.is_some())
    })
}

/// Upstream `sortDomains`: pods within each domain ordered non-evictable
/// first, then pods with a nodeSelector or node affinity, each group by
/// ascending priority (pods are taken from the end); domains by ascending
/// size (equal sizes keep their order).
fn sort_domains(domains: &mut [Domain<'_>], evictor: &dyn PodEvictor) {
    for domain in domains.iter_mut() {
        domain.pods.sort_by_cached_key(|pod| {
            (
                evictor.filter(pod),
                !has_selector_or_affinity(pod),
                podutil::priority(pod),
            )
        });
    }
    domains.sort_by_key(|domain| domain.pods.len());
}

/// Pods of one workload share requests and node constraints, so whether
/// they fit one of the nodes under the average is answered once: the first
/// fitting node is remembered per signature, and a pod fits another node
/// when that first node is not its own (else the search goes on past it).
#[derive(Default)]
struct FirstFits<'s> {
    by_signature: Vec<(FitSignature<'s>, Option<usize>)>,
}

/// What decides whether a pod without inter-pod anti-affinity fits a node.
#[derive(PartialEq)]
struct FitSignature<'s> {
    requests: std::borrow::Cow<'s, ksim_core::resources::ResourceList>,
    affinity: RequiredNodeAffinity,
    tolerations: Vec<Toleration>,
}

impl<'s> FirstFits<'s> {
    fn fits_other_node(&mut self, fit: &NodeFitChecker<'s>, pod: &Pod, nodes: &[&Node]) -> bool {
        let spec = pod.spec.as_ref();
        let has_anti_affinity = spec
            .and_then(|spec| spec.affinity.as_ref())
            .is_some_and(|affinity| affinity.pod_anti_affinity.is_some());
        if has_anti_affinity {
            return fit.pod_fits_any_other_node(pod, nodes);
        }
        let signature = FitSignature {
            requests: fit.snapshot().pod_requests(pod),
            affinity: RequiredNodeAffinity::from_pod(pod),
            tolerations: spec
                .and_then(|spec| spec.tolerations.clone())
                .unwrap_or_default(),
        };
        let first = match self.by_signature.iter().find(|(s, _)| *s == signature) {
            Some((_, first)) => *first,
            None => {
                let first = nodes
                    .iter()
                    .position(|node| fit.node_fit_ignoring_own_node(pod, node).is_ok());
                self.by_signature.push((signature, first));
                first
            }
        };
        let Some(first) = first else {
            return false;
        };
        let own = podutil::node_name(pod);
        if nodes[first].metadata.name.as_deref() != Some(own) {
            return true;
        }
        fit.pod_fits_any_other_node(pod, &nodes[first + 1..])
    }
}

/// Upstream `balanceDomains`.
#[allow(clippy::too_many_arguments)] // upstream's parameters, one by one
fn balance_domains<'a>(
    chosen: &mut Chosen<'a>,
    constraint: &Constraint,
    mut domains: Vec<Domain<'a>>,
    sum_pods: usize,
    eligible: &EligibleNodes<'a>,
    evictor: &dyn PodEvictor,
    fit: &NodeFitChecker<'_>,
    node_fit: bool,
) {
    if domains.is_empty() {
        return;
    }
    let ideal_avg = sum_pods as f64 / domains.len() as f64;
    sort_domains(&mut domains, evictor);

    // Nodes of the domains under the ideal average, where moved pods should go.
    let nodes_by_domain = &eligible.nodes_by_domain;
    let below_avg_nodes: Vec<&Node> = domains
        .iter()
        .filter(|domain| (domain.pods.len() as f64) < ideal_avg)
        .flat_map(|domain| {
            nodes_by_domain
                .get(domain.value)
                .map(Vec::as_slice)
                .unwrap_or_default()
        })
        .copied()
        .collect();
    let mut fits_cache: HashMap<*const Pod, bool> = HashMap::new();
    let mut first_fits = FirstFits::default();
    let mut fits_elsewhere = |pod: &Pod| -> bool {
        *fits_cache
            .entry(pod as *const Pod)
            .or_insert_with(|| first_fits.fits_other_node(fit, pod, &below_avg_nodes))
    };

    let max_skew = f64::from(constraint.max_skew);
    let mut i = 0usize;
    let mut j = domains.len() - 1;
    while i < j {
        if domains[j].pods.len() as f64 <= ideal_avg {
            j -= 1;
        }
        let skew = domains[j].pods.len() as f64 - domains[i].pods.len() as f64;
        if skew <= max_skew {
            i += 1;
            continue;
        }
        let above_avg = (domains[j].pods.len() as f64 - ideal_avg).ceil();
        let below_avg = (ideal_avg - domains[i].pods.len() as f64).ceil();
        let half_skew = ((skew - max_skew) / 2.0).ceil();
        let move_pods = above_avg.min(below_avg).min(half_skew);
        if move_pods <= 0.0 {
            i += 1;
            continue;
        }
        let move_pods = (move_pods as usize).min(domains[j].pods.len());
        // Pods that fit a node under the average go last, so they are taken first.
        let pods = std::mem::take(&mut domains[j].pods);
        let mut keyed: Vec<(bool, &Pod)> = pods
            .into_iter()
            .map(|pod| (fits_elsewhere(pod), pod))
            .collect();
        keyed.sort_by_key(|(fits, _)| *fits);
        domains[j].pods = keyed.into_iter().map(|(_, pod)| pod).collect();
        let split = domains[j].pods.len() - move_pods;
        let moved = domains[j].pods.split_off(split);
        for pod in &moved {
            // Pods that fit nowhere else still count as moved, as upstream.
            if node_fit && !fits_elsewhere(pod) {
                tracing::debug!(
                    pod = %pod_key(pod),
                    "ignoring pod for eviction as it does not fit on any other node"
                );
                continue;
            }
            chosen.insert(pod);
        }
        domains[i].pods.extend(moved);
    }
}

#[cfg(test)]
mod tests;
