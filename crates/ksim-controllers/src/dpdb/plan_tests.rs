//! Unit tests of the DPDB plan: the ring arithmetic, fail-safe members,
//! foreign and hand-edited children, invalid budgets.

use std::collections::BTreeMap;

use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

use super::plan::*;
use super::types::*;

fn now() -> Timestamp {
    "2026-01-01T00:00:10Z".parse().expect("time")
}

fn dpdb(min: i32, members: &[&str]) -> DistributedPodDisruptionBudget {
    let mut d = DistributedPodDisruptionBudget::new(
        "default",
        "db-a",
        DistributedPodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("ring".into(), "a".into())])),
                match_expressions: None,
            }),
            min_available: Some(IntOrString::Int(min)),
            federation: members
                .iter()
                .map(|m| FederationMember {
                    cluster: "blue".into(),
                    namespace: String::new(),
                    name: (*m).into(),
                })
                .collect(),
            ..Default::default()
        },
    );
    d.metadata.uid = Some("uid-a".into());
    d.metadata.generation = Some(1);
    d
}

fn pdb(name: &str, healthy: i32, expected: i32) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec::default()),
        status: Some(PodDisruptionBudgetStatus {
            current_healthy: healthy,
            expected_pods: expected,
            observed_generation: Some(1),
            ..Default::default()
        }),
    }
}

fn found(healthy: i32) -> MemberRead {
    MemberRead::Found {
        pdb: Box::new(pdb("m", healthy, 1)),
        confirmed_at: now(),
        behind_since: None,
    }
}

fn child_of(
    d: &DistributedPodDisruptionBudget,
    min: i32,
    healthy: i32,
    allowed: i32,
) -> PodDisruptionBudget {
    let plan = plan(&PlanInput {
        dpdb: d,
        child: None,
        members: vec![],
        overlapping: vec![],
        now: now(),
        staleness: STALENESS_BOUND,
        hold_closed: false,
    });
    let ChildAction::Create(mut child) = plan.child else {
        panic!("a missing child is created");
    };
    child.metadata.generation = Some(1);
    child.spec.as_mut().expect("spec").min_available = Some(IntOrString::Int(min));
    child.spec.as_mut().expect("spec").max_unavailable = None;
    child.status = Some(PodDisruptionBudgetStatus {
        current_healthy: healthy,
        expected_pods: 1,
        disruptions_allowed: allowed,
        desired_healthy: min,
        observed_generation: Some(1),
        ..Default::default()
    });
    child
}

fn run(
    d: &DistributedPodDisruptionBudget,
    child: Option<&PodDisruptionBudget>,
    members: Vec<MemberRead>,
) -> Plan {
    plan(&PlanInput {
        dpdb: d,
        child,
        members,
        overlapping: vec![],
        now: now(),
        staleness: STALENESS_BOUND,
        hold_closed: false,
    })
}

fn condition<'a>(
    plan: &'a Plan,
    type_: &str,
) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    plan.status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .expect("condition present")
}

#[test]
fn a_ring_member_with_every_neighbour_healthy_allows_one() {
    let d = dpdb(4, &["b", "c", "d", "e"]);
    let child = child_of(&d, 0, 1, 1);
    let p = run(
        &d,
        Some(&child),
        vec![found(1), found(1), found(1), found(1)],
    );
    assert_eq!(p.child_min_available, Some(0));
    assert_eq!(p.child, ChildAction::Keep);
    assert_eq!(p.status.disruptions_allowed, 1);
    assert_eq!(p.status.expected_pods, 5);
    assert_eq!(p.status.desired_healthy, 4);
    assert_eq!(p.status.current_healthy, 5);
    assert_eq!(p.status.members_observed, "4/4");
    assert_eq!(condition(&p, CHILD_SYNCED).status, "True");
    assert_eq!(condition(&p, DISRUPTION_ALLOWED).status, "True");
}

#[test]
fn a_neighbour_down_raises_the_child_at_once_and_closes_the_budget() {
    let d = dpdb(4, &["b", "c", "d", "e"]);
    let child = child_of(&d, 0, 1, 1);
    let p = run(
        &d,
        Some(&child),
        vec![found(1), found(0), found(1), found(1)],
    );
    assert_eq!(p.child_min_available, Some(1));
    let ChildAction::Update(updated) = &p.child else {
        panic!("the child is tightened: {:?}", p.child);
    };
    assert_eq!(
        updated.spec.as_ref().and_then(|s| s.min_available.clone()),
        Some(IntOrString::Int(1))
    );
    assert_eq!(p.status.disruptions_allowed, 0, "never more than the plan");
}

