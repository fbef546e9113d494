//! Scale-down decisions, pure code over the scheduler's `Snapshot`: a node's
//! utilization (requested cpu and memory over allocatable, the larger), the
//! pods a drain would move and the rules that keep a node (upstream's
//! blocking pods: `safe-to-evict: "false"`, no controller, local storage,
//! kube-system without a budget, a budget with no disruption left), and
//! whether each moved pod fits another node (the scheduler's own filters).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use ksim_scheduler::framework::{
    DisruptionBudget, NodeInfo, Profile, Snapshot, run_filter_plugins, run_pre_filter,
};

/// The node annotation that keeps a node from scale-down.
pub const SCALE_DOWN_DISABLED_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/scale-down-disabled";
/// The pod annotation that says whether a pod may be evicted.
pub const SAFE_TO_EVICT_ANNOTATION: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
/// The pod annotation listing local volumes that may be dropped.
pub const SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes";

/// Why a pod keeps its node (upstream's `BlockingPodReason`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockingReason {
    NotSafeToEvictAnnotation,
    NotReplicated,
    LocalStorageRequested,
    UnmovableKubeSystemPod,
    NotEnoughPdb,
}

impl BlockingReason {
    /// The reason's name, as upstream reports it.
    pub fn name(&self) -> &'static str {
        match self {
            BlockingReason::NotSafeToEvictAnnotation => "NotSafeToEvictAnnotation",
            BlockingReason::NotReplicated => "NotReplicated",
            BlockingReason::LocalStorageRequested => "LocalStorageRequested",
            BlockingReason::UnmovableKubeSystemPod => "UnmovableKubeSystemPod",
            BlockingReason::NotEnoughPdb => "NotEnoughPdb",
        }
    }
}

/// Why a node stays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unremovable {
    /// Annotated scale-down-disabled.
    ScaleDownDisabledAnnotation,
    /// Utilization at or above the threshold.
    NotUnderutilized,
    /// A pod blocks it.
    BlockedByPod { pod: String, reason: BlockingReason },
    /// A pod would fit no other node.
    NoPlaceToMovePods { pod: String },
}

impl std::fmt::Display for Unremovable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unremovable::ScaleDownDisabledAnnotation => f.write_str("ScaleDownDisabledAnnotation"),
            Unremovable::NotUnderutilized => f.write_str("NotUnderutilized"),
            Unremovable::BlockedByPod { pod, reason } => {
                write!(f, "BlockedByPod: {pod} ({})", reason.name())
            }
            Unremovable::NoPlaceToMovePods { pod } => write!(f, "NoPlaceToMovePods: {pod}"),
        }
    }
}

