//! The `kwok.x-k8s.io/v1alpha1` `Stage` kind: serde types field-compatible with KWOK's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// API group and version of the Stage kind.
pub const STAGE_API_VERSION: &str = "kwok.x-k8s.io/v1alpha1";
/// Kind name of a Stage.
pub const STAGE_KIND: &str = "Stage";

/// A Stage: one step of a resource's simulated lifecycle.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    /// `kwok.x-k8s.io/v1alpha1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `Stage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Object metadata; only the name matters to the engine.
    #[serde(default)]
    pub metadata: StageMetadata,
    /// What the stage matches and what it does.
    pub spec: StageSpec,
    /// Status, kept as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

/// The part of ObjectMeta a Stage needs; other fields are kept as sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StageMetadata {
    /// Stage name.
    #[serde(default)]
    pub name: String,
    /// Every other metadata field.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// `spec` of a Stage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageSpec {
    /// The kind of object the stage applies to.
    pub resource_ref: StageResourceRef,
    /// Which objects the stage matches; a stage without selector is ignored (as in KWOK).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<StageSelector>,
    /// Weight in the random choice among matching stages.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weight: i64,
    /// Reads the weight from the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_from: Option<ExpressionFrom>,
    /// How long to wait before applying `next`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<StageDelay>,
    /// What to do to the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<StageNext>,
    /// Evaluate the next stage at once, without waiting for the object's update event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immediate_next_stage: Option<bool>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// `spec.resourceRef`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageResourceRef {
    /// API group (KWOK writes `v1` for the core group).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// Kind, e.g. `Pod`.
    pub kind: String,
}

/// `spec.selector`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageSelector {
    /// Labels the object must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// Annotations the object must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_annotations: Option<BTreeMap<String, String>>,
    /// jq requirements, all of which must hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<MatchExpression>>,
}

/// One requirement of `selector.matchExpressions`: either `key`/`operator`/`values`
/// at the top level or the same fields under `jq`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchExpression {
    /// A jq expression such as `.status.phase`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// In, NotIn, Exists or DoesNotExist.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operator: String,
    /// Values for In and NotIn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The same requirement in its explicit jq form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jq: Option<SelectorJq>,
    /// A CEL requirement; not supported by ksim (the stage fails to compile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<serde_json::Value>,
}

/// `matchExpressions[].jq`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SelectorJq {
    /// A jq expression.
    #[serde(default)]
    pub key: String,
    /// In, NotIn, Exists or DoesNotExist.
    #[serde(default)]
    pub operator: String,
    /// Values for In and NotIn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// A value read from the object with a jq expression.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpressionFrom {
    /// The jq expression (short form).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub expression_from: String,
    /// The jq expression (explicit form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jq: Option<ExpressionJq>,
    /// A CEL expression; not supported by ksim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<serde_json::Value>,
}

impl ExpressionFrom {
    /// The jq expression, whichever form carries it.
    pub fn jq_expression(&self) -> Option<&str> {
        if !self.expression_from.is_empty() {
            return Some(&self.expression_from);
        }
        self.jq
            .as_ref()
            .map(|jq| jq.expression.as_str())
            .filter(|e| !e.is_empty())
    }
}

/// `{expression}` under `jq`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExpressionJq {
    /// The jq expression.
    #[serde(default)]
    pub expression: String,
}

/// `spec.delay`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageDelay {
    /// Base delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_milliseconds: Option<i64>,
    /// Reads the delay from the object (an RFC 3339 time or a Go duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_from: Option<ExpressionFrom>,
    /// Upper bound of the delay: the delay is picked between the duration and this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_duration_milliseconds: Option<i64>,
    /// Reads the jitter upper bound from the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_duration_from: Option<ExpressionFrom>,
}

/// `spec.next`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageNext {
    /// Event to record on the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<StageEvent>,
    /// Finalizers to add or remove.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizers: Option<StageFinalizers>,
    /// Delete the object.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete: bool,
    /// Patches rendered from templates; when present, `statusTemplate` is ignored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<StagePatch>,
    /// Go text/template whose YAML output becomes the new status.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status_template: String,
    /// Subresource the status is patched through (default `status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_subresource: Option<String>,
    /// User to impersonate for the status patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_patch_as: Option<ImpersonationConfig>,
}

/// `next.patches[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StagePatch {
    /// Subresource to patch, e.g. `status`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
    /// Key under which the rendered template is placed, e.g. `status`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub root: String,
    /// Go text/template rendering the patch as YAML.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub template: String,
    /// `json`, `merge`, `strategic` or `apply`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    /// User to impersonate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impersonation: Option<ImpersonationConfig>,
}

/// A user to act as.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ImpersonationConfig {
    /// User name.
    #[serde(default)]
    pub username: String,
}

/// `next.finalizers`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StageFinalizers {
    /// Finalizers to add.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<FinalizerItem>,
    /// Finalizers to remove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<FinalizerItem>,
    /// Remove all finalizers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty: bool,
}

/// One finalizer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FinalizerItem {
    /// Finalizer name.
    #[serde(default)]
    pub value: String,
}

/// `next.event`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageEvent {
    /// `Normal` or `Warning`.
    #[serde(default, rename = "type")]
    pub event_type: String,
    /// Reason, e.g. `Created`.
    #[serde(default)]
    pub reason: String,
    /// Message.
    #[serde(default)]
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_round_trips_kwok_fields() {
        let json = serde_json::json!({
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": "pod-delete", "labels": {"a": "b"}},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                "selector": {"matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "Exists"}
                ]},
                "weight": 3,
                "weightFrom": {"expressionFrom": ".metadata.annotations.w"},
                "delay": {"durationMilliseconds": 1000, "jitterDurationFrom": {"expressionFrom": ".metadata.deletionTimestamp"}},
                "next": {"delete": true, "finalizers": {"empty": true}, "event": {"type": "Normal", "reason": "Killing", "message": "bye"}},
                "immediateNextStage": true
            }
        });
        let stage: Stage = serde_json::from_value(json.clone()).expect("valid stage");
        assert_eq!(stage.metadata.name, "pod-delete");
        assert_eq!(stage.spec.weight, 3);
        let next = stage.spec.next.as_ref().expect("next");
        assert!(next.delete);
        assert_eq!(
            next.event.as_ref().map(|e| e.reason.as_str()),
            Some("Killing")
        );
        assert_eq!(serde_json::to_value(&stage).expect("serializes"), json);
    }

    #[test]
    fn expression_from_prefers_short_form_then_jq() {
        let short = ExpressionFrom {
            expression_from: ".a".into(),
            ..Default::default()
        };
        let long = ExpressionFrom {
            jq: Some(ExpressionJq {
                expression: ".b".into(),
            }),
            ..Default::default()
        };
        assert_eq!(short.jq_expression(), Some(".a"));
        assert_eq!(long.jq_expression(), Some(".b"));
        assert_eq!(ExpressionFrom::default().jq_expression(), None);
    }
}
