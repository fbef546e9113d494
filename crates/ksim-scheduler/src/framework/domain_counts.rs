//! Matching-pod counts per topology domain, kept in the [`super::Snapshot`]
//! and updated as pods and nodes come and go, so that PodTopologySpread
//! does not recount every node's pods each cycle (upstream recounts them in
//! PreFilter and PreScore). One entry per (namespace, selector,
//! topologyKey) asked for, built by one scan on first use; past
//! [`MAX_ENTRIES`] the least recently used entry is dropped. Each entry
//! also keeps the matching pods on nodes without the key (PreScore counts
//! them into the domain "") and whether every domain is one node's (so a
//! hostname entry gives each node's own count).

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::FixedState;

use super::node_info::NodeInfo;
use ksim_core::selector::{LabelSelectorRequirements, NilableSelector};

use super::pod_info::{PodInfo, pod_labels, pod_namespace};

/// Matching pods per domain value (the value of a topology key on nodes).
pub type DomainCounts = HashMap<String, i64, FixedState>;

/// How many (namespace, selector, topologyKey) entries are kept.
pub const MAX_ENTRIES: usize = 64;

/// One entry's counts as a cycle reads them.
#[derive(Debug, Clone)]
pub struct KeptDomainCounts {
    /// Matching pods per domain value, over the nodes carrying the key.
    pub counts: Arc<DomainCounts>,
    /// Matching pods on nodes without the key.
    pub missing_key: i64,
    /// Whether no two nodes share a domain value, so that a value's count
    /// is the count of the one node carrying it.
    pub one_node_per_domain: bool,
}

#[derive(Debug, Clone)]
struct Entry {
    namespace: String,
    selector: Option<LabelSelectorRequirements>,
    topology_key: String,
    /// Nodes per domain value (domains without nodes are absent).
    nodes: HashMap<String, usize, FixedState>,
    /// How many domain values more than one node carries.
    shared_domains: usize,
    /// Matching pods on nodes without the key.
    missing_key: i64,
    /// Matching pods per domain value, for every domain with a node (zero
    /// included). Shared with cycles; copied on write only while a cycle
    /// still holds it.
    counts: Arc<DomainCounts>,
    last_used: u64,
}

impl Entry {
    /// Whether `pod` counts: in the namespace, not terminating, selected
    /// (an empty or nil selector counts none, as upstream).
    fn counts_pod(&self, pod: &PodInfo) -> bool {
        let pod = &pod.pod;
        !self.selector.selects_everything()
            && pod.metadata.deletion_timestamp.is_none()
            && pod_namespace(pod) == self.namespace
            && self.selector.selects(pod_labels(pod))
    }

    fn kept(&self) -> KeptDomainCounts {
        KeptDomainCounts {
            counts: self.counts.clone(),
            missing_key: self.missing_key,
            one_node_per_domain: self.shared_domains == 0,
        }
    }

    fn add_pods(&mut self, value: &str, delta: i64) {
        if let Some(count) = Arc::make_mut(&mut self.counts).get_mut(value) {
            *count += delta;
        }
    }

    fn pod_changed(&mut self, node: &NodeInfo, pod: &PodInfo, delta: i64) {
        if !self.counts_pod(pod) {
            return;
        }
        match node.labels().get(&self.topology_key) {
            Some(value) => self.add_pods(value, delta),
            None => self.missing_key += delta,
        }
    }

    /// The node's matching pods.
    fn matching_on(&self, node: &NodeInfo) -> i64 {
        let matching = node.pods.iter().filter(|p| self.counts_pod(p)).count();
        i64::try_from(matching).unwrap_or(i64::MAX)
    }

    fn node_added(&mut self, node: &NodeInfo) {
        let matching = self.matching_on(node);
        let Some(value) = node.labels().get(&self.topology_key) else {
            self.missing_key += matching;
            return;
        };
        let nodes = self.nodes.entry(value.clone()).or_default();
        *nodes += 1;
        if *nodes == 2 {
            self.shared_domains += 1;
        }
        let counts = Arc::make_mut(&mut self.counts);
        *counts.entry(value.clone()).or_default() += matching;
    }

    fn node_removed(&mut self, node: &NodeInfo) {
        let matching = self.matching_on(node);
        let Some(value) = node.labels().get(&self.topology_key) else {
            self.missing_key -= matching;
            return;
        };
        self.add_pods(value, -matching);
        if let Some(nodes) = self.nodes.get_mut(value.as_str()) {
            *nodes = nodes.saturating_sub(1);
            if *nodes == 1 {
                self.shared_domains = self.shared_domains.saturating_sub(1);
            }
            if *nodes == 0 {
                self.nodes.remove(value.as_str());
                Arc::make_mut(&mut self.counts).remove(value.as_str());
            }
        }
    }
}

