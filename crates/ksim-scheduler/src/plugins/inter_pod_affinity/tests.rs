//! Tests of InterPodAffinity: Filter and Score tables in the spirit of
//! upstream's filtering_test.go and scoring_test.go.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodAffinityTerm;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::*;
use crate::framework::Code;
use crate::testing::{
    NodeBuilder, PodBuilder, affinity_term, filter_all, messages, node, pod, score_all, selector,
};

const OK: &str = "";
const AFFINITY: &str = ERR_REASON_AFFINITY_RULES_NOT_MATCH;
const ANTI: &str = ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH;
const EXISTING: &str = ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH;
const HOST: &str = "kubernetes.io/hostname";

fn plugin() -> InterPodAffinity {
    InterPodAffinity::new(&InterPodAffinityArgs::default())
}

/// n1, n2 in zone z1; n3 in z2.
fn nodes() -> Vec<NodeBuilder> {
    vec![
        node("n1").label("zone", "z1"),
        node("n2").label("zone", "z1"),
        node("n3").label("zone", "z2"),
    ]
}

fn snapshot(existing: Vec<PodBuilder>) -> Snapshot {
    Snapshot::new(
        nodes().into_iter().map(NodeBuilder::obj),
        existing.into_iter().map(PodBuilder::obj),
    )
}

fn check_filter(name: &str, incoming: PodBuilder, snapshot: &Snapshot, expected: &[&str]) {
    let statuses = filter_all(&plugin(), &incoming.obj(), snapshot);
    assert_eq!(messages(&statuses), expected, "{name}");
    for status in &statuses {
        match status.message().as_str() {
            AFFINITY => assert_eq!(status.code(), Code::UnschedulableAndUnresolvable, "{name}"),
            ANTI | EXISTING => assert_eq!(status.code(), Code::Unschedulable, "{name}"),
            _ => {}
        }
    }
}

fn term_in_namespaces(labels: &[(&str, &str)], key: &str, namespaces: &[&str]) -> PodAffinityTerm {
    PodAffinityTerm {
        namespaces: Some(namespaces.iter().map(|n| n.to_string()).collect()),
        ..affinity_term(labels, key)
    }
}

#[test]
fn filter_required_affinity() {
    let security = || pod("e").label("security", "S1").node("n1");
    let s = snapshot(vec![security()]);
    check_filter("no affinity", pod("p"), &s, &[OK, OK, OK]);
    check_filter(
        "affinity to an existing pod on its host",
        pod("p").pod_affinity(affinity_term(&[("security", "S1")], HOST)),
        &s,
        &[OK, AFFINITY, AFFINITY],
    );
    check_filter(
        "affinity by zone",
        pod("p").pod_affinity(affinity_term(&[("security", "S1")], "zone")),
        &s,
        &[OK, OK, AFFINITY],
    );
    check_filter(
        "pod in another namespace does not match",
        pod("p").pod_affinity(term_in_namespaces(&[("security", "S1")], HOST, &["other"])),
        &s,
        &[AFFINITY, AFFINITY, AFFINITY],
    );
    check_filter(
        "nodes without the topology key fail",
        pod("p").pod_affinity(affinity_term(&[("security", "S1")], "rack")),
        &s,
        &[AFFINITY, AFFINITY, AFFINITY],
    );
    check_filter(
        "first pod of a self-affine group goes anywhere with the key",
        pod("p")
            .label("app", "db")
            .pod_affinity(affinity_term(&[("app", "db")], "zone")),
        &s,
        &[OK, OK, OK],
    );
    check_filter(
        "no match and not self-affine",
        pod("p").pod_affinity(affinity_term(&[("app", "db")], "zone")),
        &s,
        &[AFFINITY, AFFINITY, AFFINITY],
    );
    check_filter(
        "all terms must match the same pods",
        pod("p")
            .pod_affinity(affinity_term(&[("security", "S1")], "zone"))
            .pod_affinity(affinity_term(&[("app", "db")], "zone")),
        &s,
        &[AFFINITY, AFFINITY, AFFINITY],
    );
}

