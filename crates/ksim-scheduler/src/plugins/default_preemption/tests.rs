//! Tests of DefaultPreemption: messages, victim selection, node choice.

use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::framework::{ScheduleError, ScheduleState, schedule_one};
use crate::testing::{PodBuilder, node, pod, selector};

fn run(snapshot: &Snapshot, incoming: Pod) -> Box<FitError> {
    match schedule_one(
        &Profile::default_profile(),
        snapshot,
        &incoming,
        &mut ScheduleState::seeded(1),
    ) {
        Err(ScheduleError::Unschedulable(fit)) => fit,
        other => panic!("expected a FitError, got {other:?}"),
    }
}

fn victims(fit: &FitError) -> (String, Vec<String>) {
    let result = fit
        .post_filter_result
        .as_ref()
        .expect("a post filter result");
    let mut names: Vec<String> = result
        .victims
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    names.sort();
    (
        result.nominated_node_name.clone().unwrap_or_default(),
        names,
    )
}

fn low(name: &str, priority: i32, cpu: &str, node: &str) -> Pod {
    pod(name).priority(priority).cpu(cpu).node(node).obj()
}

#[test]
fn no_victims_message_as_kube_scheduler() {
    let snapshot = Snapshot::new(
        ["n1", "n2", "n3"].map(|n| node(n).cpu("1").obj()),
        ["n1", "n2", "n3"].map(|n| low(&format!("p-{n}"), 10, "1", n)),
    );
    let fit = run(&snapshot, pod("big").priority(10).cpu("1").obj());
    assert_eq!(
        fit.message(),
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
    );
}

#[test]
fn unresolvable_nodes_are_not_helped() {
    let snapshot = Snapshot::new(
        [
            node("n1")
                .cpu("1")
                .taint("dedicated", "infra", "NoSchedule")
                .obj(),
            node("n2").cpu("1").obj(),
        ],
        [low("p", 10, "1", "n2")],
    );
    let fit = run(&snapshot, pod("big").priority(10).cpu("1").obj());
    assert_eq!(
        fit.message(),
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: infra}. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.."
    );
    let never = pod("big").priority(100).cpu("1").obj();
    let mut never = never;
    if let Some(spec) = never.spec.as_mut() {
        spec.preemption_policy = Some("Never".to_string());
    }
    assert_eq!(
        run(&snapshot, never).message(),
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: infra}. preemption: not eligible due to preemptionPolicy=Never.."
    );
}

#[test]
fn lowest_priority_victims_make_room() {
    let snapshot = Snapshot::new(
        [node("n1").cpu("4").obj(), node("n2").cpu("4").obj()],
        [
            low("n1-a", 5, "2", "n1"),
            low("n1-b", 5, "2", "n1"),
            low("n2-a", 1, "2", "n2"),
            low("n2-b", 50, "2", "n2"),
        ],
    );
    // Needs 2 cpu: on n1 one priority-5 pod goes, on n2 the priority-1 pod
    // goes; n2's highest victim priority (1) is lower, so n2 wins.
    let fit = run(&snapshot, pod("p").priority(10).cpu("2").obj());
    assert_eq!(victims(&fit), ("n2".to_string(), vec!["n2-a".to_string()]));
    // The FailedScheduling message carries no preemption suffix on success.
    assert_eq!(
        fit.message(),
        "0/2 nodes are available: 2 Insufficient cpu."
    );
}

#[test]
fn reprieves_as_many_pods_as_possible() {
    let snapshot = Snapshot::new(
        [node("n1").cpu("4").obj()],
        [
            low("small-1", 1, "1", "n1"),
            low("small-2", 2, "1", "n1"),
            low("big", 3, "2", "n1"),
        ],
    );
    // Needs 2 cpu; the most important (big, 3) is reprieved first, so both
    // small pods go.
    let fit = run(&snapshot, pod("p").priority(10).cpu("2").obj());
    assert_eq!(
        victims(&fit),
        (
            "n1".to_string(),
            vec!["small-1".to_string(), "small-2".to_string()]
        )
    );
}

