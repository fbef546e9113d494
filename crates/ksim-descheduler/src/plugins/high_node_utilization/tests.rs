//! Unit tests of HighNodeUtilization: underutilized nodes are emptied,
//! least used first, while the other nodes have room.

use serde_json::json;

use super::*;
use crate::nodeutil::testing::{RecordingEvictor, all_nodes, node, pod, snapshot};

fn plugin(args: serde_json::Value) -> Result<HighNodeUtilization, ArgsError> {
    HighNodeUtilization::new(decode_args(Some(&args))?)
}

fn run(args: serde_json::Value, snapshot: &ClusterSnapshot, evictor: &mut RecordingEvictor) {
    let plugin = plugin(args).expect("valid args");
    let nodes = all_nodes(snapshot);
    assert_eq!(
        plugin.balance(snapshot, &nodes, evictor),
        PluginStatus::Success
    );
}

/// busy (4 cpu, 50%), light (4 cpu, 10%), lighter (4 cpu, 5% + a pod without requests).
fn cluster() -> ClusterSnapshot {
    snapshot(
        vec![
            node("busy", "4", "16Gi", "110", json!({})),
            node("light", "4", "16Gi", "110", json!({})),
            node("lighter", "4", "16Gi", "110", json!({})),
        ],
        vec![
            pod("ns", "big", "busy", "2", "", json!({})),
            pod(
                "ns",
                "l1",
                "light",
                "400m",
                "",
                json!({"spec": {"priority": 5}}),
            ),
            pod("ns", "l0", "light", "", "", json!({})),
            pod("ns", "s1", "lighter", "200m", "", json!({})),
        ],
    )
}

#[test]
fn empties_underutilized_nodes_least_used_first() {
    let snapshot = cluster();
    let mut evictor = RecordingEvictor::default();
    run(json!({"thresholds": {"cpu": 20}}), &snapshot, &mut evictor);
    assert_eq!(evictor.names(), ["s1", "l0", "l1"]);
    assert!(evictor.strategies.iter().all(|s| s == PLUGIN_NAME));
}

#[test]
fn only_thresholding_resources_spares_pods_without_such_requests() {
    let snapshot = cluster();
    let mut evictor = RecordingEvictor::default();
    run(
        json!({"thresholds": {"cpu": 20}, "evictionModes": ["OnlyThresholdingResources"]}),
        &snapshot,
        &mut evictor,
    );
    assert_eq!(evictor.names(), ["s1", "l1"]);
}

#[test]
fn nothing_moves_without_a_schedulable_destination() {
    let snapshot = snapshot(
        vec![
            node(
                "busy",
                "4",
                "16Gi",
                "110",
                json!({"spec": {"unschedulable": true}}),
            ),
            node("light", "4", "16Gi", "110", json!({})),
        ],
        vec![
            pod("ns", "big", "busy", "2", "", json!({})),
            pod("ns", "l1", "light", "400m", "", json!({})),
        ],
    );
    let mut evictor = RecordingEvictor::default();
    run(json!({"thresholds": {"cpu": 20}}), &snapshot, &mut evictor);
    assert!(evictor.evicted.is_empty());
}

#[test]
fn number_of_nodes_and_excluded_namespaces_are_honoured() {
    let snapshot = cluster();
    let mut evictor = RecordingEvictor::default();
    run(
        json!({"thresholds": {"cpu": 20}, "numberOfNodes": 2}),
        &snapshot,
        &mut evictor,
    );
    assert!(evictor.evicted.is_empty());
    run(
        json!({"thresholds": {"cpu": 20}, "evictableNamespaces": {"exclude": ["ns"]}}),
        &snapshot,
        &mut evictor,
    );
    assert!(evictor.evicted.is_empty());
}

#[test]
fn bad_args_are_refused_naming_the_field() {
    let cases = [
        (
            json!({}),
            "thresholds",
            "no resource threshold is configured",
        ),
        (
            json!({"thresholds": {"cpu": 20}, "evictionModes": ["Everything"]}),
            "evictionModes[0]",
            "invalid eviction mode Everything",
        ),
        (
            json!({"thresholds": {"cpu": 20}, "evictableNamespaces": {"include": ["a"]}}),
            "evictableNamespaces.include",
            "only Exclude namespaces can be set, inclusion is not supported",
        ),
        (
            json!({"thresholds": {"memory": -1}}),
            "thresholds.memory",
            "memory threshold not in [0, 100] range",
        ),
    ];
    for (args, field, message) in cases {
        let error = plugin(args.clone()).expect_err(&args.to_string());
        assert_eq!(
            (error.field.as_str(), error.message.as_str()),
            (field, message)
        );
    }
}
