//! Tests of PodTopologySpread: Filter and Score tables in the spirit of
//! upstream's filtering_test.go and scoring_test.go.

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use ksim_core::selector::LabelSelectorRequirements;

use super::*;
use crate::framework::{Code, WorkloadKind, WorkloadSelector};
use crate::testing::{
    NodeBuilder, PodBuilder, filter_all, messages, node, pod, score_all, selector,
};

const OK: &str = "";
const SKEW: &str = ERR_REASON_CONSTRAINTS_NOT_MATCH;
const LABEL: &str = ERR_REASON_NODE_LABEL_NOT_MATCH;

fn plugin() -> PodTopologySpread {
    PodTopologySpread::new(&PodTopologySpreadArgs::default())
}

/// node-a, node-b in zone1; node-x, node-y in zone2.
fn four_nodes() -> Vec<NodeBuilder> {
    vec![
        node("node-a").label("zone", "zone1"),
        node("node-b").label("zone", "zone1"),
        node("node-x").label("zone", "zone2"),
        node("node-y").label("zone", "zone2"),
    ]
}

fn foo_pods(per_node: &[(&str, usize)]) -> Vec<PodBuilder> {
    per_node
        .iter()
        .flat_map(|(node, n)| {
            (0..*n).map(move |i| pod(&format!("p-{node}-{i}")).label("foo", "").node(node))
        })
        .collect()
}

fn check_filter(
    name: &str,
    incoming: Pod,
    nodes: Vec<NodeBuilder>,
    existing: Vec<PodBuilder>,
    expected: &[&str],
) {
    let snapshot = Snapshot::new(
        nodes.into_iter().map(NodeBuilder::obj),
        existing.into_iter().map(PodBuilder::obj),
    );
    assert_eq!(
        messages(&filter_all(&plugin(), &incoming, &snapshot)),
        expected,
        "{name}"
    );
}

fn exists_foo() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
        match_labels: None,
        match_expressions: Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: "foo".to_string(),
                operator: "Exists".to_string(),
                values: None,
            },
        ]),
    }
}

fn constraint(max_skew: i32, key: &str, when: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew,
        topology_key: key.to_string(),
        when_unsatisfiable: when.to_string(),
        label_selector: Some(exists_foo()),
        ..Default::default()
    }
}

fn spread_pod(constraints: Vec<TopologySpreadConstraint>) -> PodBuilder {
    constraints
        .into_iter()
        .fold(pod("p").label("foo", ""), |p, c| p.spread_constraint(c))
}

