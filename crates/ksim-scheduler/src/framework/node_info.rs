//! `NodeInfo`: a node with the pods bound to it and what they add up to
//! (requested resources, used host ports, pods with affinity), and the
//! `HostPortInfo` port table.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use ksim_core::resources::resource_list;
use ksim_core::selector::{LabelSelectorRequirements, NilableSelector};

use super::domain_counts::{DomainCountIndex, DomainCounts, KeptDomainCounts};
use super::pod_info::{HostPort, PodInfo, Resource};
use super::topology_layout::TopologyLayout;

const ANY_IP: &str = "0.0.0.0";

/// Host ports in use on a node: ip → (protocol, port).
#[derive(Debug, Clone, Default)]
pub struct HostPortInfo {
    ports: HashMap<String, HashMap<(String, i32), usize>>,
}

impl HostPortInfo {
    /// Records a port in use.
    pub fn add(&mut self, port: &HostPort) {
        *self
            .ports
            .entry(port.ip.clone())
            .or_default()
            .entry((port.protocol.clone(), port.port))
            .or_default() += 1;
    }

    /// Releases a port.
    pub fn remove(&mut self, port: &HostPort) {
        if let Some(by_ip) = self.ports.get_mut(&port.ip) {
            let key = (port.protocol.clone(), port.port);
            if let Some(count) = by_ip.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    by_ip.remove(&key);
                }
            }
            if by_ip.is_empty() {
                self.ports.remove(&port.ip);
            }
        }
    }

    /// Whether `port` clashes with one in use: the same protocol and port on
    /// the same ip, with 0.0.0.0 clashing with every ip.
    pub fn check_conflict(&self, port: &HostPort) -> bool {
        let key = (port.protocol.clone(), port.port);
        if port.ip == ANY_IP {
            return self.ports.values().any(|by_ip| by_ip.contains_key(&key));
        }
        [port.ip.as_str(), ANY_IP].iter().any(|ip| {
            self.ports
                .get(*ip)
                .is_some_and(|by_ip| by_ip.contains_key(&key))
        })
    }

    /// How many ports are in use.
    pub fn len(&self) -> usize {
        self.ports.values().map(HashMap::len).sum()
    }

    /// Whether no port is in use.
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }
}

/// A node as the scheduler sees it in a snapshot.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub node: Arc<Node>,
    pub pods: Vec<Arc<PodInfo>>,
    /// Pods with any pod (anti-)affinity.
    pub pods_with_affinity: Vec<Arc<PodInfo>>,
    /// Pods with required anti-affinity terms.
    pub pods_with_required_anti_affinity: Vec<Arc<PodInfo>>,
    pub used_ports: HostPortInfo,
    /// The sum of the pods' requests.
    pub requested: Resource,
    /// Like `requested`, with 100m cpu / 200Mi memory for containers that do
    /// not say (only cpu and memory are filled).
    pub non_zero_requested: Resource,
    /// `status.allocatable`.
    pub allocatable: Resource,
    /// Image name → size in bytes, from `status.images`.
    pub image_sizes: HashMap<String, i64>,
}

impl NodeInfo {
    /// A node without pods.
    pub fn new(node: Arc<Node>) -> Self {
        let allocatable = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .map(|a| Resource::from_list(&resource_list(a)))
            .unwrap_or_default();
        let mut image_sizes = HashMap::new();
        for image in node
            .status
            .as_ref()
            .and_then(|s| s.images.as_ref())
            .into_iter()
            .flatten()
        {
            for name in image.names.iter().flatten() {
                image_sizes.insert(name.clone(), image.size_bytes.unwrap_or(0));
            }
        }
        NodeInfo {
            node,
            pods: Vec::new(),
            pods_with_affinity: Vec::new(),
            pods_with_required_anti_affinity: Vec::new(),
            used_ports: HostPortInfo::default(),
            requested: Resource::default(),
            non_zero_requested: Resource::default(),
            allocatable,
            image_sizes,
        }
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        self.node.metadata.name.as_deref().unwrap_or_default()
    }