#[test]
fn pending_disruptions_of_a_member_count_as_unhealthy() {
    let d = dpdb(4, &["b", "c", "d", "e"]);
    let child = child_of(&d, 0, 1, 1);
    let mut evicted = pdb("m", 1, 1);
    evicted.status.as_mut().expect("status").disrupted_pods =
        Some(BTreeMap::from([("pod".into(), Time(now()))]));
    let p = run(
        &d,
        Some(&child),
        vec![
            found(1),
            MemberRead::Found {
                pdb: Box::new(evicted),
                confirmed_at: now(),
                behind_since: None,
            },
            found(1),
            found(1),
        ],
    );
    assert_eq!(p.child_min_available, Some(1));
}

#[test]
fn unreachable_not_found_stale_and_behind_members_count_zero_with_last_expected() {
    let mut d = dpdb(4, &["b", "c", "d", "e"]);
    d.status = Some(DistributedPodDisruptionBudgetStatus {
        members: ["b", "c", "d", "e"]
            .iter()
            .map(|n| MemberStatus {
                cluster: "blue".into(),
                namespace: "default".into(),
                name: (*n).into(),
                state: MemberState::Observed,
                current_healthy: 1,
                expected_pods: 1,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    });
    let child = child_of(&d, 0, 1, 1);
    let mut behind = pdb("m", 1, 1);
    behind.metadata.generation = Some(2);
    let old: Timestamp = "2026-01-01T00:00:00Z".parse().expect("time");
    let p = run(
        &d,
        Some(&child),
        vec![
            MemberRead::Unreachable("connection refused".into()),
            MemberRead::NotFound,
            MemberRead::Found {
                pdb: Box::new(pdb("m", 1, 1)),
                confirmed_at: old,
                behind_since: None,
            },
            MemberRead::Found {
                pdb: Box::new(behind),
                confirmed_at: now(),
                behind_since: Some(old),
            },
        ],
    );
    let states: Vec<MemberState> = p.status.members.iter().map(|m| m.state).collect();
    assert_eq!(
        states,
        [
            MemberState::Unreachable,
            MemberState::NotFound,
            MemberState::Stale,
            MemberState::Stale
        ]
    );
    assert!(
        p.status
            .members
            .iter()
            .all(|m| m.current_healthy == 0 && m.expected_pods == 1)
    );
    assert_eq!(p.status.expected_pods, 5);
    assert_eq!(p.child_min_available, Some(4));
    assert_eq!(p.status.disruptions_allowed, 0);
    assert_eq!(p.status.members_observed, "0/4");
    let observed = condition(&p, MEMBERS_OBSERVED);
    assert_eq!(observed.status, "False");
    assert!(
        observed
            .message
            .contains("blue/default/b is Unreachable: connection refused"),
        "{}",
        observed.message
    );
}

#[test]
fn loosening_waits_for_every_member_to_be_observed() {
    let d = dpdb(2, &["b", "c"]);
    let child = child_of(&d, 2, 1, 0);
    // b is back (healthy) but c is unreachable: desired 2 − 1 elsewhere = 1 < 2.
    let p = run(
        &d,
        Some(&child),
        vec![found(1), MemberRead::Unreachable("down".into())],
    );
    assert_eq!(p.child_min_available, Some(2));
    let p = run(&d, Some(&child), vec![found(1), found(1)]);
    assert_eq!(p.child_min_available, Some(0));
}

#[test]
fn a_hand_edited_child_is_put_back_and_a_foreign_one_is_left_alone() {
    let d = dpdb(4, &["b", "c", "d", "e"]);
    let edited = child_of(&d, 3, 1, 0);
    let p = run(
        &d,
        Some(&edited),
        vec![found(1), found(1), found(1), found(1)],
    );
    assert!(matches!(p.child, ChildAction::Update(_)));
    let mut foreign = pdb("db-a", 1, 1);
    foreign.spec = Some(PodDisruptionBudgetSpec {
        min_available: Some(IntOrString::Int(0)),
        ..Default::default()
    });
    foreign.status.as_mut().expect("status").disruptions_allowed = 1;
    let p = run(
        &d,
        Some(&foreign),
        vec![found(1), found(1), found(1), found(1)],
    );
    assert_eq!(p.child, ChildAction::Keep);
    assert_eq!(p.status.disruptions_allowed, 0);
    assert_eq!(condition(&p, CHILD_SYNCED).reason, "ChildNotOwned");
}

#[test]
fn invalid_budgets_get_a_closed_child_and_say_why() {
    type Edit = Box<dyn Fn(&mut DistributedPodDisruptionBudget)>;
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|d| d.spec.max_unavailable = Some(IntOrString::Int(1))),
            "MinAvailableAndMaxUnavailable",
        ),
        (Box::new(|d| d.spec.min_available = None), "NoBudget"),
        (
            Box::new(|d| {
                d.spec.federation[0] = FederationMember {
                    name: "db-a".into(),
                    ..Default::default()
                }
            }),
            "SelfReference",
        ),
        (
            Box::new(|d| d.spec.federation[1] = d.spec.federation[0].clone()),
            "DuplicateMember",
        ),
        (Box::new(|d| d.spec.selector = None), "InvalidSelector"),
    ];
    for (edit, reason) in cases {
        let mut d = dpdb(4, &["b", "c"]);
        edit(&mut d);
        let p = run(&d, None, vec![found(1), found(1)]);
        let valid = condition(&p, FEDERATION_VALID);
        assert_eq!(
            (valid.status.as_str(), valid.reason.as_str()),
            ("False", reason)
        );
        let ChildAction::Create(child) = &p.child else {
            panic!("a closed child is created");
        };
        assert_eq!(
            child.spec.as_ref().and_then(|s| s.max_unavailable.clone()),
            Some(IntOrString::Int(0)),
            "{reason}"
        );
        assert_eq!(p.status.disruptions_allowed, 0);
    }
    let d = dpdb(4, &["b"]);
    let p = run(
        &d,
        None,
        vec![MemberRead::UnknownCluster("no context \"blue\"".into())],
    );
    assert_eq!(condition(&p, FEDERATION_VALID).reason, "UnknownCluster");
}

