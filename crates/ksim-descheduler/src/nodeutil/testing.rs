//! Test fixtures of the balance plugins: ksim-testutils' node and pod
//! builders with JSON merged in,
//! and a recording evictor that accepts pods per closures, honours optional
//! per-node and total limits, and records evictions in order.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use ksim_testutils::builders;
use serde_json::Value;

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

/// `object` with `extra` merged into its JSON.
fn merged<T: serde::Serialize + serde::de::DeserializeOwned>(object: T, extra: Value) -> T {
    let mut value = serde_json::to_value(object).expect("a serializable object");
    merge(&mut value, extra);
    serde_json::from_value(value).expect("a valid object")
}

/// A Ready node with this allocatable (and capacity) cpu, memory and pods,
/// merged with `extra`.
pub(crate) fn node(name: &str, cpu: &str, memory: &str, pods: &str, extra: Value) -> Node {
    let mut node = builders::node(name).ready();
    for (resource, value) in [("cpu", cpu), ("memory", memory), ("pods", pods)] {
        node = node
            .capacity(resource, value)
            .total_capacity(resource, value);
    }
    merged(node.obj(), extra)
}

/// A running pod of ReplicaSet `rs` in `ns` on `node` with one container
/// requesting `cpu` and `memory` (empty strings request nothing), merged
/// with `extra`.
pub(crate) fn pod(ns: &str, name: &str, node: &str, cpu: &str, memory: &str, extra: Value) -> Pod {
    let mut pod = builders::pod(name)
        .namespace(ns)
        .uid(&format!("uid-{ns}-{name}"))
        .owner("apps/v1", "ReplicaSet", "rs", "rs-uid")
        .node(node)
        .image("nginx")
        .phase("Running");
    for (resource, value) in [("cpu", cpu), ("memory", memory)] {
        if !value.is_empty() {
            pod = pod.request(resource, value);
        }
    }
    merged(pod.obj(), extra)
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