/// The node's utilization: the larger of requested cpu over allocatable cpu
/// and requested memory over allocatable memory (mirror pods excluded).
pub fn utilization(node: &NodeInfo) -> f64 {
    let ratio = |requested: i64, allocatable: i64| {
        if allocatable <= 0 {
            0.0
        } else {
            requested as f64 / allocatable as f64
        }
    };
    let mut cpu = node.requested.milli_cpu;
    let mut memory = node.requested.memory;
    for pod in &node.pods {
        if is_mirror(&pod.pod) {
            cpu -= pod.requests.milli_cpu;
            memory -= pod.requests.memory;
        }
    }
    ratio(cpu, node.allocatable.milli_cpu).max(ratio(memory, node.allocatable.memory))
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

use ksim_core::status::is_mirror_pod as is_mirror;

fn controller_kind(pod: &Pod) -> Option<&str> {
    ksim_core::status::controller_of(&pod.metadata).map(|r| r.kind.as_str())
}

use ksim_core::status::is_pod_terminal as is_terminal;

fn has_local_storage(pod: &Pod) -> bool {
    let allowed: HashSet<&str> = annotation(pod, SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION)
        .map(|v| v.split(',').map(str::trim).collect())
        .unwrap_or_default();
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .any(|v| {
            let local = v.host_path.is_some()
                || v.empty_dir
                    .as_ref()
                    .is_some_and(|e| e.medium.as_deref() != Some("Memory"));
            local && !allowed.contains(v.name.as_str())
        })
}

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The pods a drain of `node` evicts (DaemonSet and mirror pods stay, as
/// upstream by default), or the first pod that blocks it. `budgets` are
/// consumed as pods are counted.
pub fn pods_to_move(
    node: &NodeInfo,
    budgets: &mut [DisruptionBudget],
) -> Result<Vec<Arc<Pod>>, Unremovable> {
    let mut moved = Vec::new();
    for info in &node.pods {
        let pod = &info.pod;
        if is_terminal(pod) || is_mirror(pod) || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let kind = controller_kind(pod);
        if kind == Some("DaemonSet") {
            continue;
        }
        let blocked = |reason| Unremovable::BlockedByPod {
            pod: pod_key(pod),
            reason,
        };
        let safe = annotation(pod, SAFE_TO_EVICT_ANNOTATION);
        if safe == Some("false") {
            return Err(blocked(BlockingReason::NotSafeToEvictAnnotation));
        }
        let covering: Vec<usize> = budgets
            .iter()
            .enumerate()
            .filter(|(_, b)| b.covers(pod))
            .map(|(i, _)| i)
            .collect();
        if safe != Some("true") {
            if kind.is_none() {
                return Err(blocked(BlockingReason::NotReplicated));
            }
            if pod.metadata.namespace.as_deref() == Some("kube-system") && covering.is_empty() {
                return Err(blocked(BlockingReason::UnmovableKubeSystemPod));
            }
            if has_local_storage(pod) {
                return Err(blocked(BlockingReason::LocalStorageRequested));
            }
        }
        for &i in &covering {
            if budgets[i].disruptions_allowed < 1 {
                return Err(blocked(BlockingReason::NotEnoughPdb));
            }
        }
        for &i in &covering {
            budgets[i].disruptions_allowed -= 1;
        }
        moved.push(pod.clone());
    }
    Ok(moved)
}

/// A node of a group that scale-down may consider (Ready, not being deleted).
#[derive(Debug, Clone)]
pub struct Candidate {
    pub name: String,
    pub group: usize,
    /// Annotated `scale-down-disabled: "true"`.
    pub scale_down_disabled: bool,
}

/// A node scale-down can remove: its name, group and the pods to evict.
pub type Unneeded = (String, usize, Vec<Arc<Pod>>);

/// One scale-down scan: each candidate under the utilization threshold
/// whose pods may all move (budgets consumed across nodes) and fit other
/// nodes (`excluded` grows with the nodes found unneeded; the pods move in
/// `snapshot`); and why each other candidate stays. As upstream's
/// `--scale-down-non-empty-candidates-count`, at most `max_non_empty` nodes
/// with pods to move are found per scan (empty nodes are not limited).
pub fn find_unneeded(
    profile: &Profile,
    snapshot: &mut Snapshot,
    candidates: &[Candidate],
    excluded: &mut HashSet<String>,
    mut budgets: Vec<DisruptionBudget>,
    threshold: f64,
    max_non_empty: usize,
) -> (Vec<Unneeded>, BTreeMap<String, Unremovable>) {
    let mut unneeded = Vec::new();
    let mut reasons = BTreeMap::new();
    let mut non_empty = 0;
    // Where the last pod fit: the next search starts there (upstream's
    // predicate checker keeps this index across a scan), so pods fill
    // nodes in turn instead of each search walking the full ones again.
    let mut cursor = 0;
    for candidate in candidates {
        let name = &candidate.name;
        if candidate.scale_down_disabled {
            reasons.insert(name.clone(), Unremovable::ScaleDownDisabledAnnotation);
            continue;
        }
        let Some(info) = snapshot.get(name) else {
            continue;
        };
        if utilization(info) >= threshold {
            reasons.insert(name.clone(), Unremovable::NotUnderutilized);
            continue;
        }
        let mut remaining = budgets.clone();
        let pods = match pods_to_move(info, &mut remaining) {
            Ok(pods) => pods,
            Err(reason) => {
                reasons.insert(name.clone(), reason);
                continue;
            }
        };
        if !pods.is_empty() && non_empty >= max_non_empty {
            continue;
        }
        excluded.insert(name.clone());
        match place_pods_from(profile, snapshot, &pods, excluded, &mut cursor) {
            Ok(()) => {
                budgets = remaining;
                non_empty += usize::from(!pods.is_empty());
                unneeded.push((name.clone(), candidate.group, pods));
            }
            Err(reason) => {
                excluded.remove(name);
                reasons.insert(name.clone(), reason);
            }
        }
    }
    (unneeded, reasons)
}

/// Finds a node for each pod among the nodes of `snapshot` not in
/// `excluded` (and not marked for deletion), binding each in `snapshot` so
/// the next pod sees it; when a pod fits nowhere, the pods already moved go
/// back to their nodes and that pod is named.
pub fn place_pods(
    profile: &Profile,
    snapshot: &mut Snapshot,
    pods: &[Arc<Pod>],
    excluded: &HashSet<String>,
) -> Result<(), Unremovable> {
    place_pods_from(profile, snapshot, pods, excluded, &mut 0)
}

/// [`place_pods`], searching the nodes from index `cursor` on (wrapping
/// around), and leaving it at the node the last pod fit.
fn place_pods_from(
    profile: &Profile,
    snapshot: &mut Snapshot,
    pods: &[Arc<Pod>],
    excluded: &HashSet<String>,
    cursor: &mut usize,
) -> Result<(), Unremovable> {
    let mut moved: Vec<&Arc<Pod>> = Vec::new();
    for pod in pods {
        match find_place(profile, snapshot, pod, excluded, cursor) {
            Some((node, unbound)) => {
                snapshot.bind_pod(unbound, &node);
                moved.push(pod);
            }
            None => {
                for back in moved {
                    snapshot.add_pod(Pod::clone(back));
                }
                return Err(Unremovable::NoPlaceToMovePods { pod: pod_key(pod) });
            }
        }
    }
    Ok(())
}

/// The first node `pod` fits (as a new pod: without its node name), and
/// the pod so, to bind there.
pub(crate) fn find_place(
    profile: &Profile,
    snapshot: &Snapshot,
    pod: &Pod,
    excluded: &HashSet<String>,
    cursor: &mut usize,
) -> Option<(String, Pod)> {
    let mut unbound = pod.clone();
    if let Some(spec) = unbound.spec.as_mut() {
        spec.node_name = None;
    }
    let (state, narrowed, status) = run_pre_filter(profile, &unbound, snapshot).ok()?;
    if !status.is_success() {
        return None;
    }
    let nodes = snapshot.nodes();
    let count = nodes.len();
    for step in 0..count {
        let index = (*cursor + step) % count;
        let node = &nodes[index];
        if excluded.contains(node.name())
            || narrowed
                .node_names
                .as_ref()
                .is_some_and(|names| !names.contains(node.name()))
        {
            continue;
        }
        if run_filter_plugins(profile, &state, &unbound, node).is_success() {
            *cursor = index;
            return Some((node.name().to_string(), unbound));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use ksim_testutils::builders;
    use serde_json::json;

    fn node(name: &str, cpu: &str) -> Node {
        builders::node(name).cpu(cpu).memory("8Gi").obj()
    }

    /// A pod of ReplicaSet `web` on `node` requesting `cpu`, with `meta`'s
    /// keys set in its metadata.
    fn pod(name: &str, node: &str, cpu: &str, meta: serde_json::Value) -> Pod {
        let pod = builders::pod(name)
            .image("i")
            .label("app", "web")
            .owner("apps/v1", "ReplicaSet", "web", "u")
            .node(node)
            .cpu(cpu)
            .obj();
        let mut value = serde_json::to_value(pod).expect("a pod serializes");
        if let Some(extra) = meta.as_object() {
            for (k, v) in extra {
                value["metadata"][k] = v.clone();
            }
        }
        serde_json::from_value(value).expect("pod")
    }

    #[test]
    fn utilization_is_the_larger_share_of_cpu_or_memory() {
        let snapshot = Snapshot::new([node("a", "2")], [pod("p", "a", "500m", json!({}))]);
        let a = snapshot.get("a").expect("node");
        assert!((utilization(a) - 0.25).abs() < 1e-9);
    }

    #[test]
    fn upstream_blocking_rules() {
        let cases = [
            (
                json!({"annotations": {SAFE_TO_EVICT_ANNOTATION: "false"}}),
                Some(BlockingReason::NotSafeToEvictAnnotation),
            ),
            (
                json!({"ownerReferences": []}),
                Some(BlockingReason::NotReplicated),
            ),
            (
                json!({"ownerReferences": [], "annotations": {SAFE_TO_EVICT_ANNOTATION: "true"}}),
                None,
            ),
            (
                json!({"namespace": "kube-system"}),
                Some(BlockingReason::UnmovableKubeSystemPod),
            ),
            (json!({}), None),
        ];
        for (meta, want) in cases {
            let snapshot = Snapshot::new([node("a", "2")], [pod("p", "a", "100m", meta.clone())]);
            let got = pods_to_move(snapshot.get("a").expect("node"), &mut []);
            match want {
                None => assert_eq!(got.map(|p| p.len()), Ok(1), "{meta}"),
                Some(reason) => assert_eq!(
                    got.map(|p| p.len()),
                    Err(Unremovable::BlockedByPod {
                        pod: pod_key(&pod("p", "a", "100m", meta.clone())),
                        reason
                    }),
                    "{meta}"
                ),
            }
        }
    }

    #[test]
    fn a_budget_without_disruptions_blocks() {
        let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "b", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}
        }))
        .expect("pdb");
        let snapshot = Snapshot::new(
            [node("a", "2")],
            [
                pod("p", "a", "100m", json!({})),
                pod("q", "a", "100m", json!({})),
            ],
        );
        let mut budgets = vec![DisruptionBudget::from_pdb(&pdb)];
        let got = pods_to_move(snapshot.get("a").expect("node"), &mut budgets);
        assert!(matches!(
            got,
            Err(Unremovable::BlockedByPod {
                reason: BlockingReason::NotEnoughPdb,
                ..
            })
        ));
    }

    #[test]
    fn pods_move_only_where_they_fit() {
        let mut snapshot = Snapshot::new(
            [node("a", "2"), node("b", "2")],
            [
                pod("p", "a", "1500m", json!({})),
                pod("q", "b", "1", json!({})),
            ],
        );
        let pods = pods_to_move(snapshot.get("a").expect("node"), &mut []).expect("movable");
        let excluded: HashSet<String> = ["a".to_string()].into();
        let profile = Profile::default_profile();
        assert!(matches!(
            place_pods(&profile, &mut snapshot.clone(), &pods, &excluded),
            Err(Unremovable::NoPlaceToMovePods { .. })
        ));
        snapshot.remove_pod("default", "q");
        assert_eq!(
            place_pods(&profile, &mut snapshot, &pods, &excluded),
            Ok(())
        );
    }
}