#[test]
fn filter_single_constraint() {
    let zone = || spread_pod(vec![constraint(1, "zone", "DoNotSchedule")]).obj();
    let host = |skew| {
        spread_pod(vec![constraint(
            skew,
            "kubernetes.io/hostname",
            "DoNotSchedule",
        )])
        .obj()
    };
    check_filter(
        "no existing pods",
        zone(),
        four_nodes(),
        vec![],
        &[OK, OK, OK, OK],
    );
    check_filter(
        "incoming pod does not match itself",
        pod("p")
            .label("bar", "")
            .spread_constraint(constraint(1, "zone", "DoNotSchedule"))
            .obj(),
        four_nodes(),
        foo_pods(&[("node-a", 1)]),
        &[OK, OK, OK, OK],
    );
    check_filter(
        "pods in other namespaces do not count",
        zone(),
        four_nodes(),
        foo_pods(&[("node-a", 2)])
            .into_iter()
            .map(|p| p.namespace("other"))
            .collect(),
        &[OK, OK, OK, OK],
    );
    check_filter(
        "3/3 spread, all fit",
        zone(),
        four_nodes(),
        foo_pods(&[("node-a", 2), ("node-b", 1), ("node-x", 1), ("node-y", 2)]),
        &[OK, OK, OK, OK],
    );
    check_filter(
        "2/1: only zone2 fits",
        zone(),
        four_nodes(),
        foo_pods(&[("node-a", 1), ("node-b", 1), ("node-x", 1)]),
        &[SKEW, SKEW, OK, OK],
    );
    let mut nodes = four_nodes();
    nodes[1] = node("node-b");
    check_filter(
        "1/2 because node-b has no zone label",
        zone(),
        nodes,
        foo_pods(&[("node-a", 1), ("node-b", 1), ("node-x", 1), ("node-y", 1)]),
        &[OK, LABEL, SKEW, SKEW],
    );
    check_filter(
        "no node has the key",
        spread_pod(vec![constraint(1, "rack", "DoNotSchedule")]).obj(),
        four_nodes(),
        vec![],
        &[LABEL, LABEL, LABEL, LABEL],
    );
    let per_node = || foo_pods(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]);
    check_filter(
        "2/1/0/3 on hostname: only node-x",
        host(1),
        four_nodes(),
        per_node(),
        &[SKEW, SKEW, OK, SKEW],
    );
    check_filter(
        "2/1/0/3 with maxSkew 2: node-b and node-x",
        host(2),
        four_nodes(),
        per_node(),
        &[SKEW, OK, OK, SKEW],
    );
    check_filter(
        "terminating pods do not count",
        zone(),
        four_nodes(),
        foo_pods(&[("node-a", 1)])
            .into_iter()
            .map(|p| {
                let mut pod = p.obj();
                pod.metadata.deletion_timestamp = Some(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
                );
                PodBuilder::from(pod)
            })
            .collect(),
        &[OK, OK, OK, OK],
    );
    check_filter(
        "ScheduleAnyway constraints do not filter",
        spread_pod(vec![constraint(1, "zone", "ScheduleAnyway")]).obj(),
        four_nodes(),
        foo_pods(&[("node-a", 5)]),
        &[OK, OK, OK, OK],
    );
}

#[test]
fn filter_multiple_constraints_must_all_hold() {
    let incoming = spread_pod(vec![
        constraint(1, "zone", "DoNotSchedule"),
        constraint(1, "kubernetes.io/hostname", "DoNotSchedule"),
    ])
    .obj();
    // zone1: 3 pods, zone2: 2 pods; per node a1 b2 x2 y0.
    check_filter(
        "zone says zone2, hostname says node-y",
        incoming,
        four_nodes(),
        foo_pods(&[("node-a", 1), ("node-b", 2), ("node-x", 2)]),
        &[SKEW, SKEW, SKEW, OK],
    );
}

#[test]
fn filter_min_domains_treats_global_minimum_as_zero() {
    let with_min_domains = |min| {
        let mut c = constraint(1, "zone", "DoNotSchedule");
        c.min_domains = Some(min);
        spread_pod(vec![c]).obj()
    };
    let existing = || foo_pods(&[("node-a", 1), ("node-x", 1)]);
    // Two domains with one pod each: fine with minDomains 2, but with 3
    // domains required the minimum counts as 0 so skew becomes 2.
    check_filter(
        "enough domains",
        with_min_domains(2),
        four_nodes(),
        existing(),
        &[OK, OK, OK, OK],
    );
    check_filter(
        "too few domains",
        with_min_domains(3),
        four_nodes(),
        existing(),
        &[SKEW, SKEW, SKEW, SKEW],
    );
}

