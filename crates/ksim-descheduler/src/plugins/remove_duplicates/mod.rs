//! RemoveDuplicates (upstream `removeduplicates`): pods of the same owner,
//! namespace and container images on one node are duplicates; for each
//! owner, the pods over the upper average (the owner's pods divided by the
//! nodes its pods could run on, rounded up) are evicted from each node.
//!
//! Order: upstream walks owners and their nodes in Go map order (random);
//! here owners go in the order their first duplicate is met and nodes in
//! listing order. This only shows when an eviction limit stops the plugin
//! part way: which owners and nodes lose pods first.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Node, NodeSelector, Pod, Toleration};
use serde::Deserialize;

use crate::framework::{
    ArgsError, BalancePlugin, ClusterSnapshot, EvictionError, EvictionRequest, PluginStatus,
    PodEvictor, decode_args,
};
use crate::nodeutil::{active_pods_on_node, pod_matches_node_constraints};
use crate::podutil::Namespaces;
use crate::podutil::pod_key;

/// The plugin's name in the policy.
pub const PLUGIN_NAME: &str = "RemoveDuplicates";

/// Upstream `RemoveDuplicatesArgs`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RemoveDuplicatesArgs {
    /// Namespaces to include or exclude (one of the two).
    pub namespaces: Option<Namespaces>,
    /// Pods owned by one of these kinds are never duplicates.
    pub exclude_owner_kinds: Vec<String>,
}

impl RemoveDuplicatesArgs {
    /// Upstream `ValidateRemoveDuplicatesArgs`.
    pub fn validate(&self) -> Result<(), ArgsError> {
        match &self.namespaces {
            Some(namespaces) => namespaces.validate("namespaces"),
            None => Ok(()),
        }
    }
}

/// The RemoveDuplicates balance plugin.
#[derive(Debug)]
pub struct RemoveDuplicates {
    args: RemoveDuplicatesArgs,
}

impl RemoveDuplicates {
    /// Builds the plugin from validated args.
    pub fn new(args: RemoveDuplicatesArgs) -> Result<Self, ArgsError> {
        args.validate()?;
        Ok(RemoveDuplicates { args })
    }

    /// The registry's factory.
    pub fn factory(args: Option<&serde_json::Value>) -> Result<Box<dyn BalancePlugin>, ArgsError> {
        Ok(Box::new(Self::new(decode_args(args)?)?))
    }

    fn selects(&self, evictor: &dyn PodEvictor, pod: &Pod) -> bool {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        self.args
            .namespaces
            .as_ref()
            .is_none_or(|ns| ns.admits(namespace))
            && evictor.filter(pod)
            && evictor.pre_eviction_filter(pod)
    }
}

/// An owner of duplicates: namespace, owner kind and name, and the pod's
/// sorted images joined with `#` (upstream `podOwner`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct OwnerKey {
    namespace: String,
    kind: String,
    name: String,
    images: String,
}

/// The duplicates of one owner, by node, in discovery order.
#[derive(Default)]
struct Duplicates<'a> {
    /// (node index, the duplicate pods on it beyond the first).
    by_node: Vec<(usize, Vec<&'a Pod>)>,
}

/// What makes pods land on the same nodes: tolerations, required node
/// affinity and nodeSelector (upstream compares these to find distinct pods).
#[derive(PartialEq)]
struct PlacementConstraints<'a> {
    tolerations: Option<&'a Vec<Toleration>>,
    required_affinity: Option<&'a NodeSelector>,
    node_selector: Option<&'a BTreeMap<String, String>>,
}

impl<'a> PlacementConstraints<'a> {
    fn of(pod: &'a Pod) -> Self {
        let spec = pod.spec.as_ref();
        PlacementConstraints {
            tolerations: spec
                .and_then(|s| s.tolerations.as_ref())
                .filter(|t| !t.is_empty()),
            required_affinity: spec
                .and_then(|s| s.affinity.as_ref())
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
            node_selector: spec
                .and_then(|s| s.node_selector.as_ref())
                .filter(|s| !s.is_empty()),
        }
    }
}

/// Caches, per distinct set of placement constraints, the nodes a pod with
/// them could land on (untolerated NoSchedule/NoExecute taints and node
/// affinity; resources are not considered, as upstream).
struct FeasibleNodes<'a> {
    nodes: &'a [&'a Node],
    cache: Vec<(PlacementConstraints<'a>, Vec<usize>)>,
}

impl<'a> FeasibleNodes<'a> {
    fn for_pod(&mut self, pod: &'a Pod) -> &[usize] {
        let constraints = PlacementConstraints::of(pod);
        let position = match self.cache.iter().position(|(c, _)| *c == constraints) {
            Some(position) => position,
            None => {
                let matching = self
                    .nodes
                    .iter()
                    .enumerate()
                    .filter(|(_, node)| pod_matches_node_constraints(pod, node))
                    .map(|(index, _)| index)
                    .collect();
                self.cache.push((constraints, matching));
                self.cache.len() - 1
            }
        };
        &self.cache[position].1
    }
}

