//! The node row: STATUS from the Ready condition and `spec.unschedulable`,
//! ROLES from the role labels, and the wide columns from `status.nodeInfo`.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::duration::age;
use super::format::{array_at, bool_at, creation_timestamp, name, str_at, string_at};

const NODE_ROLE_PREFIX: &str = "node-role.kubernetes.io/";
const NODE_ROLE_LABEL: &str = "kubernetes.io/role";

/// `Ready`, `NotReady` or `Unknown`, with `,SchedulingDisabled` for a
/// cordoned node.
pub fn status(node: &Value) -> String {
    // The last condition of a type wins, as in upstream's condition map.
    let ready = array_at(node, &["status", "conditions"])
        .iter()
        .rfind(|c| str_at(c, &["type"]) == Some("Ready"));
    let mut parts = vec![match ready {
        Some(c) if str_at(c, &["status"]) == Some("True") => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if bool_at(node, &["spec", "unschedulable"]) == Some(true) {
        parts.push("SchedulingDisabled");
    }
    parts.join(",")
}

/// The roles of a node, sorted: every `node-role.kubernetes.io/<role>` label
/// and the value of a non-empty `kubernetes.io/role` label.
pub fn roles(node: &Value) -> Vec<String> {
    let mut roles = BTreeSet::new();
    if let Some(labels) = node.pointer("/metadata/labels").and_then(Value::as_object) {
        for (key, value) in labels {
            if let Some(role) = key.strip_prefix(NODE_ROLE_PREFIX) {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if key == NODE_ROLE_LABEL
                && let Some(role) = value.as_str().filter(|r| !r.is_empty())
            {
                roles.insert(role.to_string());
            }
        }
    }
    roles.into_iter().collect()
}

fn address(node: &Value, address_type: &str) -> String {
    array_at(node, &["status", "addresses"])
        .iter()
        .find(|a| str_at(a, &["type"]) == Some(address_type))
        .map(|a| string_at(a, &["address"]))
        .unwrap_or_else(|| "<none>".to_string())
}

fn info_or_unknown(node: &Value, field: &str) -> String {
    str_at(node, &["status", "nodeInfo", field])
        .filter(|v| !v.is_empty())
        .unwrap_or("<unknown>")
        .to_string()
}

/// The cells of a node row (all columns, wide ones included).
pub fn cells(node: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let roles = roles(node);
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    };
    vec![
        json!(name(node)),
        json!(status(node)),
        json!(roles),
        json!(age(creation_timestamp(node), now)),
        json!(string_at(node, &["status", "nodeInfo", "kubeletVersion"])),
        json!(address(node, "InternalIP")),
        json!(address(node, "ExternalIP")),
        json!(info_or_unknown(node, "osImage")),
        json!(info_or_unknown(node, "kernelVersion")),
        json!(info_or_unknown(node, "containerRuntimeVersion")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_reflects_ready_condition_and_cordon() {
        let cases = [
            (json!({}), "Unknown"),
            (
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                "Ready",
            ),
            (
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
                "NotReady",
            ),
            (
                json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}),
                "NotReady",
            ),
            (
                json!({"spec": {"unschedulable": true},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                "Ready,SchedulingDisabled",
            ),
            (
                json!({"spec": {"unschedulable": true}}),
                "Unknown,SchedulingDisabled",
            ),
            (
                json!({"status": {"conditions": [{"type": "MemoryPressure", "status": "True"}]}}),
                "Unknown",
            ),
        ];
        for (node, want) in cases {
            assert_eq!(status(&node), want, "{node}");
        }
    }

    #[test]
    fn roles_come_from_role_labels() {
        let cases = [
            (json!({}), vec![]),
            (
                json!({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": "",
                    "node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/": ""}}}),
                vec!["control-plane", "worker"],
            ),
            (
                json!({"metadata": {"labels": {"kubernetes.io/role": "master"}}}),
                vec!["master"],
            ),
            (
                json!({"metadata": {"labels": {"kubernetes.io/role": "",
                    "node-role.kubernetes.io/infra": "true"}}}),
                vec!["infra"],
            ),
        ];
        for (node, want) in cases {
            assert_eq!(roles(&node), want, "{node}");
        }
    }

    #[test]
    fn cells_fill_placeholders() {
        let now = super::super::duration::parse_time("2024-01-02T00:00:00Z").expect("time");
        let node = json!({
            "metadata": {"name": "n1", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "status": {"nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Ubuntu"},
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]},
        });
        assert_eq!(
            cells(&node, now),
            vec![
                json!("n1"),
                json!("Unknown"),
                json!("<none>"),
                json!("24h"),
                json!("v1.33.0"),
                json!("10.0.0.1"),
                json!("<none>"),
                json!("Ubuntu"),
                json!("<unknown>"),
                json!("<unknown>"),
            ]
        );
    }
}