#[test]
fn filter_node_inclusion_policies() {
    // zone3 only on a node the pod's affinity excludes or that is tainted.
    let nodes = || {
        let mut nodes = four_nodes();
        nodes.push(
            node("node-z")
                .label("zone", "zone3")
                .label("excluded", "true")
                .taint("t", "", "NoSchedule"),
        );
        nodes
    };
    let existing = || foo_pods(&[("node-a", 1), ("node-x", 1)]);
    let mut honor_affinity = constraint(1, "zone", "DoNotSchedule");
    honor_affinity.node_affinity_policy = Some("Honor".to_string());
    let mut ignore_affinity = honor_affinity.clone();
    ignore_affinity.node_affinity_policy = Some("Ignore".to_string());
    let affinity_pod = |c: TopologySpreadConstraint| {
        let mut p = spread_pod(vec![c]);
        p.required_node_term(k8s_openapi::api::core::v1::NodeSelectorTerm {
            match_expressions: Some(vec![k8s_openapi::api::core::v1::NodeSelectorRequirement {
                key: "excluded".to_string(),
                operator: "DoesNotExist".to_string(),
                values: None,
            }]),
            match_fields: None,
        });
        p.obj()
    };
    // (node-z itself is NodeAffinity's to reject; its empty domain is simply not counted.)
    check_filter(
        "affinity honored: zone3 not a domain",
        affinity_pod(honor_affinity),
        nodes(),
        existing(),
        &[OK, OK, OK, OK, OK],
    );
    check_filter(
        "affinity ignored: empty zone3 is the minimum",
        affinity_pod(ignore_affinity),
        nodes(),
        existing(),
        &[SKEW, SKEW, SKEW, SKEW, OK],
    );
    let mut honor_taints = constraint(1, "zone", "DoNotSchedule");
    honor_taints.node_taints_policy = Some("Honor".to_string());
    check_filter(
        "taints ignored by default",
        spread_pod(vec![constraint(1, "zone", "DoNotSchedule")]).obj(),
        nodes(),
        existing(),
        &[SKEW, SKEW, SKEW, SKEW, OK],
    );
    check_filter(
        "taints honored: tainted zone3 not a domain",
        spread_pod(vec![honor_taints]).obj(),
        nodes(),
        existing(),
        &[OK, OK, OK, OK, OK],
    );
}

#[test]
fn filter_match_label_keys_narrow_the_selector() {
    let mut c = constraint(1, "zone", "DoNotSchedule");
    c.match_label_keys = Some(vec!["pod-template-hash".to_string()]);
    let incoming = spread_pod(vec![c]).label("pod-template-hash", "v2").obj();
    // Old revision pods (v1) crowd zone1 but do not count.
    let old: Vec<PodBuilder> = foo_pods(&[("node-a", 3)])
        .into_iter()
        .map(|p| p.label("pod-template-hash", "v1"))
        .collect();
    check_filter(
        "other revisions ignored",
        incoming.clone(),
        four_nodes(),
        old,
        &[OK, OK, OK, OK],
    );
    let new: Vec<PodBuilder> = foo_pods(&[("node-a", 1)])
        .into_iter()
        .map(|p| p.label("pod-template-hash", "v2"))
        .collect();
    check_filter(
        "same revision counts",
        incoming,
        four_nodes(),
        new,
        &[SKEW, SKEW, OK, OK],
    );
}

#[test]
fn filter_skips_pods_without_hard_constraints() {
    let snapshot = Snapshot::new(four_nodes().into_iter().map(NodeBuilder::obj), []);
    let mut state = CycleState::new();
    let (_, status) = plugin().pre_filter(&mut state, &pod("p").obj(), &snapshot);
    assert_eq!(status.code(), Code::Skip);
}

fn check_score(name: &str, incoming: Pod, snapshot: Snapshot, expected: Option<Vec<i64>>) {
    assert_eq!(
        score_all(&plugin(), &incoming, &snapshot),
        expected,
        "{name}"
    );
}

#[test]
fn score_soft_constraints() {
    let host = || {
        spread_pod(vec![constraint(
            1,
            "kubernetes.io/hostname",
            "ScheduleAnyway",
        )])
        .obj()
    };
    let zone = || spread_pod(vec![constraint(1, "zone", "ScheduleAnyway")]).obj();
    let snapshot = |existing: Vec<PodBuilder>| {
        Snapshot::new(
            four_nodes().into_iter().map(NodeBuilder::obj),
            existing.into_iter().map(PodBuilder::obj),
        )
    };
    check_score(
        "no existing pods",
        host(),
        snapshot(vec![]),
        Some(vec![100, 100, 100, 100]),
    );
    // weight ln(4+2); raw 0, 2, 4, 5 -> 100*(5+0-s)/5
    check_score(
        "0/1/2/3 on hostname",
        host(),
        snapshot(foo_pods(&[("node-b", 1), ("node-x", 2), ("node-y", 3)])),
        Some(vec![100, 60, 20, 0]),
    );
    // weight ln(2+2); zone1 2 pods -> 3, zone2 1 pod -> 1; 100*(3+1-s)/3
    check_score(
        "2/1 on zones",
        zone(),
        snapshot(foo_pods(&[("node-a", 2), ("node-x", 1)])),
        Some(vec![33, 33, 100, 100]),
    );
    check_score(
        "hard constraints do not score",
        spread_pod(vec![constraint(1, "zone", "DoNotSchedule")]).obj(),
        snapshot(vec![]),
        None,
    );
    let mut nodes = four_nodes();
    nodes[3] = node("node-y");
    check_score(
        "nodes without the key score 0",
        zone(),
        Snapshot::new(
            nodes.into_iter().map(NodeBuilder::obj),
            foo_pods(&[("node-a", 1)]).into_iter().map(PodBuilder::obj),
        ),
        // weight ln(4); zone1 1 pod -> 1, zone2 0 -> 0; 100*(1+0-s)/1
        Some(vec![0, 0, 100, 0]),
    );
}

