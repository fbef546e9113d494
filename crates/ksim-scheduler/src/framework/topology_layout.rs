//! Each node's domain for one topology key, kept in the [`super::Snapshot`]
//! between cycles: the distinct values of the key (nodes without it fall
//! in the domain "", as upstream's PreScore reads a missing label) and,
//! per node, which value it has and whether it carries the key at all.
//! Built by one scan on first use; dropped when a node is added, removed
//! or relabelled. A cycle then resolves a node's domain by its position in
//! the snapshot, without a label lookup or a string hash per node.

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::FixedState;

use super::node_info::NodeInfo;

/// One topology key's domains over the snapshot's nodes.
#[derive(Debug, Clone, Default)]
pub struct TopologyLayout {
    /// The distinct values, in the order of the nodes first carrying them.
    pub values: Arc<Vec<String>>,
    /// Per node (its position in the snapshot), the position of its value
    /// in `values` ("" when it lacks the key).
    pub positions: Vec<u32>,
    /// Per node, whether it carries the key.
    pub present: Vec<bool>,
}

impl TopologyLayout {
    /// The layout of `key` over `nodes`, indexed in their order.
    pub fn of<'a>(nodes: impl IntoIterator<Item = &'a NodeInfo>, key: &str) -> Self {
        let mut values = Vec::new();
        let mut known: HashMap<&str, u32, FixedState> = HashMap::default();
        let mut positions = Vec::new();
        let mut present = Vec::new();
        for node in nodes {
            let value = node.labels().get(key);
            present.push(value.is_some());
            let value = value.map_or("", String::as_str);
            let position = *known.entry(value).or_insert_with(|| {
                values.push(value.to_string());
                u32::try_from(values.len() - 1).expect("fewer domains than u32::MAX")
            });
            positions.push(position);
        }
        TopologyLayout {
            values: Arc::new(values),
            positions,
            present,
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Node;
    use serde_json::json;

    use super::*;

    fn node(name: &str, labels: serde_json::Value) -> NodeInfo {
        let node: Node =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))
                .expect("node");
        NodeInfo::new(Arc::new(node))
    }

    #[test]
    fn nodes_share_a_position_per_value_and_keyless_nodes_fall_in_the_empty_domain() {
        let nodes = [
            node("a", json!({"zone": "z1"})),
            node("b", json!({"zone": "z2"})),
            node("c", json!({})),
            node("d", json!({"zone": "z1"})),
            node("e", json!({"zone": ""})),
        ];
        let layout = TopologyLayout::of(&nodes, "zone");
        assert_eq!(*layout.values, vec!["z1", "z2", ""]);
        assert_eq!(layout.positions, vec![0, 1, 2, 0, 2]);
        assert_eq!(layout.present, vec![true, true, false, true, true]);
    }

    fn node_object(name: &str, zone: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"zone": zone}}}))
            .expect("node")
    }

    #[test]
    fn the_snapshot_relays_its_layouts_when_nodes_are_added_relabelled_or_removed() {
        let mut snapshot = super::super::Snapshot::new(
            [node_object("a", "z1"), node_object("b", "z2")],
            std::iter::empty(),
        );
        let zone_of = |snapshot: &super::super::Snapshot, name: &str| {
            let node = snapshot.get(name).expect("node");
            let at = snapshot.position_of(node).expect("the snapshot's node");
            let layout = snapshot.topology_layout("zone");
            layout.values[layout.positions[at] as usize].clone()
        };
        assert_eq!(zone_of(&snapshot, "b"), "z2");
        snapshot.upsert_node(node_object("b", "z3"));
        assert_eq!(zone_of(&snapshot, "b"), "z3");
        snapshot.upsert_node(node_object("c", "z1"));
        assert_eq!(zone_of(&snapshot, "c"), "z1");
        assert!(snapshot.remove_node("a"));
        assert_eq!(zone_of(&snapshot, "b"), "z3");
        assert_eq!(zone_of(&snapshot, "c"), "z1");
        let stranger = node("x", json!({"zone": "z1"}));
        assert_eq!(snapshot.position_of(&stranger), None);
    }
}
