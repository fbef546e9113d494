//! Tests of the scheduling queue.

use k8s_openapi::api::core::v1::PodSchedulingGate;

use super::*;
use crate::testing::pod;

fn queue() -> SchedulingQueue {
    SchedulingQueue::new(Arc::new(Profile::default_profile()))
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn name(info: Option<QueuedPodInfo>) -> Option<String> {
    info.and_then(|i| i.pod.metadata.name.clone())
}

#[test]
fn pops_by_priority_then_arrival() {
    let mut q = queue();
    q.add_or_update(pod("low").priority(1).obj(), secs(0));
    q.add_or_update(pod("high").priority(100).obj(), secs(1));
    q.add_or_update(pod("low-later").priority(1).obj(), secs(2));
    let order: Vec<_> = (0..4).map(|_| name(q.pop(secs(3)))).collect();
    assert_eq!(
        order,
        [
            Some("high".to_string()),
            Some("low".to_string()),
            Some("low-later".to_string()),
            None
        ]
    );
    assert_eq!(q.location("default", "low"), Some(QueueLocation::InFlight));
}

#[test]
fn backoff_doubles_up_to_the_cap() {
    let q = queue();
    let cases = [(1, 1), (2, 2), (3, 4), (4, 8), (5, 10), (9, 10)];
    for (attempts, expected) in cases {
        assert_eq!(
            q.backoff_duration(attempts),
            secs(expected),
            "attempts {attempts}"
        );
    }
}

#[test]
fn unschedulable_pods_wait_for_an_event_then_their_backoff() {
    let mut q = queue();
    q.add_or_update(pod("p").obj(), secs(0));
    let popped = q.pop(secs(0)).expect("queued");
    q.add_unschedulable(&popped.pod, false, secs(0));
    assert_eq!(
        q.location("default", "p"),
        Some(QueueLocation::Unschedulable)
    );
    assert!(q.pop(secs(5)).is_none(), "no event, no retry");
    // An event within the backoff parks it in backoff until 1s.
    q.add_unschedulable(&popped.pod, false, secs(5));
    q.move_all_to_active_or_backoff(secs(5));
    assert_eq!(q.location("default", "p"), Some(QueueLocation::Backoff));
    assert!(q.pop(secs(5)).is_none());
    let retried = q.pop(secs(6)).expect("backoff over");
    assert_eq!(retried.attempts, 2);
    // After the second failure the backoff is 2s; an event after it sends
    // the pod straight to active.
    q.add_unschedulable(&retried.pod, false, secs(6));
    q.move_all_to_active_or_backoff(secs(9));
    assert_eq!(q.location("default", "p"), Some(QueueLocation::Active));
    assert_eq!(name(q.pop(secs(9))), Some("p".to_string()));
}

#[test]
fn event_during_the_cycle_goes_to_backoff_directly() {
    let mut q = queue();
    q.add_or_update(pod("p").obj(), secs(0));
    let popped = q.pop(secs(0)).expect("queued");
    q.add_unschedulable(&popped.pod, true, secs(0));
    assert_eq!(q.location("default", "p"), Some(QueueLocation::Backoff));
    assert_eq!(name(q.pop(secs(1))), Some("p".to_string()));
}

#[test]
fn leftover_unschedulable_pods_are_retried_after_five_minutes() {
    let mut q = queue();
    q.add_or_update(pod("p").obj(), secs(0));
    let popped = q.pop(secs(0)).expect("queued");
    q.add_unschedulable(&popped.pod, false, secs(0));
    q.flush_unschedulable_leftover(secs(299));
    assert_eq!(
        q.location("default", "p"),
        Some(QueueLocation::Unschedulable)
    );
    q.flush_unschedulable_leftover(secs(301));
    assert_eq!(q.location("default", "p"), Some(QueueLocation::Active));
}

#[test]
fn gated_pods_wait_until_their_gates_are_removed() {
    let mut q = queue();
    let mut gated = pod("g").obj();
    if let Some(spec) = gated.spec.as_mut() {
        spec.scheduling_gates = Some(vec![PodSchedulingGate {
            name: "example.com/wait".to_string(),
        }]);
    }
    q.add_or_update(gated.clone(), secs(0));
    assert_eq!(q.location("default", "g"), Some(QueueLocation::Gated));
    assert_eq!(
        q.gate_status("default", "g").map(Status::message),
        Some("waiting for scheduling gates: [example.com/wait]".to_string())
    );
    assert!(q.pop(secs(1)).is_none());
    if let Some(spec) = gated.spec.as_mut() {
        spec.scheduling_gates = None;
    }
    q.add_or_update(gated, secs(2));
    assert_eq!(name(q.pop(secs(2))), Some("g".to_string()));
}

#[test]
fn deleted_pods_are_not_popped() {
    let mut q = queue();
    q.add_or_update(pod("a").obj(), secs(0));
    q.add_or_update(pod("b").obj(), secs(1));
    q.delete("default", "a");
    assert_eq!(name(q.pop(secs(2))), Some("b".to_string()));
    assert!(q.pop(secs(2)).is_none());
    assert_eq!(q.len(), 1);
    q.delete("default", "b");
    assert!(q.is_empty());
}

#[test]
fn updates_keep_the_place_and_refresh_the_pod() {
    let mut q = queue();
    q.add_or_update(pod("p").label("v", "1").obj(), secs(0));
    q.add_or_update(pod("p").label("v", "2").obj(), secs(1));
    let popped = q.pop(secs(1)).expect("queued once");
    assert_eq!(
        popped
            .pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("v"))
            .map(String::as_str),
        Some("2")
    );
    assert_eq!(popped.timestamp, 0);
    assert!(q.pop(secs(1)).is_none(), "no duplicate");
}