#[test]
fn score_system_default_constraints_for_owned_pods() {
    let owned = |name: &str| {
        let mut p = pod(name).label("app", "web").obj();
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".to_string(),
            kind: "ReplicaSet".to_string(),
            name: "rs1".to_string(),
            controller: Some(true),
            ..Default::default()
        }]);
        p
    };
    let mut existing = Vec::new();
    for (i, n) in ["node-a", "node-a", "node-b"].iter().enumerate() {
        let mut p = owned(&format!("e{i}"));
        if let Some(spec) = p.spec.as_mut() {
            spec.node_name = Some(n.to_string());
        }
        existing.push(p);
    }
    let mut snapshot = Snapshot::new(
        [
            node("node-a").obj(),
            node("node-b").obj(),
            node("node-c").obj(),
        ],
        existing,
    );
    snapshot.workload_selectors.push(WorkloadSelector {
        kind: WorkloadKind::ReplicaSet,
        namespace: "default".to_string(),
        name: "rs1".to_string(),
        selector: LabelSelectorRequirements::from_label_selector(&selector(&[("app", "web")]))
            .expect("valid"),
    });
    // Hostname default (maxSkew 3), weight ln(5): raw 5, 4, 2; zone label
    // absent everywhere so the zone default adds nothing.
    check_score(
        "replica set pods spread by hostname",
        owned("new"),
        snapshot.clone(),
        Some(vec![40, 60, 100]),
    );
    check_score(
        "pods without a workload are not spread",
        pod("lonely").label("app", "web").obj(),
        snapshot,
        None,
    );
}

#[test]
fn list_defaulting_uses_configured_constraints() {
    let args = PodTopologySpreadArgs {
        default_constraints: vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "zone".to_string(),
            when_unsatisfiable: "DoNotSchedule".to_string(),
            ..Default::default()
        }],
        defaulting_type: DefaultingType::List,
    };
    let plugin = PodTopologySpread::new(&args);
    let mut snapshot = Snapshot::new(
        four_nodes().into_iter().map(NodeBuilder::obj),
        [pod("e").label("app", "web").node("node-a").obj()],
    );
    snapshot.workload_selectors.push(WorkloadSelector {
        kind: WorkloadKind::Service,
        namespace: "default".to_string(),
        name: "svc".to_string(),
        selector: LabelSelectorRequirements::from_label_selector(&selector(&[("app", "web")]))
            .expect("valid"),
    });
    let incoming = pod("p").label("app", "web").obj();
    assert_eq!(
        messages(&filter_all(&plugin, &incoming, &snapshot)),
        [SKEW, SKEW, OK, OK]
    );
}

/// A pod of ReplicaSet rs1 (label app=web), so the system defaults apply.
fn web_pod(name: &str) -> PodBuilder {
    let mut p = pod(name).label("app", "web").obj();
    p.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".to_string(),
        kind: "ReplicaSet".to_string(),
        name: "rs1".to_string(),
        controller: Some(true),
        ..Default::default()
    }]);
    PodBuilder::from(p)
}

