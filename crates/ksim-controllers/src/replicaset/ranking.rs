//! Which pods a ReplicaSet deletes first when it scales down, ranked as
//! upstream's `ActivePodsWithRanks` does (with PodDeletionCost and
//! LogarithmicScaleDown on, their v1.33 defaults).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::common::{is_pod_active, pod_phase, ready_since};

/// The annotation whose integer value makes a pod cheaper (lower) or dearer
/// (higher) to delete.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The `diff` pods of `pods` to delete first. `related` are all pods of the
/// owner (a superset of `pods`): a pod sharing its node with more of them
/// goes first.
pub fn pods_to_delete<'a, P: Borrow<Pod>>(
    pods: &'a [P],
    related: &[P],
    diff: usize,
    now: Timestamp,
) -> Vec<&'a Pod> {
    let mut on_node: HashMap<&str, usize> = HashMap::new();
    for pod in related
        .iter()
        .map(Borrow::borrow)
        .filter(|p| is_pod_active(p))
    {
        *on_node.entry(node_of(pod)).or_default() += 1;
    }
    let mut ranked: Vec<(&Pod, usize)> = pods
        .iter()
        .map(Borrow::borrow)
        .map(|p| (p, on_node.get(node_of(p)).copied().unwrap_or(0)))
        .collect();
    ranked.sort_by(|(a, ra), (b, rb)| compare_for_deletion(a, *ra, b, *rb, now));
    ranked.into_iter().take(diff).map(|(p, _)| p).collect()
}

fn node_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

fn phase_ordinal(pod: &Pod) -> u8 {
    match pod_phase(pod) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().map(|c| c.restart_count).max())
        .unwrap_or(0)
}

/// `floor(log2(now - t))` in nanoseconds, -1 when `t` is not in the past.
fn logarithmic_rank(t: Timestamp, now: Timestamp) -> i64 {
    let nanos = now.duration_since(t).as_nanos();
    if nanos > 0 {
        i64::from(nanos.ilog2())
    } else {
        -1
    }
}

/// Newer first by logarithmic bucket, missing times first. A pure key
/// comparison, so sorting with it is a total order (equal buckets tie).
fn compare_times(a: Option<Timestamp>, b: Option<Timestamp>, now: Timestamp) -> Ordering {
    let key = |t: Option<Timestamp>| t.map(|t| logarithmic_rank(t, now));
    match (key(a), key(b)) {
        (None, None) => Ordering::Equal,
        (None, _) => Ordering::Less,
        (_, None) => Ordering::Greater,
        (Some(a), Some(b)) => a.cmp(&b),
    }
}

