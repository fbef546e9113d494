//! Unit tests of LowNodeUtilization: args validation, which nodes are
//! sources and destinations, eviction order and the stop conditions.

use serde_json::json;

use super::*;
use crate::nodeutil::testing::{RecordingEvictor, all_nodes, node, pod, snapshot};

fn plugin(args: serde_json::Value) -> Result<LowNodeUtilization, ArgsError> {
    LowNodeUtilization::new(decode_args(Some(&args))?)
}

fn run(args: serde_json::Value, snapshot: &ClusterSnapshot, evictor: &mut RecordingEvictor) {
    let plugin = plugin(args).expect("valid args");
    let nodes = all_nodes(snapshot);
    assert_eq!(
        plugin.balance(snapshot, &nodes, evictor),
        PluginStatus::Success
    );
}

/// n1 (4 cpu) runs four 800m pods (80%); n2 (4 cpu) one 200m pod (5%).
fn overloaded_cluster() -> ClusterSnapshot {
    snapshot(
        vec![
            node("n1", "4", "16Gi", "110", json!({})),
            node("n2", "4", "16Gi", "110", json!({})),
        ],
        vec![
            pod(
                "ns",
                "high",
                "n1",
                "800m",
                "",
                json!({"spec": {"priority": 100}}),
            ),
            pod("ns", "none", "n1", "800m", "", json!({})),
            pod(
                "ns",
                "mid",
                "n1",
                "800m",
                "",
                json!({"spec": {"priority": 10}}),
            ),
            pod(
                "ns",
                "low",
                "n1",
                "800m",
                "",
                json!({"spec": {"priority": 1}}),
            ),
            pod("ns", "small", "n2", "200m", "", json!({})),
        ],
    )
}

fn cpu_args(threshold: f64, target: f64) -> serde_json::Value {
    json!({"thresholds": {"cpu": threshold}, "targetThresholds": {"cpu": target}})
}

#[test]
fn evicts_lowest_priority_first_until_the_node_is_under_its_target() {
    let snapshot = overloaded_cluster();
    let mut evictor = RecordingEvictor::default();
    run(cpu_args(20.0, 50.0), &snapshot, &mut evictor);
    // 3200m -> 2400m (60%) -> 1600m (40%, under 50%).
    assert_eq!(evictor.names(), ["none", "low"]);
    assert!(evictor.strategies.iter().all(|s| s == PLUGIN_NAME));
}

#[test]
fn stops_when_the_underutilized_nodes_have_no_room_left() {
    let snapshot = snapshot(
        vec![
            node("n1", "4", "16Gi", "110", json!({})),
            node("n2", "2", "16Gi", "110", json!({})),
        ],
        vec![
            pod("ns", "a", "n1", "800m", "", json!({})),
            pod("ns", "b", "n1", "800m", "", json!({})),
            pod("ns", "c", "n1", "800m", "", json!({})),
            pod("ns", "d", "n1", "800m", "", json!({})),
            pod("ns", "small", "n2", "200m", "", json!({})),
        ],
    );
    let mut evictor = RecordingEvictor::default();
    run(cpu_args(20.0, 50.0), &snapshot, &mut evictor);
    // n2 may hold 50% of 2 cpu = 1000m and holds 200m: room for one 800m pod.
    assert_eq!(evictor.names(), ["a"]);
}

#[test]
fn the_per_node_eviction_limit_of_the_args_is_honoured() {
    let snapshot = overloaded_cluster();
    let mut evictor = RecordingEvictor::default();
    let mut args = cpu_args(20.0, 50.0);
    args["evictionLimits"] = json!({"node": 1});
    run(args, &snapshot, &mut evictor);
    assert_eq!(evictor.names(), ["none"]);
}

#[test]
fn filtered_pods_and_excluded_namespaces_are_not_evicted() {
    let snapshot = overloaded_cluster();
    let mut evictor = RecordingEvictor {
        filter: Box::new(|pod| pod.metadata.name.as_deref() != Some("none")),
        ..Default::default()
    };
    run(cpu_args(20.0, 50.0), &snapshot, &mut evictor);
    assert_eq!(evictor.names(), ["low", "mid"]);

    let mut evictor = RecordingEvictor::default();
    let mut args = cpu_args(20.0, 50.0);
    args["evictableNamespaces"] = json!({"exclude": ["ns"]});
    run(args, &snapshot, &mut evictor);
    assert!(evictor.evicted.is_empty());
}

#[test]
fn nothing_happens_without_enough_underutilized_schedulable_nodes() {
    let snapshot = overloaded_cluster();
    let mut evictor = RecordingEvictor::default();
    let mut args = cpu_args(20.0, 50.0);
    args["numberOfNodes"] = json!(1);
    run(args, &snapshot, &mut evictor);
    assert!(
        evictor.evicted.is_empty(),
        "one underutilized node is not more than 1"
    );

    let cordoned = snapshot_with_cordoned_n2();
    let mut evictor = RecordingEvictor::default();
    run(cpu_args(20.0, 50.0), &cordoned, &mut evictor);
    assert!(
        evictor.evicted.is_empty(),
        "a cordoned node is not underutilized"
    );
}