fn web_snapshot(nodes: Vec<NodeBuilder>, pods: Vec<PodBuilder>) -> Snapshot {
    let mut snapshot = Snapshot::new(
        nodes.into_iter().map(NodeBuilder::obj),
        pods.into_iter().map(PodBuilder::obj),
    );
    snapshot.workload_selectors.push(WorkloadSelector {
        kind: WorkloadKind::ReplicaSet,
        namespace: "default".to_string(),
        name: "rs1".to_string(),
        selector: LabelSelectorRequirements::from_label_selector(&selector(&[("app", "web")]))
            .expect("valid"),
    });
    snapshot
}

/// Runs PreScore over every node and returns what it kept.
fn pre_score_state(incoming: &Pod, snapshot: &Snapshot) -> Option<PreScoreState> {
    let nodes: Vec<&NodeInfo> = snapshot.nodes().iter().collect();
    let mut state = CycleState::new();
    let status = plugin().pre_score(&mut state, incoming, &nodes, snapshot);
    if status.is_skip() {
        return None;
    }
    assert!(status.is_success(), "PreScore failed: {status}");
    state.read::<PreScoreState>(PRE_SCORE_KEY).cloned()
}

/// Checks PreScore's counts and per-node hostname counts against a scan
/// of every node's pods, and Score in one pass against Score per node;
/// `from_index` says whether the kept counts must have answered.
fn check_pre_score_matches_scan(name: &str, incoming: &Pod, snapshot: &Snapshot, from_index: bool) {
    let Some(s) = pre_score_state(incoming, snapshot) else {
        panic!("{name}: PreScore skipped");
    };
    let required = RequiredNodeAffinity::from_pod(incoming);
    let require_all = plugin().requires_all_topologies(incoming);
    assert_eq!(
        score_counts_from_index(&s.constraints, &required, require_all, snapshot),
        from_index,
        "{name}: counted from the index"
    );
    let mut scanned: Vec<DomainCounts> = s
        .pod_counts
        .iter()
        .map(|counts| counts.keys().map(|k| (k.clone(), 0)).collect())
        .collect();
    scan_score_counts(
        incoming,
        &s.constraints,
        &required,
        require_all,
        snapshot,
        &mut scanned,
        |i, node| count_pods_match_selector(&node.pods, &s.constraints[i].selector, "default"),
    );
    assert_eq!(s.pod_counts, scanned, "{name}: domain counts");
    let n = s.constraints.len();
    for (i, c) in s.constraints.iter().enumerate() {
        if c.topology_key != HOSTNAME_LABEL {
            continue;
        }
        assert!(s.own_counts_kept[i], "{name}: hostname counts kept");
        for (k, node) in snapshot.nodes().iter().enumerate() {
            if s.node_domains[k * n + i] == OWN_NODE {
                assert_eq!(
                    s.own_counts[k * n + i],
                    count_pods_match_selector(&node.pods, &c.selector, "default"),
                    "{name}: {} own count",
                    node.name()
                );
            }
        }
    }
    assert!(score_all(&plugin(), incoming, snapshot).is_some(), "{name}");
}