    /// The node's labels.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.node.metadata.labels.as_ref().unwrap_or(&EMPTY)
    }

    /// Accounts a pod bound to this node.
    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.requested.add(&pod.requests);
        self.non_zero_requested.milli_cpu = self
            .non_zero_requested
            .milli_cpu
            .saturating_add(pod.non_zero_milli_cpu);
        self.non_zero_requested.memory = self
            .non_zero_requested
            .memory
            .saturating_add(pod.non_zero_memory);
        for port in &pod.host_ports {
            self.used_ports.add(port);
        }
        if pod.has_affinity() {
            self.pods_with_affinity.push(pod.clone());
        }
        if !pod.required_anti_affinity_terms.is_empty() {
            self.pods_with_required_anti_affinity.push(pod.clone());
        }
        self.pods.push(pod);
    }

    /// Removes a pod by namespace and name; returns it when it was there.
    pub fn remove_pod(&mut self, namespace: &str, name: &str) -> Option<Arc<PodInfo>> {
        let position = self
            .pods
            .iter()
            .position(|p| p.key() == (namespace, name))?;
        let pod = self.pods.swap_remove(position);
        self.pods_with_affinity
            .retain(|p| p.key() != (namespace, name));
        self.pods_with_required_anti_affinity
            .retain(|p| p.key() != (namespace, name));
        self.requested.subtract(&pod.requests);
        self.non_zero_requested.milli_cpu = self
            .non_zero_requested
            .milli_cpu
            .saturating_sub(pod.non_zero_milli_cpu);
        self.non_zero_requested.memory = self
            .non_zero_requested
            .memory
            .saturating_sub(pod.non_zero_memory);
        for port in &pod.host_ports {
            self.used_ports.remove(port);
        }
        Some(pod)
    }
}

/// Label sets of namespaces (for namespaceSelector), by name.
pub type NamespaceLabels = HashMap<String, BTreeMap<String, String>>;

/// The kinds of workload whose selectors make the system default spreading
/// selector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    /// Every Service selecting the pod counts.
    Service,
    /// The pod's controller, when it is one of these.
    ReplicationController,
    ReplicaSet,
    StatefulSet,
}

/// A workload that selects pods (Services by matching; ReplicationControllers,
/// ReplicaSets and StatefulSets when they are the pod's controller).
#[derive(Debug, Clone)]
pub struct WorkloadSelector {
    pub kind: WorkloadKind,
    pub namespace: String,
    pub name: String,
    pub selector: ksim_core::selector::LabelSelectorRequirements,
}

/// A PodDisruptionBudget as preemption reads it.
#[derive(Debug, Clone)]
pub struct DisruptionBudget {
    pub namespace: String,
    /// A nil or empty selector matches no pod here (as upstream preemption).
    pub selector: Option<LabelSelectorRequirements>,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
    /// `status.disruptedPods` names (already being evicted).
    pub disrupted_pods: HashSet<String>,
}

impl DisruptionBudget {
    /// Reads a PodDisruptionBudget; an invalid selector matches nothing.
    pub fn from_pdb(pdb: &k8s_openapi::api::policy::v1::PodDisruptionBudget) -> Self {
        let selector = pdb
            .spec
            .as_ref()
            .and_then(|s| LabelSelectorRequirements::from_optional(s.selector.as_ref()).ok())
            .flatten();
        let status = pdb.status.as_ref();
        DisruptionBudget {
            namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
            selector,
            disruptions_allowed: status.map(|s| s.disruptions_allowed).unwrap_or(0),
            disrupted_pods: status
                .and_then(|s| s.disrupted_pods.as_ref())
                .map(|pods| pods.keys().cloned().collect())
                .unwrap_or_default(),
        }
    }

    /// Whether the budget covers the pod (same namespace, selector matches).
    pub fn covers(&self, pod: &Pod) -> bool {
        let labels_set = pod.metadata.labels.as_ref().is_some_and(|l| !l.is_empty());
        labels_set
            && !self.selector.selects_everything()
            && self.namespace == super::pod_info::pod_namespace(pod)
            && self.selector.selects(super::pod_info::pod_labels(pod))
    }
}