impl BalancePlugin for RemoveDuplicates {
    fn name(&self) -> &'static str {
        PLUGIN_NAME
    }

    fn balance(
        &self,
        snapshot: &ClusterSnapshot,
        nodes: &[&Node],
        evictor: &mut dyn PodEvictor,
    ) -> PluginStatus {
        let mut owner_index: HashMap<OwnerKey, usize> = HashMap::new();
        let mut owners: Vec<(OwnerKey, u32, Duplicates<'_>)> = Vec::new();
        for (node_index, node) in nodes.iter().enumerate() {
            let node_name = node.metadata.name.as_deref().unwrap_or_default();
            tracing::debug!(node = node_name, "Processing node");
            // The container keys of pods seen on this node, by their first key.
            let mut seen: HashMap<String, Vec<Vec<String>>> = HashMap::new();
            for pod in active_pods_on_node(snapshot, node_name) {
                if !self.selects(&*evictor, pod) {
                    continue;
                }
                let owner_refs = pod.metadata.owner_references.as_deref().unwrap_or_default();
                if owner_refs.is_empty()
                    || owner_refs
                        .iter()
                        .any(|owner| self.args.exclude_owner_kinds.contains(&owner.kind))
                {
                    continue;
                }
                let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
                let mut images: Vec<&str> = pod
                    .spec
                    .as_ref()
                    .map(|spec| {
                        spec.containers
                            .iter()
                            .map(|c| c.image.as_deref().unwrap_or_default())
                            .collect()
                    })
                    .unwrap_or_default();
                images.sort_unstable();
                let images_hash = images.join("#");
                let mut keys = Vec::with_capacity(owner_refs.len() * images.len());
                let mut pod_owners = Vec::with_capacity(owner_refs.len());
                for owner in owner_refs {
                    let key = OwnerKey {
                        namespace: namespace.to_string(),
                        kind: owner.kind.clone(),
                        name: owner.name.clone(),
                        images: images_hash.clone(),
                    };
                    let index = *owner_index.entry(key.clone()).or_insert_with(|| {
                        owners.push((key, 0, Duplicates::default()));
                        owners.len() - 1
                    });
                    owners[index].1 += 1;
                    pod_owners.push(index);
                    for image in &images {
                        keys.push(format!("{namespace}/{}/{}/{image}", owner.kind, owner.name));
                    }
                }
                keys.sort_unstable();
                let Some(first) = keys.first().cloned() else {
                    continue;
                };
                let known = seen.entry(first).or_default();
                if known.contains(&keys) {
                    tracing::debug!(pod = %pod_key(pod), "Duplicate found");
                    for index in pod_owners {
                        let by_node = &mut owners[index].2.by_node;
                        match by_node.last_mut() {
                            Some((last, pods)) if *last == node_index => pods.push(pod),
                            _ => by_node.push((node_index, vec![pod])),
                        }
                    }
                } else {
                    known.push(keys);
                }
            }
        }

        let mut feasible = FeasibleNodes {
            nodes,
            cache: Vec::new(),
        };
        let mut targeted = vec![false; nodes.len()];
        for (owner, occurrences, duplicates) in &owners {
            if duplicates.by_node.is_empty() {
                continue;
            }
            // Upstream's target nodes: the union of the nodes each distinct
            // duplicate could land on, counting only pods with at least two.
            targeted.iter_mut().for_each(|t| *t = false);
            let mut target_count = 0usize;
            let mut seen_constraints: Vec<PlacementConstraints<'_>> = Vec::new();
            for pod in duplicates.by_node.iter().flat_map(|(_, pods)| pods) {
                let constraints = PlacementConstraints::of(pod);
                if seen_constraints.contains(&constraints) {
                    continue;
                }
                seen_constraints.push(constraints);
                let matching = feasible.for_pod(pod);
                if matching.len() > 1 {
                    for &index in matching {
                        if !targeted[index] {
                            targeted[index] = true;
                            target_count += 1;
                        }
                    }
                }
            }
            tracing::debug!(
                owner = ?owner,
                from = nodes.len(),
                to = target_count,
                "Adjusting feasible nodes"
            );
            if target_count < 2 {
                tracing::debug!(
                    owner = ?owner,
                    "Less than two feasible nodes for duplicates to land, skipping eviction"
                );
                continue;
            }
            let upper_avg = (*occurrences as usize).div_ceil(target_count);
            'nodes: for (node_index, pods) in &duplicates.by_node {
                tracing::debug!(
                    node = nodes[*node_index].metadata.name.as_deref().unwrap_or_default(),
                    owner = ?owner,
                    avg = upper_avg,
                    "Average occurrence per node"
                );
                if pods.len() < upper_avg {
                    continue;
                }
                for pod in &pods[upper_avg.saturating_sub(1)..] {
                    let request = EvictionRequest {
                        strategy: PLUGIN_NAME,
                        reason: "",
                    };
                    match evictor.evict(pod, request) {
                        Ok(()) => {}
                        Err(EvictionError::NodeLimitReached) => continue 'nodes,
                        Err(EvictionError::TotalLimitReached) => return PluginStatus::Success,
                        Err(error) => {
                            tracing::warn!(pod = %pod_key(pod), error = %error, "eviction failed");
                        }
                    }
                }
            }
        }
        PluginStatus::Success
    }
}

#[cfg(test)]
mod tests;
