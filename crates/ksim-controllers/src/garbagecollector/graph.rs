//! The ownership graph of the garbage collector: every object's owners,
//! dependents, finalizers and deletion state, and the pure decision of what
//! to do with one object (`attemptToDeleteItem`, `processDeletingDependentsItem`,
//! orphaning), given which of its owners still exist.

// Keyed by uids the API server made, so foldhash rather than SipHash: a
// restored cluster puts 110,000 objects through these maps at once.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::FixedState>;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// The finalizer of a foreground deletion: dependents go first.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// The finalizer of an orphaning deletion: dependents are released.
pub const ORPHAN_FINALIZER: &str = "orphan";

/// One object as the collector knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Index of its resource type in the collector's resource list.
    pub resource: usize,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    pub resource_version: Option<String>,
    pub owners: Vec<OwnerReference>,
    pub finalizers: Vec<String>,
    pub deleting: bool,
}

impl Node {
    fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }

    /// Being deleted in the foreground (waiting for its dependents).
    pub fn deleting_dependents(&self) -> bool {
        self.deleting && self.has_finalizer(FOREGROUND_FINALIZER)
    }

    /// Being deleted with its dependents orphaned.
    pub fn orphaning(&self) -> bool {
        self.deleting && self.has_finalizer(ORPHAN_FINALIZER)
    }
}

/// Objects by UID and the reverse ownership index.
#[derive(Debug, Default)]
pub struct Graph {
    nodes: HashMap<String, Node>,
    dependents: HashMap<String, HashSet<String>>,
}

/// What an owner reference points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerState {
    /// The owner exists and is not being deleted in the foreground.
    Solid,
    /// The owner is being deleted in the foreground.
    WaitingForDependents,
    /// The owner does not exist (any more), or has another UID.
    Dangling,
    /// Unknown (its kind is not served): leave it be.
    Unknown,
}

/// What the collector does with one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to do.
    Nothing,
    /// Remove these owner references (by owner UID).
    RemoveOwners(Vec<String>),
    /// Delete the object, in the foreground when it has dependents of its own.
    Delete { foreground: bool },
}

impl Graph {
    /// The node with this UID.
    pub fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    /// Inserts or replaces a node; returns the UIDs to look at again: the
    /// node itself; those of its owners (old and new) that are being deleted
    /// and wait on or release their dependents; and its dependents when it
    /// is new or its state as an owner changed (it started or stopped a
    /// foreground deletion). An owner's ordinary update (a status change)
    /// touches none of its dependents, so a ReplicaSet's thousands of pods
    /// are not revisited each time its status is written.
    pub fn upsert(&mut self, node: Node) -> Vec<String> {
        let uid = node.uid.clone();
        let old = self.nodes.remove(&uid);
        // Owners old and new, each once, in order.
        let mut owners: Vec<&str> = node.owners.iter().map(|o| o.uid.as_str()).collect();
        if let Some(old) = &old {
            for owner in &old.owners {
                if !owners.contains(&owner.uid.as_str()) {
                    owners.push(&owner.uid);
                }
            }
        }
        let mut changed = vec![uid.clone()];
        changed.extend(
            owners
                .into_iter()
                .filter(|owner| self.nodes.get(*owner).is_some_and(|o| o.deleting))
                .map(str::to_string),
        );
        if let Some(old) = &old {
            for owner in &old.owners {
                self.unlink(&owner.uid, &uid);
            }
        }
        for owner in &node.owners {
            match self.dependents.get_mut(owner.uid.as_str()) {
                Some(set) => {
                    set.insert(uid.clone());
                }
                None => {
                    let set = HashSet::from_iter([uid.clone()]);
                    self.dependents.insert(owner.uid.clone(), set);
                }
            }
        }
        let state_changed = old
            .as_ref()
            .is_none_or(|old| old.deleting_dependents() != node.deleting_dependents());
        if state_changed {
            changed.extend(self.dependents_of(&uid));
        }
        self.nodes.insert(uid, node);
        changed
    }

    /// Forgets that `dependent` lists `owner`.
    fn unlink(&mut self, owner: &str, dependent: &str) {
        if let Some(set) = self.dependents.get_mut(owner) {
            set.remove(dependent);
            if set.is_empty() {
                self.dependents.remove(owner);
            }
        }
    }

    /// Removes a node; returns its dependents (their owner is gone) and
    /// those of its owners that are being deleted (one dependent fewer to
    /// wait on), to look at again.
    pub fn remove(&mut self, uid: &str) -> Vec<String> {
        let mut changed = self.dependents_of(uid);
        if let Some(old) = self.nodes.remove(uid) {
            for owner in &old.owners {
                self.unlink(&owner.uid, uid);
                if self.nodes.get(&owner.uid).is_some_and(|o| o.deleting) {
                    changed.push(owner.uid.clone());
                }
            }
        }
        changed
    }