impl WorkloadSelector {
    fn identity(
        kind: WorkloadKind,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> (WorkloadKind, String, String) {
        (
            kind,
            meta.namespace
                .clone()
                .unwrap_or_else(|| "default".to_string()),
            meta.name.clone().unwrap_or_default(),
        )
    }

    fn from_map(
        kind: WorkloadKind,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        selector: Option<&BTreeMap<String, String>>,
    ) -> Option<Self> {
        let selector = selector.filter(|s| !s.is_empty())?;
        let (kind, namespace, name) = Self::identity(kind, meta);
        Some(WorkloadSelector {
            kind,
            namespace,
            name,
            selector: ksim_core::selector::LabelSelectorRequirements {
                requirements: selector
                    .iter()
                    .map(|(k, v)| ksim_core::selector::Requirement::In(k.clone(), vec![v.clone()]))
                    .collect(),
            },
        })
    }

    fn from_label_selector(
        kind: WorkloadKind,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    ) -> Option<Self> {
        let selector =
            ksim_core::selector::LabelSelectorRequirements::from_label_selector(selector).ok()?;
        let (kind, namespace, name) = Self::identity(kind, meta);
        Some(WorkloadSelector {
            kind,
            namespace,
            name,
            selector,
        })
    }

    /// A Service's selector (none for a Service without one).
    pub fn from_service(service: &k8s_openapi::api::core::v1::Service) -> Option<Self> {
        let selector = service.spec.as_ref().and_then(|s| s.selector.as_ref());
        Self::from_map(WorkloadKind::Service, &service.metadata, selector)
    }

    /// A ReplicationController's selector.
    pub fn from_replication_controller(
        rc: &k8s_openapi::api::core::v1::ReplicationController,
    ) -> Option<Self> {
        let selector = rc.spec.as_ref().and_then(|s| s.selector.as_ref());
        Self::from_map(WorkloadKind::ReplicationController, &rc.metadata, selector)
    }

    /// A ReplicaSet's selector.
    pub fn from_replica_set(rs: &k8s_openapi::api::apps::v1::ReplicaSet) -> Option<Self> {
        let spec = rs.spec.as_ref()?;
        Self::from_label_selector(WorkloadKind::ReplicaSet, &rs.metadata, &spec.selector)
    }

    /// A StatefulSet's selector.
    pub fn from_stateful_set(ss: &k8s_openapi::api::apps::v1::StatefulSet) -> Option<Self> {
        let spec = ss.spec.as_ref()?;
        Self::from_label_selector(WorkloadKind::StatefulSet, &ss.metadata, &spec.selector)
    }
}

/// The zone of a node as upstream keys it: region and zone labels (GA or
/// beta), empty when neither is set.
pub fn zone_key(node: &Node) -> String {
    let labels = node.metadata.labels.as_ref();
    let get = |ga: &str, beta: &str| {
        labels
            .and_then(|l| l.get(ga).or_else(|| l.get(beta)))
            .cloned()
            .unwrap_or_default()
    };
    let region = get(
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/region",
    );
    let zone = get(
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
    );
    if region.is_empty() && zone.is_empty() {
        String::new()
    } else {
        format!("{region}:\x00:{zone}")
    }
}

/// Node names grouped by zone, zones in the order first seen (upstream
/// `nodeTree`); listing interleaves the zones.
#[derive(Debug, Clone, Default)]
struct NodeTree {
    zones: Vec<String>,
    tree: HashMap<String, Vec<String>>,
}

impl NodeTree {
    fn add(&mut self, zone: &str, name: &str) {
        match self.tree.get_mut(zone) {
            Some(names) => names.push(name.to_string()),
            None => {
                self.zones.push(zone.to_string());
                self.tree.insert(zone.to_string(), vec![name.to_string()]);
            }
        }
    }

    fn remove(&mut self, zone: &str, name: &str) {
        let Some(names) = self.tree.get_mut(zone) else {
            return;
        };
        if let Some(position) = names.iter().position(|n| n == name) {
            names.swap_remove(position);
        }
        if names.is_empty() {
            self.tree.remove(zone);
            self.zones.retain(|z| z != zone);
        }
    }

    /// The i-th node of every zone in turn.
    fn list(&self) -> Vec<&str> {
        let columns: Vec<&Vec<String>> =
            self.zones.iter().filter_map(|z| self.tree.get(z)).collect();
        let longest = columns.iter().map(|c| c.len()).max().unwrap_or(0);
        let mut list = Vec::with_capacity(columns.iter().map(|c| c.len()).sum());
        for i in 0..longest {
            for column in &columns {
                if let Some(name) = column.get(i) {
                    list.push(name.as_str());
                }
            }
        }
        list
    }
}

/// How many nodes host pods with any pod (anti-)affinity, and pods with
/// required anti-affinity.
#[derive(Debug, Clone, Copy, Default)]
struct AffinityNodes {
    with_affinity: usize,
    with_required_anti_affinity: usize,
}

impl AffinityNodes {
    fn marks(node: &NodeInfo) -> (usize, usize) {
        (
            usize::from(!node.pods_with_affinity.is_empty()),
            usize::from(!node.pods_with_required_anti_affinity.is_empty()),
        )
    }

    /// Accounts a node that left.
    fn node_removed(&mut self, node: &NodeInfo) {
        let (affinity, anti_affinity) = Self::marks(node);
        self.with_affinity = self.with_affinity.saturating_sub(affinity);
        self.with_required_anti_affinity = self
            .with_required_anti_affinity
            .saturating_sub(anti_affinity);
    }