/// The entries, updated by the snapshot's pod and node changes.
#[derive(Debug, Clone, Default)]
pub struct DomainCountIndex {
    entries: Vec<Entry>,
    tick: u64,
}

impl DomainCountIndex {
    /// The counts for pods in `namespace` matched by `selector`, per value
    /// of `topology_key` over `nodes` (every node with the key, pods
    /// terminating aside). Builds the entry on first use.
    pub fn counts(
        &mut self,
        namespace: &str,
        selector: &Option<LabelSelectorRequirements>,
        topology_key: &str,
        nodes: &[NodeInfo],
    ) -> Arc<DomainCounts> {
        self.kept(namespace, selector, topology_key, nodes).counts
    }

    /// As [`Self::counts`], with the matching pods on nodes without the
    /// key and whether every domain is one node's.
    pub fn kept(
        &mut self,
        namespace: &str,
        selector: &Option<LabelSelectorRequirements>,
        topology_key: &str,
        nodes: &[NodeInfo],
    ) -> KeptDomainCounts {
        self.tick += 1;
        let tick = self.tick;
        if let Some(entry) = self.entries.iter_mut().find(|e| {
            e.topology_key == topology_key && e.namespace == namespace && e.selector == *selector
        }) {
            entry.last_used = tick;
            return entry.kept();
        }
        let mut entry = Entry {
            namespace: namespace.to_string(),
            selector: selector.clone(),
            topology_key: topology_key.to_string(),
            nodes: HashMap::default(),
            shared_domains: 0,
            missing_key: 0,
            counts: Arc::new(DomainCounts::default()),
            last_used: tick,
        };
        for node in nodes {
            entry.node_added(node);
        }
        let counts = entry.kept();
        if self.entries.len() >= MAX_ENTRIES
            && let Some(oldest) = self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(i, _)| i)
        {
            self.entries.swap_remove(oldest);
        }
        self.entries.push(entry);
        counts
    }

    /// A pod was accounted on `node`.
    pub fn pod_added(&mut self, node: &NodeInfo, pod: &PodInfo) {
        for entry in &mut self.entries {
            entry.pod_changed(node, pod, 1);
        }
    }

    /// A pod was taken off `node`.
    pub fn pod_removed(&mut self, node: &NodeInfo, pod: &PodInfo) {
        for entry in &mut self.entries {
            entry.pod_changed(node, pod, -1);
        }
    }

    /// A node (with its pods) joined.
    pub fn node_added(&mut self, node: &NodeInfo) {
        for entry in &mut self.entries {
            entry.node_added(node);
        }
    }

    /// A node (with its pods) left.
    pub fn node_removed(&mut self, node: &NodeInfo) {
        for entry in &mut self.entries {
            entry.node_removed(node);
        }
    }

    /// The number of entries kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::framework::Snapshot;
    use crate::testing::{node, pod, selector};

    const ZONE: &str = "zone";
    const HOSTNAME: &str = "kubernetes.io/hostname";

    /// One change applied to the snapshot.
    type Step = Box<dyn Fn(&mut Snapshot)>;

    fn blue() -> Option<LabelSelectorRequirements> {
        LabelSelectorRequirements::from_optional(Some(&selector(&[("color", "blue")])))
            .expect("selector")
    }

    /// What a fresh scan of the snapshot finds.
    fn scanned(snapshot: &Snapshot, namespace: &str, key: &str) -> BTreeMap<String, i64> {
        DomainCountIndex::default()
            .counts(namespace, &blue(), key, snapshot.nodes())
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    fn kept(snapshot: &Snapshot, namespace: &str, key: &str) -> BTreeMap<String, i64> {
        snapshot
            .domain_counts(namespace, &blue(), key)
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    /// The matching pods on nodes without the key and whether every
    /// domain is one node's: kept, and as a fresh scan finds them.
    fn kept_extras(snapshot: &Snapshot, key: &str) -> [(i64, bool); 2] {
        let kept = snapshot.kept_domain_counts("default", &blue(), key);
        let scanned = DomainCountIndex::default().kept("default", &blue(), key, snapshot.nodes());
        [
            (kept.missing_key, kept.one_node_per_domain),
            (scanned.missing_key, scanned.one_node_per_domain),
        ]
    }

    fn zoned(name: &str, zone: &str) -> k8s_openapi::api::core::v1::Node {
        node(name).label(ZONE, zone).obj()
    }

    #[test]
    fn kept_counts_follow_pod_and_node_changes() {
        let mut snapshot = Snapshot::new(
            [zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b")],
            [pod("p0").label("color", "blue").node("a1").obj()],
        );
        // Built now, then only updated.
        assert_eq!(
            kept(&snapshot, "default", ZONE),
            BTreeMap::from([("a".to_string(), 1), ("b".to_string(), 0)])
        );
        let mut terminating = pod("p2").label("color", "blue").node("b1").obj();
        terminating.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        let steps: Vec<(&str, Step)> = vec![
            (
                "a matching pod bound",
                Box::new(|s| {
                    s.bind_pod(pod("p1").label("color", "blue").obj(), "b1");
                }),
            ),
            (
                "a pod of another namespace",
                Box::new(|s| {
                    s.bind_pod(
                        pod("other").namespace("x").label("color", "blue").obj(),
                        "b1",
                    );
                }),
            ),
            (
                "a pod not selected",
                Box::new(|s| {
                    s.bind_pod(pod("red").label("color", "red").obj(), "a2");
                }),
            ),
            (
                "a pod relabelled into the selector",
                Box::new(|s| {
                    s.add_pod(pod("red").label("color", "blue").node("a2").obj());
                }),
            ),
            (
                "a terminating pod",
                Box::new(move |s| {
                    s.add_pod(terminating.clone());
                }),
            ),
            (
                "a pod deleted",
                Box::new(|s| {
                    s.remove_pod("default", "p0");
                }),
            ),
            (
                "a node moved to another zone",
                Box::new(|s| s.upsert_node(zoned("a2", "c"))),
            ),
            (
                "a node joined",
                Box::new(|s| s.upsert_node(zoned("d1", "d"))),
            ),
            (
                "a node lost its key",
                Box::new(|s| s.upsert_node(node("d1").obj())),
            ),
            (
                "a node removed with its pods",
                Box::new(|s| {
                    s.remove_node("b1");
                }),
            ),
        ];
        // Built before the changes too.
        kept_extras(&snapshot, ZONE);
        kept_extras(&snapshot, HOSTNAME);
        for (name, step) in steps {
            step(&mut snapshot);
            assert_eq!(
                kept(&snapshot, "default", ZONE),
                scanned(&snapshot, "default", ZONE),
                "{name}"
            );
            for key in [ZONE, HOSTNAME] {
                let [kept, scanned] = kept_extras(&snapshot, key);
                assert_eq!(kept, scanned, "{name}: {key}");
            }
        }
        assert_eq!(
            kept(&snapshot, "default", ZONE),
            BTreeMap::from([("a".to_string(), 0), ("c".to_string(), 1)])
        );
        assert_eq!(snapshot.nodes_with_label(ZONE), 2);
    }

    #[test]
    fn pods_on_nodes_without_the_key_and_shared_domains_are_kept() {
        let mut snapshot = Snapshot::new(
            [zoned("a1", "a"), node("n1").obj(), node("n2").obj()],
            [
                pod("p1").label("color", "blue").node("n1").obj(),
                pod("p2").label("color", "blue").node("n2").obj(),
                pod("p3").label("color", "blue").node("a1").obj(),
                pod("p4").label("color", "red").node("n2").obj(),
            ],
        );
        let zone = snapshot.kept_domain_counts("default", &blue(), ZONE);
        assert_eq!((zone.missing_key, zone.one_node_per_domain), (2, true));
        let host = snapshot.kept_domain_counts("default", &blue(), HOSTNAME);
        assert_eq!((host.missing_key, host.one_node_per_domain), (0, true));
        // Another node in zone a, and n2 takes n1's hostname.
        snapshot.upsert_node(zoned("a2", "a"));
        snapshot.upsert_node(node("n2").label(HOSTNAME, "n1").obj());
        let zone = snapshot.kept_domain_counts("default", &blue(), ZONE);
        assert_eq!((zone.missing_key, zone.one_node_per_domain), (2, false));
        let host = snapshot.kept_domain_counts("default", &blue(), HOSTNAME);
        assert_eq!(host.counts.get("n1"), Some(&2));
        assert!(!host.one_node_per_domain);
        snapshot.remove_node("n2");
        let host = snapshot.kept_domain_counts("default", &blue(), HOSTNAME);
        assert_eq!(host.counts.get("n1"), Some(&1));
        assert!(host.one_node_per_domain);
        let zone = snapshot.kept_domain_counts("default", &blue(), ZONE);
        assert_eq!(zone.missing_key, 1);
    }

    #[test]
    fn least_recently_used_entries_are_dropped() {
        let snapshot = Snapshot::new([zoned("a1", "a")], []);
        let mut index = DomainCountIndex::default();
        for i in 0..=MAX_ENTRIES {
            index.counts(&format!("ns-{i}"), &blue(), ZONE, snapshot.nodes());
        }
        assert_eq!(index.len(), MAX_ENTRIES);
    }

    #[test]
    fn empty_and_nil_selectors_count_no_pod() {
        let snapshot = Snapshot::new(
            [zoned("a1", "a")],
            [pod("p").label("color", "blue").node("a1").obj()],
        );
        let everything =
            LabelSelectorRequirements::from_optional(Some(&selector(&[]))).expect("selector");
        for selector in [everything, None] {
            let counts = snapshot.domain_counts("default", &selector, ZONE);
            assert_eq!(counts.get("a"), Some(&0));
        }
    }
}