#[test]
fn status_only_updates_leave_unschedulable_pods_waiting() {
    let mut q = queue();
    q.add_or_update(pod("p").obj(), secs(0));
    let popped = q.pop(secs(0)).expect("queued");
    q.add_unschedulable(&popped.pod, false, secs(0));
    let mut patched = pod("p").obj();
    patched.status.get_or_insert_default().nominated_node_name = Some("n1".to_string());
    q.add_or_update(patched, secs(5));
    assert_eq!(
        q.location("default", "p"),
        Some(QueueLocation::Unschedulable)
    );
    q.add_or_update(pod("p").label("tier", "web").obj(), secs(5));
    assert_eq!(q.location("default", "p"), Some(QueueLocation::Active));
}

#[test]
fn events_without_waiting_pods_move_nothing_and_backoff_expiry_is_known() {
    let mut q = queue();
    q.add_or_update(pod("p").obj(), secs(0));
    q.move_all_to_active_or_backoff(secs(0));
    assert_eq!(q.location("default", "p"), Some(QueueLocation::Active));
    let popped = q.pop(secs(0)).expect("queued");
    q.add_unschedulable(&popped.pod, true, secs(0));
    assert_eq!(q.next_backoff_expiry(), Some(secs(1)));
    assert_eq!(q.keys(), [("default".to_string(), "p".to_string())]);
}

/// Three pods that arrived at the same instant, made unschedulable.
fn three_unschedulable() -> SchedulingQueue {
    let mut q = queue();
    for name in ["c", "a", "b"] {
        q.add_or_update(pod(name).obj(), secs(0));
    }
    for _ in 0..3 {
        let popped = q.pop(secs(0)).expect("queued");
        q.add_unschedulable(&popped.pod, false, secs(0));
    }
    q
}

fn pop_all(q: &mut SchedulingQueue, now: Duration) -> Vec<String> {
    std::iter::from_fn(|| name(q.pop(now))).collect()
}

#[test]
fn pods_moved_together_are_retried_in_name_order() {
    let mut q = three_unschedulable();
    assert!(q.has_unschedulable());
    q.move_all_to_active_or_backoff(secs(10));
    assert_eq!(pop_all(&mut q, secs(10)), ["a", "b", "c"]);

    let mut q = three_unschedulable();
    q.flush_unschedulable_leftover(secs(301));
    assert_eq!(pop_all(&mut q, secs(301)), ["a", "b", "c"]);
}

#[test]
fn the_leftover_flush_waits_more_than_five_minutes_and_notes_when_none_waits() {
    let mut q = three_unschedulable();
    q.flush_unschedulable_leftover(secs(300));
    assert_eq!(pop_all(&mut q, secs(300)), Vec::<String>::new());
    assert!(q.has_unschedulable(), "still waiting");
    q.flush_unschedulable_leftover(secs(301));
    assert!(!q.has_unschedulable(), "all moved out");
    assert_eq!(pop_all(&mut q, secs(301)).len(), 3);
}