    /// Accounts a node's change from `before` to its current state.
    fn changed(&mut self, before: (usize, usize), node: &NodeInfo) {
        let after = Self::marks(node);
        self.with_affinity = (self.with_affinity + after.0).saturating_sub(before.0);
        self.with_required_anti_affinity =
            (self.with_required_anti_affinity + after.1).saturating_sub(before.1);
    }
}

/// The scheduler's view of the cluster for one cycle: nodes, their pods,
/// namespaces' labels and workload selectors. Scheduling walks the nodes
/// zone by zone in turn, as upstream's node tree does.
#[derive(Debug, Default)]
pub struct Snapshot {
    nodes: Vec<NodeInfo>,
    tree: NodeTree,
    /// Indexes into `nodes` in node-tree order, computed on first use after a change.
    order: std::sync::OnceLock<Vec<usize>>,
    index: HashMap<String, usize>,
    /// Image name → number of nodes that have it.
    image_nodes: HashMap<String, usize>,
    /// (namespace, name) of each accounted pod → its node's name.
    pod_nodes: HashMap<(String, String), String>,
    pub namespaces: NamespaceLabels,
    pub workload_selectors: Vec<WorkloadSelector>,
    /// PodDisruptionBudgets, for preemption.
    pub disruption_budgets: Vec<DisruptionBudget>,
    /// Pods nominated to a node (status.nominatedNodeName) but not bound yet.
    nominated: HashMap<String, Vec<Arc<PodInfo>>>,
    /// Label key → the number of nodes carrying it.
    label_key_nodes: HashMap<String, usize>,
    /// Nodes hosting pods with (anti-)affinity, and with required
    /// anti-affinity (upstream keeps such node lists in its snapshot).
    affinity_nodes: AffinityNodes,
    /// Matching-pod counts per topology domain, kept current (behind a
    /// lock so that a cycle reading the snapshot can add entries).
    domain_counts: std::sync::Mutex<DomainCountIndex>,
    /// Each node's domain per topology key asked for, until nodes change.
    topology_layouts: std::sync::Mutex<HashMap<String, Arc<TopologyLayout>>>,
}

impl Clone for Snapshot {
    fn clone(&self) -> Self {
        Snapshot {
            nodes: self.nodes.clone(),
            tree: self.tree.clone(),
            order: self.order.clone(),
            index: self.index.clone(),
            image_nodes: self.image_nodes.clone(),
            pod_nodes: self.pod_nodes.clone(),
            namespaces: self.namespaces.clone(),
            workload_selectors: self.workload_selectors.clone(),
            disruption_budgets: self.disruption_budgets.clone(),
            nominated: self.nominated.clone(),
            label_key_nodes: self.label_key_nodes.clone(),
            affinity_nodes: self.affinity_nodes,
            domain_counts: std::sync::Mutex::new(self.domain_index().clone()),
            topology_layouts: std::sync::Mutex::new(self.layouts().clone()),
        }
    }
}

impl Snapshot {
    /// A snapshot of these nodes and pods (pods not bound to a known node
    /// are left out).
    pub fn new(nodes: impl IntoIterator<Item = Node>, pods: impl IntoIterator<Item = Pod>) -> Self {
        let mut snapshot = Snapshot::default();
        for node in nodes {
            snapshot.upsert_node(node);
        }
        for pod in pods {
            snapshot.add_pod(pod);
        }
        snapshot
    }

    /// All nodes, in snapshot order.
    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// Records that `pod` is nominated to `node` (after preempting for it),
    /// replacing an earlier nomination of the same pod.
    pub fn nominate(&mut self, pod: impl Into<Arc<Pod>>, node: &str) {
        let info = Arc::new(PodInfo::new_lenient(pod.into()));
        let (namespace, name) = info.key();
        let (namespace, name) = (namespace.to_string(), name.to_string());
        self.clear_nomination(&namespace, &name);
        self.nominated
            .entry(node.to_string())
            .or_default()
            .push(info);
    }

    /// Forgets a pod's nomination (bound, deleted or nominated elsewhere).
    pub fn clear_nomination(&mut self, namespace: &str, name: &str) {
        if self.nominated.is_empty() {
            return;
        }
        for pods in self.nominated.values_mut() {
            pods.retain(|p| p.key() != (namespace, name));
        }
        self.nominated.retain(|_, pods| !pods.is_empty());
    }

    /// Whether any pod is nominated to a node.
    pub fn has_nominated_pods(&self) -> bool {
        !self.nominated.is_empty()
    }

