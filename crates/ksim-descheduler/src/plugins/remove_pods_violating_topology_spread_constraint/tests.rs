//! Unit tests of RemovePodsViolatingTopologySpreadConstraint: domain
//! balancing, which pods go first, node fit, inclusion policies and
//! matchLabelKeys.

use k8s_openapi::api::core::v1::Node as KNode;
use serde_json::{Value, json};

use super::*;
use crate::nodeutil::testing::{RecordingEvictor, all_nodes, node, pod, snapshot};

fn zone_node(name: &str, zone: &str, cpu: &str) -> KNode {
    node(
        name,
        cpu,
        "16Gi",
        "110",
        json!({"metadata": {"labels": {"topology.kubernetes.io/zone": zone}}}),
    )
}

fn spread(when: &str, extra: Value) -> Value {
    let mut constraint = json!({
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"app": "web"}}
    });
    if let (Some(c), Some(e)) = (constraint.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    constraint
}

fn web(name: &str, node: &str, constraint: &Value, extra: Value) -> Pod {
    let mut spec = json!({"topologySpreadConstraints": [constraint]});
    if let (Some(s), Some(e)) = (
        spec.as_object_mut(),
        extra.get("spec").and_then(Value::as_object),
    ) {
        s.extend(e.clone());
    }
    pod(
        "ns",
        name,
        node,
        "100m",
        "",
        json!({"metadata": {"labels": {"app": "web", "pod-template-hash": extra.get("hash").cloned().unwrap_or(json!("h1"))}}, "spec": spec}),
    )
}

fn run(args: Value, snapshot: &ClusterSnapshot) -> RecordingEvictor {
    let plugin =
        RemovePodsViolatingTopologySpreadConstraint::new(decode_args(Some(&args)).expect("args"))
            .expect("valid");
    let mut evictor = RecordingEvictor::default();
    let nodes = all_nodes(snapshot);
    assert_eq!(
        plugin.balance(snapshot, &nodes, &mut evictor),
        PluginStatus::Success
    );
    evictor
}

fn skewed(constraint: &Value) -> ClusterSnapshot {
    snapshot(
        vec![zone_node("a1", "a", "4"), zone_node("b1", "b", "4")],
        vec![
            web("p1", "a1", constraint, json!({})),
            web("p2", "a1", constraint, json!({})),
            web("p3", "a1", constraint, json!({})),
            web("p4", "b1", constraint, json!({})),
        ],
    )
}

#[test]
fn a_three_to_one_skew_moves_one_pod_from_the_largest_domain() {
    let snapshot = skewed(&spread("DoNotSchedule", json!({})));
    let evictor = run(json!({}), &snapshot);
    assert_eq!(evictor.evicted.len(), 1);
    assert!(evictor.names()[0] != "p4");
    assert!(evictor.strategies.iter().all(|s| s == PLUGIN_NAME));
}

#[test]
fn schedule_anyway_constraints_are_balanced_only_when_asked() {
    let snapshot = skewed(&spread("ScheduleAnyway", json!({})));
    assert!(run(json!({}), &snapshot).evicted.is_empty());
    assert_eq!(
        run(json!({"constraints": ["ScheduleAnyway"]}), &snapshot)
            .evicted
            .len(),
        1
    );
}