#[test]
fn nodes_without_pdb_violations_are_preferred() {
    let guarded = |name: &str, node: &str| -> Pod {
        PodBuilder::from(low(name, 1, "2", node))
            .label("app", "db")
            .obj()
    };
    let mut snapshot = Snapshot::new(
        [node("n1").cpu("2").obj(), node("n2").cpu("2").obj()],
        [guarded("db-0", "n1"), low("web-0", 1, "2", "n2")],
    );
    snapshot
        .disruption_budgets
        .push(DisruptionBudget::from_pdb(&PodDisruptionBudget {
            metadata: ObjectMeta {
                name: Some("db".to_string()),
                namespace: Some("default".to_string()),
                ..Default::default()
            },
            spec: Some(PodDisruptionBudgetSpec {
                selector: Some(selector(&[("app", "db")])),
                ..Default::default()
            }),
            status: Some(PodDisruptionBudgetStatus {
                disruptions_allowed: 0,
                ..Default::default()
            }),
        }));
    let fit = run(&snapshot, pod("p").priority(10).cpu("2").obj());
    assert_eq!(victims(&fit), ("n2".to_string(), vec!["web-0".to_string()]));
}

#[test]
fn pick_one_node_criteria_in_order() {
    let info = |name: &str, priority: i32| {
        Arc::new(PodInfo::new_lenient(Arc::new(
            pod(name).priority(priority).obj(),
        )))
    };
    let candidate = |node: &str, victims: Vec<Arc<PodInfo>>, violations: i64| Candidate {
        node: node.to_string(),
        victims,
        num_pdb_violations: violations,
    };
    let cases = [
        (
            "fewest violations",
            vec![
                candidate("a", vec![info("x", 1)], 1),
                candidate("b", vec![info("y", 9)], 0),
            ],
            "b",
        ),
        (
            "lowest top priority",
            vec![
                candidate("a", vec![info("x", 5)], 0),
                candidate("b", vec![info("y", 3), info("z", 3)], 0),
            ],
            "b",
        ),
        (
            "smallest priority sum",
            vec![
                candidate("a", vec![info("x", 5), info("w", 4)], 0),
                candidate("b", vec![info("y", 5), info("z", 1)], 0),
            ],
            "b",
        ),
        (
            "fewest victims",
            vec![
                candidate("a", vec![info("x", 5), info("w", 0)], 0),
                candidate("b", vec![info("y", 5)], 0),
            ],
            "b",
        ),
        (
            "first wins remaining ties",
            vec![
                candidate("a", vec![info("x", 5)], 0),
                candidate("b", vec![info("y", 5)], 0),
            ],
            "a",
        ),
    ];
    for (name, candidates, expected) in cases {
        assert_eq!(
            pick_one_node_for_preemption(&candidates).map(|c| c.node.as_str()),
            Some(expected),
            "{name}"
        );
    }
    assert!(pick_one_node_for_preemption(&[]).is_none());
}

#[test]
fn dry_run_updates_spread_counts_through_pre_filter_extensions() {
    // Zone a (n1) holds two low-priority web pods; zone b (n2) is tainted
    // away. Only evicting both web pods brings zone a's skew down to 1.
    let web = |name: &str| {
        PodBuilder::from(low(name, 1, "100m", "n1"))
            .label("app", "web")
            .obj()
    };
    let snapshot = Snapshot::new(
        [
            node("n1").label("zone", "a").cpu("4").obj(),
            node("n2")
                .label("zone", "b")
                .cpu("4")
                .taint("gpu", "", "NoSchedule")
                .obj(),
        ],
        [web("web-1"), web("web-2")],
    );
    let incoming = pod("p")
        .label("app", "web")
        .priority(10)
        .spread(1, "zone", "DoNotSchedule", &[("app", "web")])
        .obj();
    let fit = run(&snapshot, incoming);
    assert_eq!(
        fit.message(),
        "0/2 nodes are available: 1 node(s) didn't match pod topology spread constraints, 1 node(s) had untolerated taint {gpu: }."
    );
    assert_eq!(
        victims(&fit),
        (
            "n1".to_string(),
            vec!["web-1".to_string(), "web-2".to_string()]
        )
    );
}