    /// The pods nominated to a node.
    pub fn nominated_pods(&self, node: &str) -> &[Arc<PodInfo>] {
        self.nominated
            .get(node)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Indexes into [`Snapshot::nodes`] in node-tree order (zones in turn).
    pub fn node_order(&self) -> &[usize] {
        self.order.get_or_init(|| {
            self.tree
                .list()
                .into_iter()
                .filter_map(|name| self.index.get(name).copied())
                .collect()
        })
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there is no node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// A node by name.
    pub fn get(&self, name: &str) -> Option<&NodeInfo> {
        self.index.get(name).map(|&i| &self.nodes[i])
    }

    /// How many nodes have an image.
    pub fn nodes_with_image(&self, image: &str) -> usize {
        self.image_nodes.get(image).copied().unwrap_or(0)
    }

    fn count_images(&mut self, node: &NodeInfo, delta: isize) {
        for name in node.image_sizes.keys() {
            let count = self.image_nodes.entry(name.clone()).or_default();
            *count = count.saturating_add_signed(delta);
            if *count == 0 {
                self.image_nodes.remove(name);
            }
        }
    }

    /// The domain-count index (a poisoned lock still holds consistent
    /// counts: every update is completed before the lock is released).
    fn domain_index(&self) -> std::sync::MutexGuard<'_, DomainCountIndex> {
        self.domain_counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Pods in `namespace` matched by `selector` per value of
    /// `topology_key`, over every node carrying the key (pods terminating
    /// aside, as upstream's `countPodsMatchSelector`); kept up to date
    /// between cycles.
    pub fn domain_counts(
        &self,
        namespace: &str,
        selector: &Option<LabelSelectorRequirements>,
        topology_key: &str,
    ) -> Arc<DomainCounts> {
        self.domain_index()
            .counts(namespace, selector, topology_key, &self.nodes)
    }

    /// As [`Snapshot::domain_counts`], with the matching pods on nodes
    /// without the key and whether every domain value is one node's.
    pub fn kept_domain_counts(
        &self,
        namespace: &str,
        selector: &Option<LabelSelectorRequirements>,
        topology_key: &str,
    ) -> KeptDomainCounts {
        self.domain_index()
            .kept(namespace, selector, topology_key, &self.nodes)
    }

    fn layouts(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<TopologyLayout>>> {
        self.topology_layouts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Forgets the topology layouts (nodes were added, removed or relabelled).
    fn nodes_relaid(&mut self) {
        self.topology_layouts
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }

    /// Each node's domain for `topology_key`, indexed by [`Snapshot::position_of`].
    pub fn topology_layout(&self, topology_key: &str) -> Arc<TopologyLayout> {
        if let Some(layout) = self.layouts().get(topology_key) {
            return Arc::clone(layout);
        }
        let layout = Arc::new(TopologyLayout::of(&self.nodes, topology_key));
        self.layouts()
            .insert(topology_key.to_string(), Arc::clone(&layout));
        layout
    }

    /// The position in [`Snapshot::nodes`] of a node borrowed from it;
    /// None for a node that is not this snapshot's.
    pub fn position_of(&self, node: &NodeInfo) -> Option<usize> {
        let address = std::ptr::from_ref(node) as usize;
        let start = self.nodes.as_ptr() as usize;
        let size = std::mem::size_of::<NodeInfo>();
        let offset = address.checked_sub(start)?;
        (offset % size == 0 && offset / size < self.nodes.len()).then_some(offset / size)
    }

    /// How many nodes carry the label `key`.
    pub fn nodes_with_label(&self, key: &str) -> usize {
        self.label_key_nodes.get(key).copied().unwrap_or(0)
    }

    fn count_label_keys(&mut self, node: &Node, delta: isize) {
        for key in node.metadata.labels.iter().flat_map(BTreeMap::keys) {
            let count = self.label_key_nodes.entry(key.clone()).or_default();
            *count = count.saturating_add_signed(delta);
            if *count == 0 {
                self.label_key_nodes.remove(key);
            }
        }
    }

    /// Adds a node, or replaces it keeping its pods.
    pub fn upsert_node(&mut self, node: Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let zone = zone_key(&node);
        let mut info = NodeInfo::new(Arc::new(node));
        match self.index.get(&name) {
            Some(&i) => {
                let old_zone = zone_key(&self.nodes[i].node);
                if old_zone != zone {
                    self.tree.remove(&old_zone, &name);
                    self.tree.add(&zone, &name);
                    self.order = std::sync::OnceLock::new();
                }
                let old = std::mem::replace(&mut self.nodes[i], NodeInfo::new(info.node.clone()));
                let relabelled = old.node.metadata.labels != info.node.metadata.labels;
                if relabelled {
                    self.nodes_relaid();
                    self.domain_counts
                        .get_mut()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .node_removed(&old);
                    self.count_label_keys(&old.node, -1);
                    self.count_label_keys(&info.node, 1);
                }
                self.count_images(&old, -1);
                for pod in old.pods {
                    info.add_pod(pod);
                }
                self.count_images(&info, 1);
                if relabelled {
                    self.domain_counts
                        .get_mut()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .node_added(&info);
                }
                self.nodes[i] = info;
            }
            None => {
                self.nodes_relaid();
                self.count_images(&info, 1);
                self.count_label_keys(&info.node, 1);
                self.domain_counts
                    .get_mut()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .node_added(&info);
                self.tree.add(&zone, &name);
                self.order = std::sync::OnceLock::new();
                self.index.insert(name, self.nodes.len());
                self.nodes.push(info);
            }
        }
    }

    /// Removes a node and its pods.
    pub fn remove_node(&mut self, name: &str) -> bool {
        let Some(i) = self.index.remove(name) else {
            return false;
        };
        let removed = self.nodes.remove(i);
        self.nodes_relaid();
        self.affinity_nodes.node_removed(&removed);
        self.tree.remove(&zone_key(&removed.node), name);
        self.order = std::sync::OnceLock::new();
        self.count_images(&removed, -1);
        self.count_label_keys(&removed.node, -1);
        self.domain_counts
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .node_removed(&removed);
        for pod in &removed.pods {
            let (namespace, pod_name) = pod.key();
            self.pod_nodes
                .remove(&(namespace.to_string(), pod_name.to_string()));
        }
        for position in self.index.values_mut() {
            if *position > i {
                *position -= 1;
            }
        }
        true
    }

    /// Accounts a pod on the node named by `spec.nodeName` (as binding
    /// does); false when the pod names no known node. Terminal pods
    /// (Succeeded/Failed) are not accounted.
    pub fn add_pod(&mut self, pod: impl Into<Arc<Pod>>) -> bool {
        let pod = pod.into();
        if ksim_core::status::is_pod_terminal(&pod) {
            return false;
        }
        let Some(node_name) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            return false;
        };
        let Some(&i) = self.index.get(&node_name) else {
            return false;
        };
        let info = PodInfo::new_lenient(pod);
        let (namespace, name) = info.key();
        let key = (namespace.to_string(), name.to_string());
        if !self.nominated.is_empty() {
            self.clear_nomination(&key.0, &key.1);
        }
        let domain_counts = self
            .domain_counts
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(previous) = self.pod_nodes.insert(key.clone(), node_name.clone())
            && let Some(&at) = self.index.get(&previous)
        {
            // The same pod accounted twice (an update): keep the latest.
            let before = AffinityNodes::marks(&self.nodes[at]);
            if let Some(old) = self.nodes[at].remove_pod(&key.0, &key.1) {
                domain_counts.pod_removed(&self.nodes[at], &old);
            }
            self.affinity_nodes.changed(before, &self.nodes[at]);
        }
        let info = Arc::new(info);
        domain_counts.pod_added(&self.nodes[i], &info);
        let before = AffinityNodes::marks(&self.nodes[i]);
        self.nodes[i].add_pod(info);
        self.affinity_nodes.changed(before, &self.nodes[i]);
        true
    }

    /// Accounts `pod` on `node_name` (sets `spec.nodeName`), as a bind would.
    pub fn bind_pod(&mut self, mut pod: Pod, node_name: &str) -> bool {
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(node_name.to_string());
        }
        self.add_pod(pod)
    }

    /// Removes a pod from whichever node has it.
    pub fn remove_pod(&mut self, namespace: &str, name: &str) -> bool {
        let Some(node_name) = self
            .pod_nodes
            .remove(&(namespace.to_string(), name.to_string()))
        else {
            return false;
        };
        let Some(&i) = self.index.get(&node_name) else {
            return false;
        };
        let before = AffinityNodes::marks(&self.nodes[i]);
        let Some(removed) = self.nodes[i].remove_pod(namespace, name) else {
            return false;
        };
        self.affinity_nodes.changed(before, &self.nodes[i]);
        self.domain_counts
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pod_removed(&self.nodes[i], &removed);
        true
    }

    /// Nodes that host pods with affinity (none visited when no node does).
    pub fn nodes_with_affinity_pods(&self) -> impl Iterator<Item = &NodeInfo> {
        let nodes = if self.affinity_nodes.with_affinity == 0 {
            &[][..]
        } else {
            &self.nodes[..]
        };
        nodes.iter().filter(|n| !n.pods_with_affinity.is_empty())
    }

    /// Nodes that host pods with required anti-affinity (none visited when
    /// no node does).
    pub fn nodes_with_required_anti_affinity_pods(&self) -> impl Iterator<Item = &NodeInfo> {
        let nodes = if self.affinity_nodes.with_required_anti_affinity == 0 {
            &[][..]
        } else {
            &self.nodes[..]
        };
        nodes
            .iter()
            .filter(|n| !n.pods_with_required_anti_affinity.is_empty())
    }

    /// Records a namespace's labels (for namespaceSelector).
    pub fn upsert_namespace(&mut self, namespace: &k8s_openapi::api::core::v1::Namespace) {
        if let Some(name) = namespace.metadata.name.clone() {
            self.namespaces
                .insert(name, namespace.metadata.labels.clone().unwrap_or_default());
        }
    }

    /// Replaces (or adds) a workload selector, matched by kind, namespace and name.
    pub fn upsert_workload_selector(&mut self, workload: WorkloadSelector) {
        self.remove_workload_selector(workload.kind, &workload.namespace, &workload.name);
        self.workload_selectors.push(workload);
    }

    /// Forgets a workload selector.
    pub fn remove_workload_selector(&mut self, kind: WorkloadKind, namespace: &str, name: &str) {
        self.workload_selectors
            .retain(|w| !(w.kind == kind && w.namespace == namespace && w.name == name));
    }

    /// The labels of a namespace (empty when unknown).
    pub fn namespace_labels(&self, namespace: &str) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.namespaces.get(namespace).unwrap_or(&EMPTY)
    }

    /// Names of namespaces whose labels the selector matches.
    pub fn namespaces_matching(
        &self,
        selector: &ksim_core::selector::LabelSelectorRequirements,
    ) -> HashSet<String> {
        self.namespaces
            .iter()
            .filter(|(_, labels)| selector.matches(*labels))
            .map(|(name, _)| name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};

    #[test]
    fn host_port_conflicts_follow_wildcard_ip() {
        let port = |ip: &str, protocol: &str, port: i32| HostPort {
            ip: ip.to_string(),
            protocol: protocol.to_string(),
            port,
        };
        let mut used = HostPortInfo::default();
        used.add(&port("127.0.0.1", "TCP", 8080));
        let cases = [
            (
                "same ip, port, protocol",
                port("127.0.0.1", "TCP", 8080),
                true,
            ),
            ("other protocol", port("127.0.0.1", "UDP", 8080), false),
            ("other ip", port("127.0.0.2", "TCP", 8080), false),
            ("wildcard asks", port("0.0.0.0", "TCP", 8080), true),
            ("other port", port("127.0.0.1", "TCP", 8081), false),
        ];
        for (name, asked, conflict) in cases {
            assert_eq!(used.check_conflict(&asked), conflict, "{name}");
        }
        used.add(&port("0.0.0.0", "UDP", 53));
        assert!(used.check_conflict(&port("10.0.0.1", "UDP", 53)));
        used.remove(&port("0.0.0.0", "UDP", 53));
        assert!(!used.check_conflict(&port("10.0.0.1", "UDP", 53)));
    }

    #[test]
    fn node_tree_order_interleaves_zones() {
        let zoned =
            |name: &str, zone: &str| node(name).label("topology.kubernetes.io/zone", zone).obj();
        let mut snapshot = Snapshot::new(
            [
                zoned("a1", "a"),
                zoned("a2", "a"),
                zoned("b1", "b"),
                node("none").obj(),
                zoned("a3", "a"),
                zoned("b2", "b"),
            ],
            [],
        );
        let names = |s: &Snapshot| -> Vec<String> {
            s.node_order()
                .iter()
                .map(|&i| s.nodes()[i].name().to_string())
                .collect()
        };
        assert_eq!(names(&snapshot), ["a1", "b1", "none", "a2", "b2", "a3"]);
        snapshot.remove_node("b1");
        assert_eq!(names(&snapshot), ["a1", "b2", "none", "a2", "a3"]);
        snapshot.upsert_node(zoned("a1", "c"));
        assert_eq!(names(&snapshot), ["a3", "b2", "none", "a1", "a2"]);
        assert_eq!(
            snapshot
                .get("a1")
                .map(|n| n.labels().get("topology.kubernetes.io/zone").cloned()),
            Some(Some("c".to_string()))
        );
    }

    #[test]
    fn workload_selectors_from_objects() {
        use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
        use k8s_openapi::api::core::v1::{Service, ServiceSpec};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

        let meta = |name: &str| ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("ns".to_string()),
            ..Default::default()
        };
        let service = Service {
            metadata: meta("svc"),
            spec: Some(ServiceSpec {
                selector: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let headless = Service {
            metadata: meta("no-selector"),
            spec: Some(ServiceSpec::default()),
            ..Default::default()
        };
        let rs = ReplicaSet {
            metadata: meta("rs"),
            spec: Some(ReplicaSetSpec {
                selector: crate::testing::selector(&[("app", "web"), ("hash", "1")]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut snapshot = Snapshot::default();
        snapshot
            .upsert_workload_selector(WorkloadSelector::from_service(&service).expect("selector"));
        snapshot
            .upsert_workload_selector(WorkloadSelector::from_service(&service).expect("selector"));
        snapshot
            .upsert_workload_selector(WorkloadSelector::from_replica_set(&rs).expect("selector"));
        assert!(WorkloadSelector::from_service(&headless).is_none());
        assert_eq!(snapshot.workload_selectors.len(), 2);
        let labels = BTreeMap::from([
            ("app".to_string(), "web".to_string()),
            ("hash".to_string(), "1".to_string()),
        ]);
        assert!(
            snapshot
                .workload_selectors
                .iter()
                .all(|w| w.namespace == "ns" && w.selector.matches(&labels))
        );
        snapshot.remove_workload_selector(WorkloadKind::Service, "ns", "svc");
        assert_eq!(snapshot.workload_selectors.len(), 1);
    }

    #[test]
    fn nodes_with_affinity_pods_follow_binds_updates_and_removals() {
        use crate::testing::affinity_term;
        let anti = || {
            pod("anti")
                .label("app", "db")
                .pod_anti_affinity(affinity_term(&[("app", "db")], "zone"))
        };
        let names = |s: &Snapshot| -> (Vec<String>, Vec<String>) {
            (
                s.nodes_with_affinity_pods()
                    .map(|n| n.name().to_string())
                    .collect(),
                s.nodes_with_required_anti_affinity_pods()
                    .map(|n| n.name().to_string())
                    .collect(),
            )
        };
        let none = (Vec::<String>::new(), Vec::<String>::new());
        let on = |n: &str| (vec![n.to_string()], vec![n.to_string()]);
        let mut snapshot = Snapshot::new([node("n1").obj(), node("n2").obj()], []);
        assert_eq!(names(&snapshot), none);
        snapshot.bind_pod(anti().obj(), "n1");
        assert_eq!(names(&snapshot), on("n1"));
        // Re-accounted on another node (an update).
        snapshot.add_pod(anti().node("n2").obj());
        assert_eq!(names(&snapshot), on("n2"));
        snapshot.upsert_node(node("n2").label("zone", "a").obj());
        assert_eq!(names(&snapshot), on("n2"));
        snapshot.remove_node("n2");
        assert_eq!(names(&snapshot), none);
        snapshot.bind_pod(anti().obj(), "n1");
        assert!(snapshot.remove_pod("default", "anti"));
        assert_eq!(names(&snapshot), none);
    }

    #[test]
    fn snapshot_accounts_bound_pods_and_removals() {
        let mut snapshot = Snapshot::new(
            [
                node("n1").cpu("4").memory("8Gi").obj(),
                node("n2").cpu("4").obj(),
            ],
            [
                pod("a").cpu("1").memory("1Gi").node("n1").obj(),
                pod("unbound").cpu("1").obj(),
            ],
        );
        let n1 = snapshot.get("n1").expect("n1");
        assert_eq!(n1.requested.milli_cpu, 1000);
        assert_eq!(n1.requested.memory, 1 << 30);
        assert_eq!(n1.allocatable.milli_cpu, 4000);
        assert!(snapshot.bind_pod(pod("b").obj(), "n1"));
        let n1 = snapshot.get("n1").expect("n1");
        assert_eq!(n1.pods.len(), 2);
        assert_eq!(n1.non_zero_requested.milli_cpu, 1100);
        // Accounting the same pod again (an update) replaces it.
        assert!(snapshot.add_pod(pod("b").cpu("2").node("n1").obj()));
        let n1 = snapshot.get("n1").expect("n1");
        assert_eq!((n1.pods.len(), n1.requested.milli_cpu), (2, 3000));
        assert!(snapshot.remove_pod("default", "a"));
        assert!(!snapshot.remove_pod("default", "a"));
        assert_eq!(snapshot.get("n1").expect("n1").requested.milli_cpu, 2000);
        assert!(snapshot.remove_node("n1"));
        assert_eq!(snapshot.get("n2").map(NodeInfo::name), Some("n2"));
        assert_eq!(snapshot.len(), 1);
    }
}
