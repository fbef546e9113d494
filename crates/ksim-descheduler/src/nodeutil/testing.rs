//! Test fixtures of the balance plugins: node and pod builders from JSON,
//! and a recording evictor that accepts pods per closures, honours optional
//! per-node and total limits, and records evictions in order.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::framework::{ClusterSnapshot, EvictionError, EvictionRequest, PodEvictor};

/// Merges `patch` into `base` (objects recursively, the rest replaced).
fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, patch) => *base = patch,
    }
}

/// A Ready node with this allocatable cpu, memory and pods, merged with `extra`.
pub(crate) fn node(name: &str, cpu: &str, memory: &str, pods: &str, extra: Value) -> Node {
    let mut value = json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
            "capacity": {"cpu": cpu, "memory": memory, "pods": pods},
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    });
    merge(&mut value, extra);
    serde_json::from_value(value).expect("a valid node")
}

/// A running pod of ReplicaSet `rs` in `ns` on `node` with one container
/// requesting `cpu` and `memory` (empty strings request nothing), merged
/// with `extra`.
pub(crate) fn pod(ns: &str, name: &str, node: &str, cpu: &str, memory: &str, extra: Value) -> Pod {
    let mut requests = serde_json::Map::new();
    if !cpu.is_empty() {
        requests.insert("cpu".into(), json!(cpu));
    }
    if !memory.is_empty() {
        requests.insert("memory".into(), json!(memory));
    }
    let mut value = json!({
        "metadata": {
            "name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}"),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": true}]
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "nginx", "resources": {"requests": requests}}]
        },
        "status": {"phase": "Running"}
    });
    merge(&mut value, extra);
    serde_json::from_value(value).expect("a valid pod")
}

/// A snapshot of these nodes and pods.
pub(crate) fn snapshot(nodes: Vec<Node>, pods: Vec<Pod>) -> ClusterSnapshot {
    ClusterSnapshot::new(nodes, pods, vec![], Timestamp::UNIX_EPOCH)
}

/// References to every node of the snapshot.
pub(crate) fn all_nodes(snapshot: &ClusterSnapshot) -> Vec<&Node> {
    snapshot.nodes().iter().collect()
}

type PodPredicate = Box<dyn Fn(&Pod) -> bool>;

/// An evictor that evicts every pod its closures accept and records them.
pub(crate) struct RecordingEvictor {
    /// `namespace/name` of every evicted pod, in order.
    pub evicted: Vec<String>,
    /// The strategy each eviction was requested by.
    pub strategies: Vec<String>,
    pub filter: PodPredicate,
    pub pre_eviction_filter: PodPredicate,
    /// Pods the API "refuses" (as a PodDisruptionBudget would).
    pub refuse: PodPredicate,
    pub max_per_node: Option<usize>,
    pub max_total: Option<usize>,
    pub per_node: HashMap<String, usize>,
}

impl Default for RecordingEvictor {
    fn default() -> Self {
        RecordingEvictor {
            evicted: Vec::new(),
            strategies: Vec::new(),
            filter: Box::new(|_| true),
            pre_eviction_filter: Box::new(|_| true),
            refuse: Box::new(|_| false),
            max_per_node: None,
            max_total: None,
            per_node: HashMap::new(),
        }
    }
}

impl RecordingEvictor {
    /// The names (without namespace) of the evicted pods, in order.
    pub fn names(&self) -> Vec<&str> {
        self.evicted
            .iter()
            .map(|key| key.split_once('/').map_or(key.as_str(), |(_, name)| name))
            .collect()
    }
}

impl PodEvictor for RecordingEvictor {
    fn filter(&self, pod: &Pod) -> bool {
        (self.filter)(pod)
    }

    fn pre_eviction_filter(&self, pod: &Pod) -> bool {
        (self.pre_eviction_filter)(pod)
    }

    fn evict(&mut self, pod: &Pod, request: EvictionRequest<'_>) -> Result<(), EvictionError> {
        let node = crate::podutil::node_name(pod).to_string();
        if self
            .max_per_node
            .is_some_and(|max| self.per_node.get(&node).copied().unwrap_or(0) >= max)
        {
            return Err(EvictionError::NodeLimitReached);
        }
        if self.total_limit_exceeded() {
            return Err(EvictionError::TotalLimitReached);
        }
        if (self.refuse)(pod) {
            return Err(EvictionError::Refused(
                "Cannot evict pod as it would violate the pod's disruption budget.".into(),
            ));
        }
        *self.per_node.entry(node).or_default() += 1;
        self.evicted.push(format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        ));
        self.strategies.push(request.strategy.to_string());
        Ok(())
    }

    fn node_limit_exceeded(&self, node_name: &str) -> bool {
        self.max_per_node
            .is_some_and(|max| self.per_node.get(node_name).copied().unwrap_or(0) >= max)
    }

    fn total_limit_exceeded(&self) -> bool {
        self.max_total.is_some_and(|max| self.evicted.len() >= max)
    }
}
