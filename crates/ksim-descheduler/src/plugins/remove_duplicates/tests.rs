//! Unit tests of RemoveDuplicates: what is a duplicate and how many are
//! evicted per node.

use serde_json::json;

use super::*;
use crate::nodeutil::testing::{RecordingEvictor, all_nodes, node, pod, snapshot};

fn run(args: serde_json::Value, snapshot: &ClusterSnapshot) -> RecordingEvictor {
    let plugin = RemoveDuplicates::new(decode_args(Some(&args)).expect("args")).expect("valid");
    let mut evictor = RecordingEvictor::default();
    let nodes = all_nodes(snapshot);
    assert_eq!(
        plugin.balance(snapshot, &nodes, &mut evictor),
        PluginStatus::Success
    );
    evictor
}

fn three_nodes() -> Vec<k8s_openapi::api::core::v1::Node> {
    ["n1", "n2", "n3"]
        .iter()
        .map(|name| node(name, "4", "16Gi", "110", json!({})))
        .collect()
}

#[test]
fn duplicates_over_the_upper_average_are_evicted() {
    let snapshot = snapshot(
        three_nodes(),
        vec![
            pod("ns", "a", "n1", "", "", json!({})),
            pod("ns", "b", "n1", "", "", json!({})),
            pod("ns", "c", "n1", "", "", json!({})),
        ],
    );
    // 3 pods over 3 feasible nodes: one per node, so b and c go.
    assert_eq!(run(json!({}), &snapshot).names(), ["b", "c"]);
}

#[test]
fn only_pods_above_the_upper_average_go() {
    let mut nodes = three_nodes();
    nodes.truncate(2);
    let snapshot = snapshot(
        nodes,
        vec![
            pod("ns", "a", "n1", "", "", json!({})),
            pod("ns", "b", "n1", "", "", json!({})),
            pod("ns", "c", "n1", "", "", json!({})),
            pod("ns", "d", "n1", "", "", json!({})),
            pod("ns", "e", "n2", "", "", json!({})),
            pod("ns", "f", "n2", "", "", json!({})),
        ],
    );
    // 6 pods over 2 nodes: at most 3 per node.
    assert_eq!(run(json!({}), &snapshot).names(), ["d"]);
}

#[test]
fn other_images_other_namespaces_and_excluded_owner_kinds_are_not_duplicates() {
    let other_image = json!({"spec": {"containers": [{"name": "c", "image": "redis"}]}});
    let snapshot = snapshot(
        three_nodes(),
        vec![
            pod("ns", "a", "n1", "", "", json!({})),
            pod("ns", "b", "n1", "", "", other_image),
            pod("other", "c", "n1", "", "", json!({})),
            pod(
                "ns",
                "bare",
                "n1",
                "",
                "",
                json!({"metadata": {"ownerReferences": []}}),
            ),
        ],
    );
    assert!(run(json!({}), &snapshot).evicted.is_empty());

    let snapshot = snapshot_of_two_duplicates();
    assert!(
        run(json!({"excludeOwnerKinds": ["ReplicaSet"]}), &snapshot)
            .evicted
            .is_empty()
    );
    assert!(
        run(json!({"namespaces": {"exclude": ["ns"]}}), &snapshot)
            .evicted
            .is_empty()
    );
    assert_eq!(
        run(json!({"namespaces": {"include": ["ns"]}}), &snapshot).names(),
        ["b"]
    );
}

fn snapshot_of_two_duplicates() -> ClusterSnapshot {
    snapshot(
        three_nodes(),
        vec![
            pod("ns", "a", "n1", "", "", json!({})),
            pod("ns", "b", "n1", "", "", json!({})),
        ],
    )
}

#[test]
fn nothing_is_evicted_with_fewer_than_two_feasible_nodes() {
    let taint = json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}});
    let snapshot = snapshot(
        vec![
            node("n1", "4", "16Gi", "110", json!({})),
            node("n2", "4", "16Gi", "110", taint.clone()),
            node("n3", "4", "16Gi", "110", taint),
        ],
        vec![
            pod("ns", "a", "n1", "", "", json!({})),
            pod("ns", "b", "n1", "", "", json!({})),
        ],
    );
    assert!(run(json!({}), &snapshot).evicted.is_empty());
}

#[test]
fn the_evictor_filters_are_applied() {
    let snapshot = snapshot_of_two_duplicates();
    let plugin = RemoveDuplicates::new(RemoveDuplicatesArgs::default()).expect("valid");
    let mut evictor = RecordingEvictor {
        pre_eviction_filter: Box::new(|pod| pod.metadata.name.as_deref() != Some("a")),
        ..Default::default()
    };
    let nodes = all_nodes(&snapshot);
    plugin.balance(&snapshot, &nodes, &mut evictor);
    // a is not evictable, so b is no duplicate of anything listed.
    assert!(evictor.evicted.is_empty());
}

#[test]
fn include_and_exclude_together_are_refused() {
    let args = json!({"namespaces": {"include": ["a"], "exclude": ["b"]}});
    let error =
        RemoveDuplicates::new(decode_args(Some(&args)).expect("decodes")).expect_err("both set");
    assert_eq!(error.field, "namespaces");
    assert_eq!(
        error.message,
        "only one of Include/Exclude namespaces can be set"
    );
}