#[test]
fn filter_required_anti_affinity() {
    let s = snapshot(vec![pod("e").label("security", "S1").node("n1")]);
    check_filter(
        "anti-affinity by host",
        pod("p").pod_anti_affinity(affinity_term(&[("security", "S1")], HOST)),
        &s,
        &[ANTI, OK, OK],
    );
    check_filter(
        "anti-affinity by zone",
        pod("p").pod_anti_affinity(affinity_term(&[("security", "S1")], "zone")),
        &s,
        &[ANTI, ANTI, OK],
    );
    check_filter(
        "anti-affinity matching nothing",
        pod("p").pod_anti_affinity(affinity_term(&[("security", "S2")], "zone")),
        &s,
        &[OK, OK, OK],
    );
}

#[test]
fn filter_existing_pods_anti_affinity() {
    let existing = pod("e")
        .label("app", "web")
        .pod_anti_affinity(affinity_term(&[("app", "web")], "zone"))
        .node("n1");
    let s = snapshot(vec![existing]);
    check_filter(
        "matching pod kept out of the zone",
        pod("p").label("app", "web"),
        &s,
        &[EXISTING, EXISTING, OK],
    );
    check_filter(
        "other pods unaffected",
        pod("p").label("app", "db"),
        &s,
        &[OK, OK, OK],
    );
    check_filter(
        "pods in other namespaces unaffected",
        pod("p").label("app", "web").namespace("other"),
        &s,
        &[OK, OK, OK],
    );
}

#[test]
fn filter_namespace_selector() {
    let mut s = snapshot(vec![
        pod("e")
            .label("security", "S1")
            .namespace("team-a")
            .node("n3"),
    ]);
    s.namespaces.insert(
        "team-a".to_string(),
        BTreeMap::from([("team".to_string(), "a".to_string())]),
    );
    s.namespaces.insert(
        "team-b".to_string(),
        BTreeMap::from([("team".to_string(), "b".to_string())]),
    );
    let with_selector = |ns_selector: LabelSelector| PodAffinityTerm {
        namespace_selector: Some(ns_selector),
        ..affinity_term(&[("security", "S1")], "zone")
    };
    check_filter(
        "selector picks team-a",
        pod("p").pod_affinity(with_selector(selector(&[("team", "a")]))),
        &s,
        &[AFFINITY, AFFINITY, OK],
    );
    check_filter(
        "selector picks team-b",
        pod("p").pod_affinity(with_selector(selector(&[("team", "b")]))),
        &s,
        &[AFFINITY, AFFINITY, AFFINITY],
    );
    check_filter(
        "empty selector picks all namespaces",
        pod("p").pod_affinity(with_selector(LabelSelector::default())),
        &s,
        &[AFFINITY, AFFINITY, OK],
    );
}

#[test]
fn pre_filter_skips_without_any_affinity() {
    let mut state = CycleState::new();
    let (_, status) = plugin().pre_filter(
        &mut state,
        &pod("p").obj(),
        &snapshot(vec![pod("e").node("n1")]),
    );
    assert_eq!(status.code(), Code::Skip);
}