#[test]
fn pre_score_counts_nodes_without_the_key_from_the_index_as_the_scan_does() {
    let nodes = || {
        vec![
            node("a1").label("zone", "a"),
            node("a2").label("zone", "a"),
            node("b1").label("zone", "b"),
            node("blank").label("zone", ""),
            node("none1"),
            node("none2"),
        ]
    };
    let pods = || {
        vec![
            web_pod("w1").node("a1"),
            web_pod("w2").node("b1"),
            web_pod("w3").node("blank"),
            web_pod("w4").node("none1"),
            web_pod("w5").node("none1"),
            web_pod("w6").node("none2"),
            pod("other").label("app", "db").node("none2"),
        ]
    };
    let zone_anyway = constraint(1, "zone", "ScheduleAnyway");
    let host_anyway = constraint(1, "kubernetes.io/hostname", "ScheduleAnyway");
    let rack_anyway = constraint(1, "rack", "ScheduleAnyway");
    let own = |constraints: Vec<TopologySpreadConstraint>| {
        let mut p = web_pod("new");
        for c in constraints {
            let mut c = c;
            c.label_selector = Some(selector(&[("app", "web")]));
            p = p.spread_constraint(c);
        }
        p.obj()
    };
    let mut racked = nodes();
    racked[0] = node("a1").label("zone", "a").label("rack", "r1");
    let cases: Vec<(&str, Pod, Vec<NodeBuilder>, bool)> = vec![
        (
            "system defaults: keyless nodes count into the domain \"\"",
            web_pod("new").obj(),
            nodes(),
            true,
        ),
        (
            "system defaults: no node has a zone",
            web_pod("new").obj(),
            vec![node("n1"), node("n2"), node("n3")],
            true,
        ),
        (
            "own zone constraint: keyless nodes are left out",
            own(vec![zone_anyway.clone()]),
            nodes(),
            true,
        ),
        (
            "own zone and hostname constraints",
            own(vec![zone_anyway.clone(), host_anyway.clone()]),
            nodes(),
            true,
        ),
        (
            "own zone and rack constraints, nodes lacking either",
            own(vec![zone_anyway.clone(), rack_anyway.clone()]),
            racked,
            false,
        ),
        (
            "system defaults with a required node affinity",
            web_pod("new").node_selector("zone", "a").obj(),
            nodes(),
            false,
        ),
    ];
    for (name, incoming, nodes, from_index) in cases {
        let snapshot = web_snapshot(nodes, pods());
        check_pre_score_matches_scan(name, &incoming, &snapshot, from_index);
    }
}

#[test]
fn kept_counts_follow_pods_and_nodes_as_a_scan_would() {
    let mut snapshot = web_snapshot(
        vec![
            node("a1").label("zone", "a"),
            node("b1").label("zone", "b"),
            node("none1"),
            node("none2"),
        ],
        vec![web_pod("w1").node("a1"), web_pod("w2").node("none1")],
    );
    let incoming = web_pod("new").obj();
    let own_zone = {
        let mut c = constraint(1, "zone", "ScheduleAnyway");
        c.label_selector = Some(selector(&[("app", "web")]));
        let mut h = constraint(1, "kubernetes.io/hostname", "ScheduleAnyway");
        h.label_selector = Some(selector(&[("app", "web")]));
        web_pod("new")
            .spread_constraint(c)
            .spread_constraint(h)
            .obj()
    };
    type Step = Box<dyn Fn(&mut Snapshot)>;
    let steps: Vec<(&str, Step)> = vec![
        ("as built", Box::new(|_| {})),
        (
            "a pod bound to a keyless node",
            Box::new(|s| {
                s.bind_pod(web_pod("w3").obj(), "none2");
            }),
        ),
        (
            "a pod bound to a zoned node",
            Box::new(|s| {
                s.bind_pod(web_pod("w4").obj(), "b1");
            }),
        ),
        (
            "a pod moved from a keyless node to a zoned one",
            Box::new(|s| {
                s.add_pod(web_pod("w2").node("a1").obj());
            }),
        ),
        (
            "a pod moved between keyless nodes",
            Box::new(|s| {
                s.add_pod(web_pod("w3").node("none1").obj());
            }),
        ),
        (
            "a pod relabelled out of the selector",
            Box::new(|s| {
                s.add_pod(pod("w1").label("app", "db").node("a1").obj());
            }),
        ),
        (
            "a pod deleted",
            Box::new(|s| {
                s.remove_pod("default", "w4");
            }),
        ),
        (
            "a keyless node gains a zone",
            Box::new(|s| s.upsert_node(node("none1").label("zone", "b").obj())),
        ),
        (
            "a zoned node loses its zone",
            Box::new(|s| s.upsert_node(node("a1").obj())),
        ),
        (
            "a node joins without a zone",
            Box::new(|s| s.upsert_node(node("none3").obj())),
        ),
        (
            "a pod bound to the new node",
            Box::new(|s| {
                s.bind_pod(web_pod("w5").obj(), "none3");
            }),
        ),
        (
            "a keyless node removed with its pods",
            Box::new(|s| {
                s.remove_node("none3");
            }),
        ),
    ];
    for (name, step) in steps {
        step(&mut snapshot);
        check_pre_score_matches_scan(name, &incoming, &snapshot, true);
        check_pre_score_matches_scan(name, &own_zone, &snapshot, true);
    }
}

