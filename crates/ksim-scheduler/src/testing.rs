//! Test helpers for the scheduler's plugins (test-only): run a plugin's
//! filter or score over a snapshot; the node and pod builders are
//! ksim-testutils'.
#![allow(dead_code)]

pub use ksim_testutils::builders::*;

use k8s_openapi::api::core::v1::Pod;

use crate::framework::{CycleState, NodeInfo, Plugin, Snapshot, Status};

/// Runs a plugin's PreFilter then Filter on every node of the snapshot.
pub fn filter_all(plugin: &dyn Plugin, pod: &Pod, snapshot: &Snapshot) -> Vec<Status> {
    let mut state = CycleState::new();
    if let Some(pre_filter) = plugin.as_pre_filter() {
        let (result, status) = pre_filter.pre_filter(&mut state, pod, snapshot);
        if status.is_skip() {
            return snapshot.nodes().iter().map(|_| Status::success()).collect();
        }
        if !status.is_success() {
            return snapshot.nodes().iter().map(|_| status.clone()).collect();
        }
        if let Some(names) = result.and_then(|r| r.node_names) {
            return snapshot
                .nodes()
                .iter()
                .map(|n| {
                    if names.contains(n.name()) {
                        filter_one(plugin, &state, pod, n)
                    } else {
                        Status::unresolvable("not in PreFilterResult")
                    }
                })
                .collect();
        }
    }
    snapshot
        .nodes()
        .iter()
        .map(|n| filter_one(plugin, &state, pod, n))
        .collect()
}

fn filter_one(plugin: &dyn Plugin, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
    plugin
        .as_filter()
        .map(|f| f.filter(state, pod, node))
        .unwrap_or_default()
}

/// Runs PreScore, Score and NormalizeScore over every node of the snapshot;
/// `None` when PreScore skips.
pub fn score_all(plugin: &dyn Plugin, pod: &Pod, snapshot: &Snapshot) -> Option<Vec<i64>> {
    let nodes: Vec<&NodeInfo> = snapshot.nodes().iter().collect();
    let mut state = CycleState::new();
    if let Some(pre_score) = plugin.as_pre_score() {
        let status = pre_score.pre_score(&mut state, pod, &nodes, snapshot);
        if status.is_skip() {
            return None;
        }
        assert!(status.is_success(), "PreScore failed: {status}");
    }
    let scorer = plugin.as_score().expect("a score plugin");
    let mut scores: Vec<i64> = nodes
        .iter()
        .map(|n| scorer.score(&state, pod, n).expect("score"))
        .collect();
    // What the framework calls: the same raw scores, however the plugin
    // computes them in one pass.
    let mut together = vec![0; nodes.len()];
    scorer
        .score_nodes(&state, pod, &nodes, &mut together)
        .expect("score_nodes");
    assert_eq!(together, scores, "score_nodes differs from score per node");
    let status = scorer.normalize_score(&state, pod, &nodes, &mut scores);
    assert!(status.is_success(), "NormalizeScore failed: {status}");
    Some(scores)
}

/// The messages of statuses ("" for success).
pub fn messages(statuses: &[Status]) -> Vec<String> {
    statuses.iter().map(Status::message).collect()
}