#[test]
fn score_preferred_terms() {
    let existing = || {
        vec![
            pod("e1").label("security", "S1").node("n1"),
            pod("e2").label("security", "S2").node("n3"),
        ]
    };
    let cases = [
        (
            "no preferences, no existing affinity",
            pod("p"),
            existing(),
            None,
        ),
        (
            "preferred affinity to zone of S1",
            pod("p").preferred_pod_affinity(5, affinity_term(&[("security", "S1")], "zone")),
            existing(),
            Some(vec![100, 100, 0]),
        ),
        (
            "preferred anti-affinity to zone of S1",
            pod("p").preferred_pod_anti_affinity(5, affinity_term(&[("security", "S1")], "zone")),
            existing(),
            Some(vec![0, 0, 100]),
        ),
        (
            // z1: +5 (S1) ; z2: +3 (S2) -5 ... affinity S1 weight 5, anti S2 weight 3: z1 5, z2 -3
            "affinity and anti-affinity combined",
            pod("p")
                .preferred_pod_affinity(5, affinity_term(&[("security", "S1")], "zone"))
                .preferred_pod_anti_affinity(3, affinity_term(&[("security", "S2")], "zone")),
            existing(),
            Some(vec![100, 100, 0]),
        ),
        (
            // host term: n1 gets 8, n3 gets 2 -> (s - 0) / 8
            "weights per host",
            pod("p")
                .preferred_pod_affinity(8, affinity_term(&[("security", "S1")], HOST))
                .preferred_pod_affinity(2, affinity_term(&[("security", "S2")], HOST)),
            existing(),
            Some(vec![100, 0, 25]),
        ),
        (
            "existing pod's required affinity counts with hardPodAffinityWeight",
            pod("p").label("app", "web"),
            vec![
                pod("e")
                    .pod_affinity(affinity_term(&[("app", "web")], "zone"))
                    .node("n3"),
            ],
            Some(vec![0, 0, 100]),
        ),
        (
            "existing pod's preferred anti-affinity repels",
            pod("p").label("app", "web"),
            vec![
                pod("e")
                    .preferred_pod_anti_affinity(10, affinity_term(&[("app", "web")], "zone"))
                    .node("n3"),
            ],
            Some(vec![100, 100, 0]),
        ),
    ];
    for (name, incoming, existing, expected) in cases {
        assert_eq!(
            score_all(&plugin(), &incoming.obj(), &snapshot(existing)),
            expected,
            "{name}"
        );
    }
}

#[test]
fn ignore_preferred_terms_of_existing_pods_skips() {
    let plugin = InterPodAffinity::new(&InterPodAffinityArgs {
        ignore_preferred_terms_of_existing_pods: true,
        ..Default::default()
    });
    let s = snapshot(vec![
        pod("e")
            .preferred_pod_anti_affinity(10, affinity_term(&[("app", "web")], "zone"))
            .node("n3"),
    ]);
    assert_eq!(
        score_all(&plugin, &pod("p").label("app", "web").obj(), &s),
        None
    );
}

#[test]
fn existing_anti_affinity_namespace_selector_reads_incoming_namespace_labels() {
    let term = PodAffinityTerm {
        namespace_selector: Some(selector(&[("team", "a")])),
        ..affinity_term(&[("app", "web")], "zone")
    };
    let mut s = snapshot(vec![
        pod("e").namespace("ops").pod_anti_affinity(term).node("n1"),
    ]);
    s.namespaces.insert(
        "team-a".to_string(),
        BTreeMap::from([("team".to_string(), "a".to_string())]),
    );
    s.namespaces.insert(
        "team-b".to_string(),
        BTreeMap::from([("team".to_string(), "b".to_string())]),
    );
    check_filter(
        "selected namespace",
        pod("p").label("app", "web").namespace("team-a"),
        &s,
        &[EXISTING, EXISTING, OK],
    );
    check_filter(
        "other namespace",
        pod("p").label("app", "web").namespace("team-b"),
        &s,
        &[OK, OK, OK],
    );
}

#[test]
fn pre_filter_extensions_track_added_and_removed_pods() {
    let s = snapshot(vec![pod("e").label("security", "S1").node("n1")]);
    let incoming = pod("p")
        .pod_anti_affinity(affinity_term(&[("security", "S1")], "zone"))
        .obj();
    let plugin = plugin();
    let mut state = CycleState::new();
    let (_, status) = plugin.pre_filter(&mut state, &incoming, &s);
    assert!(status.is_success());
    let n1 = s.get("n1").expect("n1");
    let n3 = s.get("n3").expect("n3");
    assert_eq!(plugin.filter(&state, &incoming, n1).message(), ANTI);
    let existing = n1.pods[0].clone();
    assert!(
        plugin
            .remove_pod(&mut state, &incoming, &existing, n1)
            .is_success()
    );
    assert!(plugin.filter(&state, &incoming, n1).is_success());
    assert!(
        plugin
            .add_pod(&mut state, &incoming, &existing, n3)
            .is_success()
    );
    assert_eq!(plugin.filter(&state, &incoming, n3).message(), ANTI);
    assert!(plugin.filter(&state, &incoming, n1).is_success());
}