#[test]
fn hostname_counts_shared_by_nodes_fall_back_to_each_nodes_pods() {
    // Two nodes carrying one hostname value: the kept count is theirs
    // together, so Score counts each node's own pods.
    let snapshot = web_snapshot(
        vec![
            node("n1"),
            node("n2").label("kubernetes.io/hostname", "n1"),
            node("n3"),
        ],
        vec![
            web_pod("w1").node("n1"),
            web_pod("w2").node("n2"),
            web_pod("w3").node("n2"),
        ],
    );
    let incoming = web_pod("new").obj();
    let s = pre_score_state(&incoming, &snapshot).expect("PreScore runs");
    assert_eq!(s.own_counts_kept, [false, false]);
    // Hostname maxSkew 3, weight ln(3+2): raw 1*1.61+2=4, 2*1.61+2=5, 2;
    // 100*(5+2-s)/5.
    assert_eq!(
        score_all(&plugin(), &incoming, &snapshot),
        Some(vec![60, 40, 100])
    );
}

#[test]
fn pre_filter_counts_under_inclusion_policies_match_a_count_of_each_nodes_pods() {
    let mut honor_taints = constraint(1, "zone", "DoNotSchedule");
    honor_taints.node_taints_policy = Some("Honor".to_string());
    honor_taints.label_selector = Some(selector(&[("app", "web")]));
    let mut host = constraint(1, "kubernetes.io/hostname", "DoNotSchedule");
    host.label_selector = Some(selector(&[("app", "web")]));
    let incoming = web_pod("new")
        .node_affinity_in("zone", &["a", "b"])
        .spread_constraint(honor_taints)
        .spread_constraint(host)
        .obj();
    let mut snapshot = web_snapshot(
        vec![
            node("a1").label("zone", "a"),
            node("a2")
                .label("zone", "a")
                .taint("dedicated", "x", "NoSchedule"),
            node("b1").label("zone", "b"),
            node("c1").label("zone", "c"),
            node("none"),
        ],
        vec![
            web_pod("w1").node("a1"),
            web_pod("w2").node("a2"),
            web_pod("w3").node("c1"),
            web_pod("w4").node("none"),
        ],
    );
    type Step = Box<dyn Fn(&mut Snapshot)>;
    let steps: Vec<(&str, Step)> = vec![
        ("as built", Box::new(|_| {})),
        (
            "a pod moved to another zone",
            Box::new(|s| {
                s.add_pod(web_pod("w1").node("b1").obj());
            }),
        ),
        (
            "a pod bound",
            Box::new(|s| {
                s.bind_pod(web_pod("w5").obj(), "a1");
            }),
        ),
        (
            "a pod deleted",
            Box::new(|s| {
                s.remove_pod("default", "w2");
            }),
        ),
        (
            "two nodes share a hostname",
            Box::new(|s| {
                s.upsert_node(
                    node("b1")
                        .label("zone", "b")
                        .label("kubernetes.io/hostname", "a1")
                        .obj(),
                )
            }),
        ),
    ];
    for (name, step) in steps {
        step(&mut snapshot);
        let mut state = CycleState::new();
        let (_, status) = plugin().pre_filter(&mut state, &incoming, &snapshot);
        assert!(status.is_success(), "{name}: {status}");
        let s = state
            .read::<PreFilterState>(PRE_FILTER_KEY)
            .expect("PreFilter state");
        let required = RequiredNodeAffinity::from_pod(&incoming);
        assert!(!counts_from_index(&s.constraints, &required, &snapshot));
        let counted = count_per_domain(
            &incoming,
            &s.constraints,
            &required,
            &snapshot,
            |i, node| count_pods_match_selector(&node.pods, &s.constraints[i].selector, "default"),
        );
        assert_eq!(s.tp_value_to_match_num, counted, "{name}");
    }
}