fn snapshot_with_cordoned_n2() -> ClusterSnapshot {
    snapshot(
        vec![
            node("n1", "4", "16Gi", "110", json!({})),
            node(
                "n2",
                "4",
                "16Gi",
                "110",
                json!({"spec": {"unschedulable": true}}),
            ),
        ],
        vec![
            pod("ns", "a", "n1", "3", "", json!({})),
            pod("ns", "small", "n2", "200m", "", json!({})),
        ],
    )
}

#[test]
fn pods_that_tolerate_no_destination_taint_stay() {
    let snapshot = snapshot(
        vec![
            node("n1", "4", "16Gi", "110", json!({})),
            node(
                "n2",
                "4",
                "16Gi",
                "110",
                json!({"spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}}),
            ),
        ],
        vec![
            pod("ns", "plain", "n1", "1500m", "", json!({})),
            pod(
                "ns",
                "tolerant",
                "n1",
                "1500m",
                "",
                json!({"spec": {"tolerations": [{"key": "dedicated", "operator": "Exists"}], "priority": 5}}),
            ),
        ],
    );
    let mut evictor = RecordingEvictor::default();
    run(cpu_args(20.0, 50.0), &snapshot, &mut evictor);
    assert_eq!(evictor.names(), ["tolerant"]);
}

#[test]
fn deviation_thresholds_classify_around_the_average() {
    // Usage 80% and 5% (average 42.5%): under 42.5-10, over 42.5+10.
    let snapshot = overloaded_cluster();
    let mut evictor = RecordingEvictor::default();
    let mut args = cpu_args(10.0, 10.0);
    args["useDeviationThresholds"] = json!(true);
    run(args, &snapshot, &mut evictor);
    // n1 may hold 52.5% of 4000m = 2100m: 3200 -> 2400 -> 1600.
    assert_eq!(evictor.names(), ["none", "low"]);
}

#[test]
fn the_pods_resource_counts_by_default() {
    // cpu is balanced enough, but n1 is over the pods target (3 of 4).
    let snapshot = snapshot(
        vec![
            node("n1", "4", "16Gi", "4", json!({})),
            node("n2", "4", "16Gi", "4", json!({})),
        ],
        vec![
            pod("ns", "a", "n1", "100m", "", json!({})),
            pod("ns", "b", "n1", "100m", "", json!({})),
            pod("ns", "c", "n1", "100m", "", json!({})),
        ],
    );
    let mut evictor = RecordingEvictor::default();
    run(
        json!({"thresholds": {"pods": 30}, "targetThresholds": {"pods": 50}}),
        &snapshot,
        &mut evictor,
    );
    assert_eq!(evictor.names(), ["a"]);
}

#[test]
fn bad_args_are_refused_naming_the_field() {
    let cases = [
        (
            cpu_args(60.0, 50.0),
            "thresholds.cpu",
            "thresholds' cpu percentage is greater than targetThresholds'",
        ),
        (
            json!({"thresholds": {"cpu": 10}, "targetThresholds": {"memory": 50}}),
            "targetThresholds",
            "thresholds and targetThresholds configured different resources",
        ),
        (
            json!({"thresholds": {}, "targetThresholds": {"cpu": 50}}),
            "thresholds",
            "thresholds config is not valid: no resource threshold is configured",
        ),
        (
            json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 150}}),
            "targetThresholds.cpu",
            "targetThresholds config is not valid: cpu threshold not in [0, 100] range",
        ),
        (
            json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50}, "evictableNamespaces": {"include": ["a"]}}),
            "evictableNamespaces.include",
            "only Exclude namespaces can be set, inclusion is not supported",
        ),
        (
            json!({"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50}, "metricsUtilization": {"source": "Prometheus"}}),
            "metricsUtilization",
            "prometheus query is required when metrics source is set to \"Prometheus\"",
        ),
    ];
    for (args, field, message) in cases {
        let error = plugin(args.clone()).expect_err(&args.to_string());
        assert_eq!(
            (error.field.as_str(), error.message.as_str()),
            (field, message)
        );
    }
    let error = plugin(json!({"thresholds": {"cpu": 10}, "targetThreshold": {}}))
        .expect_err("unknown field");
    assert!(error.message.contains("targetThreshold"), "{error}");
    assert!(
        plugin(
            cpu_args(60.0, 50.0)
                .as_object()
                .cloned()
                .map(|mut a| {
                    a.insert("useDeviationThresholds".into(), json!(true));
                    serde_json::Value::Object(a)
                })
                .expect("object")
        )
        .is_ok()
    );
}