/// `Less` (delete `a` first) when: unassigned before assigned; Pending before
/// Unknown before Running; not ready before ready; lower deletion cost; more
/// pods of the owner on its node; ready more recently; more restarts;
/// created more recently.
pub fn compare_for_deletion(
    a: &Pod,
    a_rank: usize,
    b: &Pod,
    b_rank: usize,
    now: Timestamp,
) -> Ordering {
    let (a_node, b_node) = (node_of(a), node_of(b));
    if a_node != b_node && (a_node.is_empty() || b_node.is_empty()) {
        return if a_node.is_empty() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    let by_phase = phase_ordinal(a).cmp(&phase_ordinal(b));
    if by_phase != Ordering::Equal {
        return by_phase;
    }
    let (a_ready, b_ready) = (ready_since(a), ready_since(b));
    if a_ready.is_some() != b_ready.is_some() {
        return if a_ready.is_none() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    let by_cost = deletion_cost(a).cmp(&deletion_cost(b));
    if by_cost != Ordering::Equal {
        return by_cost;
    }
    if a_rank != b_rank {
        return b_rank.cmp(&a_rank);
    }
    if a_ready.is_some() && b_ready.is_some() {
        let zero = |t: Timestamp| (t != Timestamp::UNIX_EPOCH).then_some(t);
        let by_ready = compare_times(a_ready.and_then(zero), b_ready.and_then(zero), now);
        if by_ready != Ordering::Equal {
            return by_ready;
        }
    }
    let by_restarts = max_restarts(b).cmp(&max_restarts(a));
    if by_restarts != Ordering::Equal {
        return by_restarts;
    }
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    // Same creation bucket: the lower UID first.
    compare_times(created(a), created(b), now).then_with(|| a.metadata.uid.cmp(&b.metadata.uid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: &str, phase: &str, ready: Option<&str>, created: &str) -> Pod {
        let mut conditions = vec![];
        if let Some(at) = ready {
            conditions.push(json!({"type": "Ready", "status": "True", "lastTransitionTime": at}));
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": name, "creationTimestamp": created},
            "spec": {"nodeName": node, "containers": []},
            "status": {"phase": phase, "conditions": conditions}
        }))
        .expect("pod")
    }

    fn now() -> Timestamp {
        "2026-01-01T12:00:00Z".parse().expect("time")
    }

    fn order(pods: &[Pod]) -> Vec<String> {
        pods_to_delete(pods, pods, pods.len(), now())
            .into_iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    const OLD: &str = "2026-01-01T00:00:00Z";

    #[test]
    fn unscheduled_pods_go_before_scheduled_ones() {
        let pods = [
            pod("scheduled", "n1", "Pending", None, OLD),
            pod("unscheduled", "", "Pending", None, OLD),
        ];
        assert_eq!(order(&pods), ["unscheduled", "scheduled"]);
    }

    #[test]
    fn pending_goes_before_unknown_before_running() {
        let pods = [
            pod("running", "n1", "Running", None, OLD),
            pod("unknown", "n2", "Unknown", None, OLD),
            pod("pending", "n3", "Pending", None, OLD),
        ];
        assert_eq!(order(&pods), ["pending", "unknown", "running"]);
    }

    #[test]
    fn not_ready_goes_before_ready() {
        let pods = [
            pod("ready", "n1", "Running", Some(OLD), OLD),
            pod("not-ready", "n2", "Running", None, OLD),
        ];
        assert_eq!(order(&pods), ["not-ready", "ready"]);
    }

    #[test]
    fn lower_deletion_cost_goes_first() {
        let mut cheap = pod("cheap", "n1", "Running", None, OLD);
        cheap.metadata.annotations =
            Some([(POD_DELETION_COST.to_string(), "-5".to_string())].into());
        let pods = [pod("normal", "n2", "Running", None, OLD), cheap];
        assert_eq!(order(&pods), ["cheap", "normal"]);
    }

    #[test]
    fn doubled_up_pods_go_before_lone_ones() {
        let pods = [
            pod("alone", "n1", "Running", None, OLD),
            pod("crowded-a", "n2", "Running", None, OLD),
            pod("crowded-b", "n2", "Running", None, OLD),
        ];
        assert_eq!(order(&pods)[2], "alone");
    }

    #[test]
    fn recently_ready_and_recently_created_go_first() {
        let pods = [
            pod(
                "long-ready",
                "n1",
                "Running",
                Some("2026-01-01T00:00:00Z"),
                OLD,
            ),
            pod(
                "just-ready",
                "n2",
                "Running",
                Some("2026-01-01T11:59:59Z"),
                OLD,
            ),
        ];
        assert_eq!(order(&pods), ["just-ready", "long-ready"]);
        let pods = [
            pod("old", "n1", "Pending", None, "2025-01-01T00:00:00Z"),
            pod("new", "n2", "Pending", None, "2026-01-01T11:59:00Z"),
        ];
        assert_eq!(order(&pods), ["new", "old"]);
    }

    #[test]
    fn only_diff_pods_are_chosen() {
        let pods = [
            pod("a", "", "Pending", None, OLD),
            pod("b", "n1", "Running", None, OLD),
        ];
        assert_eq!(pods_to_delete(&pods, &pods, 1, now()).len(), 1);
    }

    #[test]
    fn the_deletion_order_is_a_total_order() {
        // Same-second creations and ready times in shared buckets used to
        // make the order intransitive (and the sort panic).
        let times = [
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:01Z",
            "2026-01-01T00:00:30Z",
        ];
        let mut pods = Vec::new();
        for (i, created) in times.iter().enumerate() {
            for (j, ready) in times.iter().enumerate() {
                for uid in ["a", "b"] {
                    let mut p = pod(
                        &format!("p{i}{j}{uid}"),
                        "n",
                        "Running",
                        Some(ready),
                        created,
                    );
                    p.metadata.uid = Some(format!("{uid}{}", (i * 7 + j * 3) % 5));
                    pods.push(p);
                }
            }
        }
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().expect("time");
        let cmp = |a: &Pod, b: &Pod| compare_for_deletion(a, 1, b, 1, now);
        for a in &pods {
            for b in &pods {
                assert_eq!(cmp(a, b), cmp(b, a).reverse(), "antisymmetric");
                for c in &pods {
                    if cmp(a, b) != Ordering::Greater && cmp(b, c) != Ordering::Greater {
                        assert_ne!(cmp(a, c), Ordering::Greater, "transitive");
                    }
                }
            }
        }
        assert_eq!(pods_to_delete(&pods, &pods, 3, now).len(), 3);
    }
}