    /// Whether any object in the graph lists `uid` as an owner.
    pub fn has_dependents(&self, uid: &str) -> bool {
        self.dependents
            .get(uid)
            .is_some_and(|set| set.iter().any(|d| self.nodes.contains_key(d)))
    }

    /// The UIDs of the objects listing `uid` as an owner.
    pub fn dependents_of(&self, uid: &str) -> Vec<String> {
        self.dependents
            .get(uid)
            .map(|set| {
                set.iter()
                    .filter(|d| self.nodes.contains_key(*d))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The UIDs of the nodes of resource `resource`.
    pub fn uids_of_resource(&self, resource: usize) -> Vec<String> {
        self.nodes
            .values()
            .filter(|n| n.resource == resource)
            .map(|n| n.uid.clone())
            .collect()
    }

    /// Dependents of `uid` that block its foreground deletion.
    pub fn blocking_dependents(&self, uid: &str) -> Vec<String> {
        self.dependents_of(uid)
            .into_iter()
            .filter(|d| {
                self.nodes.get(d).is_some_and(|n| {
                    n.owners
                        .iter()
                        .any(|o| o.uid == uid && o.block_owner_deletion == Some(true))
                })
            })
            .collect()
    }

    /// Whether the node with this UID needs no work: absent, or not being
    /// deleted with its dependents waited on or orphaned, and either being
    /// deleted, without owners, or with every owner in the graph and not
    /// waiting for its dependents. [`decide`] would say `Nothing` for it
    /// whatever else is known, so a restored cluster's objects, all owned
    /// by live owners, are passed over without a copy each.
    pub fn settled(&self, uid: &str) -> bool {
        let Some(node) = self.nodes.get(uid) else {
            return true;
        };
        if node.deleting_dependents() || node.orphaning() {
            return false;
        }
        node.deleting
            || node
                .owners
                .iter()
                .all(|owner| self.owner_state(owner) == Some(OwnerState::Solid))
    }

    /// The state of an owner as far as the graph knows (`None`: not in it).
    pub fn owner_state(&self, owner: &OwnerReference) -> Option<OwnerState> {
        self.nodes.get(&owner.uid).map(|n| {
            if n.deleting_dependents() {
                OwnerState::WaitingForDependents
            } else {
                OwnerState::Solid
            }
        })
    }
}

/// `attemptToDeleteItem` for a node that is not being deleted, given the
/// state of each of its owners (same order as `node.owners`).
pub fn decide(node: &Node, owner_states: &[OwnerState], has_dependents: bool) -> Decision {
    if node.deleting || node.owners.is_empty() {
        return Decision::Nothing;
    }
    let mut solid = false;
    let mut dangling = Vec::new();
    let mut waiting = Vec::new();
    for (owner, state) in node.owners.iter().zip(owner_states) {
        match state {
            OwnerState::Solid | OwnerState::Unknown => solid = true,
            OwnerState::Dangling => dangling.push(owner.uid.clone()),
            OwnerState::WaitingForDependents => waiting.push(owner.uid.clone()),
        }
    }
    if solid {
        let mut remove = dangling;
        remove.extend(waiting);
        if remove.is_empty() {
            return Decision::Nothing;
        }
        return Decision::RemoveOwners(remove);
    }
    Decision::Delete {
        foreground: !waiting.is_empty() && has_dependents,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(uid: &str, block: bool) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: uid.into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(block),
        }
    }

    fn node(uid: &str, owners: Vec<OwnerReference>) -> Node {
        Node {
            resource: 0,
            namespace: Some("default".into()),
            name: uid.into(),
            uid: uid.into(),
            resource_version: None,
            owners,
            finalizers: vec![],
            deleting: false,
        }
    }

    #[test]
    fn the_graph_tracks_dependents_and_blockers() {
        let mut graph = Graph::default();
        graph.upsert(node("rs", vec![]));
        graph.upsert(node("a", vec![owner("rs", true)]));
        graph.upsert(node("b", vec![owner("rs", false)]));
        let mut dependents = graph.dependents_of("rs");
        dependents.sort();
        assert_eq!(dependents, ["a", "b"]);
        assert_eq!(graph.blocking_dependents("rs"), ["a"]);
        assert!(graph.has_dependents("rs") && !graph.has_dependents("a"));
        let changed = graph.remove("rs");
        assert!(changed.contains(&"a".to_string()) && changed.contains(&"b".to_string()));
        graph.remove("a");
        assert_eq!(graph.dependents_of("rs"), ["b"]);
        graph.remove("b");
        assert!(
            graph.dependents.is_empty(),
            "no empty dependent sets are kept"
        );
    }

    #[test]
    fn settled_nodes_are_exactly_those_decide_leaves_alone_whatever_else_is_known() {
        let mut graph = Graph::default();
        graph.upsert(node("rs", vec![]));
        graph.upsert(node("owned", vec![owner("rs", true)]));
        graph.upsert(node("orphan-to-be", vec![owner("gone", true)]));
        graph.upsert(node("half", vec![owner("rs", true), owner("gone", true)]));
        assert!(graph.settled("rs"), "no owners");
        assert!(graph.settled("owned"), "its owner is in the graph");
        assert!(graph.settled("missing"), "not in the graph");
        assert!(
            !graph.settled("orphan-to-be"),
            "its owner must be looked up"
        );
        assert!(!graph.settled("half"), "one owner must be looked up");
        let mut foreground = node("rs", vec![]);
        foreground.deleting = true;
        foreground.finalizers = vec![FOREGROUND_FINALIZER.into()];
        graph.upsert(foreground);
        assert!(!graph.settled("owned"), "its owner waits for it");
        assert!(!graph.settled("rs"), "it waits for its dependents");
        let mut orphaning = node("o", vec![]);
        orphaning.deleting = true;
        orphaning.finalizers = vec![ORPHAN_FINALIZER.into()];
        graph.upsert(orphaning);
        assert!(!graph.settled("o"), "its dependents are to be released");
        let mut deleting = node("d", vec![owner("gone", true)]);
        deleting.deleting = true;
        graph.upsert(deleting);
        assert!(graph.settled("d"), "already being deleted");
    }

    fn sorted(mut uids: Vec<String>) -> Vec<String> {
        uids.sort();
        uids
    }

    #[test]
    fn an_owner_update_revisits_its_dependents_only_when_its_state_as_an_owner_changes() {
        let mut graph = Graph::default();
        graph.upsert(node("a", vec![owner("rs", true)]));
        assert_eq!(
            sorted(graph.upsert(node("rs", vec![]))),
            ["a", "rs"],
            "a new owner: its dependents look again"
        );
        let mut status_update = node("rs", vec![]);
        status_update.resource_version = Some("2".into());
        assert_eq!(graph.upsert(status_update), ["rs"]);
        let mut foreground = node("rs", vec![]);
        foreground.deleting = true;
        foreground.finalizers = vec![FOREGROUND_FINALIZER.into()];
        assert_eq!(sorted(graph.upsert(foreground)), ["a", "rs"]);
    }

    #[test]
    fn a_dependent_change_revisits_only_owners_being_deleted() {
        let mut graph = Graph::default();
        graph.upsert(node("rs", vec![]));
        graph.upsert(node("a", vec![owner("rs", true)]));
        assert_eq!(graph.upsert(node("a", vec![owner("rs", true)])), ["a"]);
        assert!(graph.remove("a").is_empty());
        let mut deleting = node("rs", vec![]);
        deleting.deleting = true;
        deleting.finalizers = vec![ORPHAN_FINALIZER.into()];
        graph.upsert(deleting);
        assert_eq!(
            sorted(graph.upsert(node("b", vec![owner("rs", true)]))),
            ["b", "rs"]
        );
        assert_eq!(
            graph.upsert(node("b", vec![])),
            ["b", "rs"],
            "a dropped reference revisits the owner too"
        );
        graph.upsert(node("c", vec![owner("rs", true)]));
        assert_eq!(graph.remove("c"), ["rs"]);
    }

    #[test]
    fn decisions_follow_the_owners_states() {
        use OwnerState::*;
        let one = node("p", vec![owner("rs", true)]);
        let two = node("p", vec![owner("rs", true), owner("other", false)]);
        let cases = [
            (&one, vec![Solid], false, Decision::Nothing),
            (&one, vec![Unknown], false, Decision::Nothing),
            (
                &one,
                vec![Dangling],
                false,
                Decision::Delete { foreground: false },
            ),
            (
                &one,
                vec![WaitingForDependents],
                false,
                Decision::Delete { foreground: false },
            ),
            (
                &one,
                vec![WaitingForDependents],
                true,
                Decision::Delete { foreground: true },
            ),
            (
                &two,
                vec![Dangling, Solid],
                false,
                Decision::RemoveOwners(vec!["rs".into()]),
            ),
            (
                &two,
                vec![Dangling, Dangling],
                false,
                Decision::Delete { foreground: false },
            ),
        ];
        for (node, states, has_dependents, want) in cases {
            assert_eq!(decide(node, &states, has_dependents), want, "{states:?}");
        }
        let mut deleting = one.clone();
        deleting.deleting = true;
        assert_eq!(decide(&deleting, &[Dangling], false), Decision::Nothing);
    }
}