#[test]
fn percentages_count_over_the_whole_federation() {
    let mut d = dpdb(0, &["b", "c", "d"]);
    d.spec.min_available = None;
    d.spec.max_unavailable = Some(IntOrString::String("25%".into()));
    let child = child_of(&d, 0, 1, 1);
    // 4 expected, 25% of 4 = 1 unavailable, desired 3, 3 healthy elsewhere: min 0.
    let p = run(&d, Some(&child), vec![found(1), found(1), found(1)]);
    assert_eq!(p.status.desired_healthy, 3);
    assert_eq!(p.child_min_available, Some(0));
}

#[test]
fn a_member_just_rewritten_keeps_what_it_confirmed_for_the_staleness_bound() {
    let mut d = dpdb(2, &["b", "c"]);
    d.status = Some(DistributedPodDisruptionBudgetStatus {
        members: ["b", "c"]
            .iter()
            .map(|n| MemberStatus {
                cluster: "blue".into(),
                namespace: "default".into(),
                name: (*n).into(),
                state: MemberState::Observed,
                current_healthy: 1,
                expected_pods: 1,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    });
    let child = child_of(&d, 0, 1, 1);
    let mut behind = pdb("m", 1, 1);
    behind.metadata.generation = Some(2);
    let read = |since: &str| MemberRead::Found {
        pdb: Box::new(behind.clone()),
        confirmed_at: now(),
        behind_since: Some(since.parse().expect("time")),
    };
    let p = run(
        &d,
        Some(&child),
        vec![found(1), read("2026-01-01T00:00:09Z")],
    );
    assert_eq!(p.status.members[1].state, MemberState::Observed);
    assert_eq!(p.child_min_available, Some(0));
    let recheck = p.recheck_after.expect("a recheck at the end of the grace");
    assert!(
        recheck > k8s_openapi::jiff::SignedDuration::from_secs(3),
        "{recheck:?}"
    );
    let p = run(
        &d,
        Some(&child),
        vec![found(1), read("2026-01-01T00:00:01Z")],
    );
    assert_eq!(p.status.members[1].state, MemberState::Stale);
    assert_eq!(p.child_min_available, Some(1));
}

#[test]
fn an_exclusive_budget_without_the_claim_keeps_its_child_closed() {
    let d = dpdb(4, &["b", "c", "d", "e"]);
    let child = child_of(&d, 0, 1, 1);
    let p = plan(&PlanInput {
        dpdb: &d,
        child: Some(&child),
        members: vec![found(1), found(1), found(1), found(1)],
        overlapping: vec![],
        now: now(),
        staleness: STALENESS_BOUND,
        hold_closed: true,
    });
    assert_eq!(p.open_allowance, 1);
    assert_eq!(p.child_min_available, Some(1));
    assert_eq!(p.status.disruptions_allowed, 0);
    assert!(
        condition(&p, DISRUPTION_ALLOWED)
            .message
            .contains("Exclusive")
    );
}