#[test]
fn plain_pods_go_before_pods_with_node_selectors_highest_priority_first() {
    let constraint = spread("DoNotSchedule", json!({}));
    let selector =
        json!({"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "priority": 1000}});
    let snapshot = snapshot(
        vec![
            zone_node("a1", "a", "4"),
            zone_node("b1", "b", "4"),
            zone_node("c1", "c", "4"),
        ],
        vec![
            web("selector", "a1", &constraint, selector),
            web("low", "a1", &constraint, json!({"spec": {"priority": 1}})),
            web(
                "high",
                "a1",
                &constraint,
                json!({"spec": {"priority": 100}}),
            ),
            web("none", "a1", &constraint, json!({})),
            web("b", "b1", &constraint, json!({})),
        ],
    );
    // 5 pods over 3 domains (ideal 1.67): a (4) gives 2 to c. Domain a is
    // ordered [selector, none, low, high] and the last two are taken (in
    // that order), as upstream: the plain pods of highest priority.
    assert_eq!(run(json!({}), &snapshot).names(), ["low", "high"]);
}

#[test]
fn pods_that_fit_no_node_below_the_average_are_not_evicted_with_node_fit() {
    let constraint = spread("DoNotSchedule", json!({}));
    let snapshot = snapshot(
        vec![zone_node("a1", "a", "4"), zone_node("b1", "b", "50m")],
        vec![
            web("p1", "a1", &constraint, json!({})),
            web("p2", "a1", &constraint, json!({})),
            web("p3", "a1", &constraint, json!({})),
        ],
    );
    assert!(run(json!({}), &snapshot).evicted.is_empty());
    assert_eq!(
        run(json!({"topologyBalanceNodeFit": false}), &snapshot)
            .evicted
            .len(),
        1
    );
}

#[test]
fn node_affinity_policy_decides_which_domains_count() {
    let affinity = json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]}]}]
    }}}}});
    let nodes = || {
        vec![
            zone_node("a1", "a", "4"),
            zone_node("b1", "b", "4"),
            zone_node("c1", "c", "4"),
        ]
    };
    let honour = spread("DoNotSchedule", json!({}));
    let snapshot_honour = snapshot(
        nodes(),
        vec![
            web("p1", "a1", &honour, affinity.clone()),
            web("p2", "a1", &honour, affinity.clone()),
            web("p3", "b1", &honour, affinity.clone()),
        ],
    );
    // Zone c is not eligible: 2/1 is within maxSkew.
    assert!(run(json!({}), &snapshot_honour).evicted.is_empty());

    let ignore = spread("DoNotSchedule", json!({"nodeAffinityPolicy": "Ignore"}));
    let snapshot_ignore = snapshot(
        nodes(),
        vec![
            web("p1", "a1", &ignore, affinity.clone()),
            web("p2", "a1", &ignore, affinity.clone()),
            web("p3", "b1", &ignore, affinity),
        ],
    );
    // Zone c counts (0 pods): 2/1/0 is skewed; the pod still cannot go to c
    // but fits b without node fit... b is not below the average, so with
    // node fit nothing is evicted; without it, one pod of a is.
    assert!(run(json!({}), &snapshot_ignore).evicted.is_empty());
    assert_eq!(
        run(json!({"topologyBalanceNodeFit": false}), &snapshot_ignore)
            .evicted
            .len(),
        1
    );
}

#[test]
fn match_label_keys_split_pods_by_their_values() {
    let constraint = spread(
        "DoNotSchedule",
        json!({"matchLabelKeys": ["pod-template-hash"]}),
    );
    let old = json!({"hash": "old"});
    let snapshot = snapshot(
        vec![zone_node("a1", "a", "4"), zone_node("b1", "b", "4")],
        vec![
            web("n1", "a1", &constraint, json!({})),
            web("n2", "b1", &constraint, json!({})),
            web("o1", "a1", &constraint, old.clone()),
            web("o2", "a1", &constraint, old),
        ],
    );
    // Without the key, 3/1 would be skewed; per hash, 1/1 and 2/0 -> 1 move.
    let evictor = run(json!({}), &snapshot);
    assert_eq!(evictor.evicted.len(), 1);
    assert!(evictor.names()[0].starts_with('o'));
}

#[test]
fn the_plugin_label_selector_and_namespaces_filter_pods() {
    let snapshot = skewed(&spread("DoNotSchedule", json!({})));
    assert!(
        run(
            json!({"labelSelector": {"matchLabels": {"app": "db"}}}),
            &snapshot
        )
        .evicted
        .is_empty()
    );
    assert!(
        run(json!({"namespaces": {"exclude": ["ns"]}}), &snapshot)
            .evicted
            .is_empty()
    );
}

#[test]
fn bad_args_are_refused_naming_the_field() {
    let cases = [
        (
            json!({"constraints": ["Sometimes"]}),
            "constraints[0]",
            "constraint Sometimes is not one of [DoNotSchedule ScheduleAnyway]",
        ),
        (
            json!({"namespaces": {"include": ["a"], "exclude": ["b"]}}),
            "namespaces",
            "only one of Include/Exclude namespaces can be set",
        ),
    ];
    for (args, field, message) in cases {
        let error = RemovePodsViolatingTopologySpreadConstraint::new(
            decode_args(Some(&args)).expect("decodes"),
        )
        .expect_err("invalid");
        assert_eq!(
            (error.field.as_str(), error.message.as_str()),
            (field, message)
        );
    }
    let error = RemovePodsViolatingTopologySpreadConstraint::new(
        decode_args(Some(
            &json!({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}),
        ))
        .expect("decodes"),
    )
    .expect_err("In without values");
    assert_eq!(error.field, "labelSelector");
}
