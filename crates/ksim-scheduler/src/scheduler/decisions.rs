//! Decision records, as kube-scheduler-simulator writes them: per-node
//! filter verdicts (`filter-result`), per-plugin weighted scores
//! (`finalscore-result`) and the chosen node (`selected-node`) as pod
//! annotations, and the table `ksim explain pod` prints from them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::framework::{ExtensionPoint, FitError, Profile, ScheduleResult, Snapshot, Status};

/// Per-node filter verdicts: node → plugin → `passed` or the rejection.
pub const FILTER_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/filter-result";
/// Per-node weighted scores: node → plugin → score.
pub const FINAL_SCORE_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/finalscore-result";
/// The node the pod was bound to.
pub const SELECTED_NODE: &str = "kube-scheduler-simulator.sigs.k8s.io/selected-node";
/// A pod annotated `ksim.io/record-decisions: "true"` has its decisions
/// recorded even when the scheduler does not record them for every pod.
pub const RECORD_DECISIONS: &str = "ksim.io/record-decisions";
/// The verdict of a filter plugin that let the node through.
pub const PASSED: &str = "passed";

type NodeTable = BTreeMap<String, BTreeMap<String, String>>;

/// Whether the pod opts in to decision records.
pub fn opted_in(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RECORD_DECISIONS))
        .is_some_and(|v| v == "true")
}

fn filter_names(profile: &Profile) -> Vec<&'static str> {
    profile
        .plugins_at(ExtensionPoint::Filter)
        .iter()
        .map(|p| p.name())
        .collect()
}

/// The verdicts of each filter plugin on a node: all passed, or passed up
/// to the rejecting plugin.
fn verdicts(filters: &[&'static str], rejection: Option<&Status>) -> BTreeMap<String, String> {
    let mut row = BTreeMap::new();
    for name in filters {
        match rejection {
            Some(status) if status.plugin() == Some(name) => {
                row.insert(name.to_string(), status.message());
                break;
            }
            _ => {
                row.insert(name.to_string(), PASSED.to_string());
            }
        }
    }
    if let Some(status) = rejection
        && status.plugin().is_none_or(|p| !filters.contains(&p))
    {
        let plugin = status.plugin().unwrap_or("PreFilter");
        row.insert(plugin.to_string(), status.message());
    }
    row
}

fn to_json(table: &NodeTable) -> String {
    serde_json::to_string(table).unwrap_or_default()
}

/// The annotations of a pod that fits: filter verdicts of every node
/// evaluated, the scores of every feasible node, and the chosen node.
pub fn success_annotations(profile: &Profile, result: &ScheduleResult) -> BTreeMap<String, String> {
    let filters = filter_names(profile);
    let mut filter: NodeTable = BTreeMap::new();
    let mut scores: NodeTable = BTreeMap::new();
    for node in &result.node_scores {
        filter.insert(node.node.clone(), verdicts(&filters, None));
        scores.insert(
            node.node.clone(),
            node.scores
                .iter()
                .map(|(plugin, score)| (plugin.to_string(), score.to_string()))
                .collect(),
        );
    }
    filter.insert(result.suggested_host.clone(), verdicts(&filters, None));
    for (node, status) in &result.filtered_out {
        filter.insert(node.clone(), verdicts(&filters, Some(status)));
    }
    BTreeMap::from([
        (FILTER_RESULT.to_string(), to_json(&filter)),
        (FINAL_SCORE_RESULT.to_string(), to_json(&scores)),
        (SELECTED_NODE.to_string(), result.suggested_host.clone()),
    ])
}

/// The annotations of a pod that fits nowhere: each node's verdicts.
pub fn failure_annotations(
    profile: &Profile,
    snapshot: &Snapshot,
    fit: &FitError,
) -> BTreeMap<String, String> {
    let filters = filter_names(profile);
    let diagnosis = &fit.diagnosis;
    let mut filter: NodeTable = BTreeMap::new();
    for node in snapshot.nodes() {
        let status = diagnosis
            .node_to_status
            .get(node.name())
            .or(diagnosis.absent_nodes_status.as_ref());
        if let Some(status) = status {
            filter.insert(node.name().to_string(), verdicts(&filters, Some(status)));
        }
    }
    BTreeMap::from([
        (FILTER_RESULT.to_string(), to_json(&filter)),
        (FINAL_SCORE_RESULT.to_string(), "{}".to_string()),
        (SELECTED_NODE.to_string(), String::new()),
    ])
}

fn parse(pod: &Pod, key: &str) -> Result<NodeTable, String> {
    let Some(raw) = pod.metadata.annotations.as_ref().and_then(|a| a.get(key)) else {
        return Ok(NodeTable::new());
    };
    serde_json::from_str(raw).map_err(|e| format!("annotation {key}: {e}"))
}

/// The decision table of a pod: one row per node (the chosen one first,
/// then feasible nodes by total score, then filtered-out nodes), with the
/// filter verdict, each plugin's weighted score and the total.
pub fn explain(pod: &Pod) -> Result<String, String> {
    let filter = parse(pod, FILTER_RESULT)?;
    let scores = parse(pod, FINAL_SCORE_RESULT)?;
    if filter.is_empty() {
        return Err(format!(
            "pod {} has no scheduling decisions recorded (run the scheduler with --record-decisions or annotate the pod {RECORD_DECISIONS}=\"true\")",
            pod.metadata.name.as_deref().unwrap_or_default()
        ));
    }
    let selected = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SELECTED_NODE))
        .cloned()
        .unwrap_or_default();
    let mut plugins: Vec<String> = Vec::new();
    for row in scores.values() {
        for plugin in row.keys() {
            if !plugins.contains(plugin) {
                plugins.push(plugin.clone());
            }
        }
    }
    struct Row {
        node: String,
        verdict: String,
        scores: Vec<String>,
        total: Option<i64>,
    }
    let mut rows: Vec<Row> = filter
        .iter()
        .map(|(node, verdicts)| {
            let rejection = verdicts.iter().find(|(_, v)| v.as_str() != PASSED);
            let verdict = match rejection {
                Some((plugin, message)) => format!("{plugin}: {message}"),
                None => PASSED.to_string(),
            };
            let node_scores = scores.get(node);
            let cell = |plugin: &String| {
                node_scores
                    .and_then(|s| s.get(plugin))
                    .cloned()
                    .unwrap_or_else(|| "-".to_string())
            };
            let total = node_scores.map(|s| s.values().filter_map(|v| v.parse::<i64>().ok()).sum());
            Row {
                node: if *node == selected {
                    format!("{node} *")
                } else {
                    node.clone()
                },
                verdict,
                scores: plugins.iter().map(cell).collect(),
                total: if rejection.is_none() {
                    total.or(Some(0))
                } else {
                    None
                },
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        let chosen = |r: &Row| !r.node.ends_with(" *");
        chosen(a)
            .cmp(&chosen(b))
            .then(b.total.cmp(&a.total))
            .then(a.node.cmp(&b.node))
    });
    let mut header = vec!["NODE".to_string(), "FILTER".to_string()];
    header.extend(plugins.iter().cloned());
    header.push("TOTAL".to_string());
    let mut table: Vec<Vec<String>> = vec![header];
    for row in rows {
        let mut line = vec![row.node, row.verdict];
        line.extend(row.scores);
        line.push(
            row.total
                .map(|t| t.to_string())
                .unwrap_or_else(|| "-".to_string()),
        );
        table.push(line);
    }
    let widths: Vec<usize> = (0..table[0].len())
        .map(|i| {
            table
                .iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in table {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join("   ").trim_end());
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::{ScheduleState, schedule_one};
    use crate::testing::{node, pod};

    fn annotated(mut p: Pod, annotations: BTreeMap<String, String>) -> Pod {
        p.metadata.annotations = Some(annotations);
        p
    }

    #[test]
    fn records_verdicts_and_scores_and_explains_them() {
        let snapshot = Snapshot::new(
            [
                node("small").cpu("100m").obj(),
                node("busy").cpu("4").obj(),
                node("idle").cpu("4").obj(),
            ],
            [pod("e").cpu("3").node("busy").obj()],
        );
        let profile = Profile::default_profile();
        let mut state = ScheduleState::seeded(1);
        state.record_scores = true;
        let incoming = pod("p").cpu("500m").obj();
        let result = schedule_one(&profile, &snapshot, &incoming, &mut state).expect("fits");
        assert_eq!(result.suggested_host, "idle");
        let annotations = success_annotations(&profile, &result);
        assert_eq!(annotations[SELECTED_NODE], "idle");
        let filter: NodeTable = serde_json::from_str(&annotations[FILTER_RESULT]).expect("json");
        assert_eq!(filter["small"]["NodeResourcesFit"], "Insufficient cpu");
        assert_eq!(filter["small"]["NodeUnschedulable"], PASSED);
        assert!(!filter["small"].contains_key("PodTopologySpread"));
        assert_eq!(filter["idle"]["PodTopologySpread"], PASSED);
        let scores: NodeTable =
            serde_json::from_str(&annotations[FINAL_SCORE_RESULT]).expect("json");
        assert_eq!(scores["idle"]["TaintToleration"], "300");
        let table = explain(&annotated(incoming, annotations)).expect("table");
        let lines: Vec<&str> = table.lines().collect();
        assert!(
            lines[0].starts_with("NODE") && lines[0].ends_with("TOTAL"),
            "{table}"
        );
        assert!(lines[1].starts_with("idle *"), "{table}");
        assert!(lines[2].starts_with("busy"), "{table}");
        assert!(
            lines[3].starts_with("small")
                && lines[3].contains("NodeResourcesFit: Insufficient cpu"),
            "{table}"
        );
    }

    #[test]
    fn failures_record_every_node_and_explain_without_scores() {
        let snapshot = Snapshot::new([node("a").cpu("1").obj(), node("b").cpu("1").obj()], []);
        let profile = Profile::default_profile();
        let incoming = pod("p").cpu("2").obj();
        let Err(crate::framework::ScheduleError::Unschedulable(fit)) = schedule_one(
            &profile,
            &snapshot,
            &incoming,
            &mut ScheduleState::seeded(1),
        ) else {
            panic!("expected a fit error");
        };
        let annotations = failure_annotations(&profile, &snapshot, &fit);
        let table = explain(&annotated(incoming, annotations)).expect("table");
        assert_eq!(table.lines().count(), 3, "{table}");
        assert!(
            table
                .lines()
                .skip(1)
                .all(|l| l.contains("NodeResourcesFit: Insufficient cpu") && l.ends_with('-')),
            "{table}"
        );
    }

    #[test]
    fn explain_without_records_says_how_to_get_them() {
        let error = explain(&pod("p").obj()).expect_err("no records");
        assert!(error.contains("--record-decisions"), "{error}");
        assert!(opted_in(&annotated(
            pod("p").obj(),
            BTreeMap::from([(RECORD_DECISIONS.to_string(), "true".to_string())])
        )));
    }
}
