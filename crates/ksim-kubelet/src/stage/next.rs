//! The next action of a Stage for one object: event, finalizer patch, rendered patches
//! (statusTemplate or `patches`) and deletion, computed without touching the API.

use std::sync::Arc;

use serde_json::{Value, json};

use super::compiled::CompiledStage;
use super::types::{FinalizerItem, StageEvent, StageFinalizers, StagePatch};
use crate::error::KubeletError;
use crate::template::{Renderer, TemplateEnv};

/// How a rendered patch is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// The Content-Type of the patch request.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// A patch ready to send.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderedPatch {
    /// Subresource to patch (`status`), or `None` for the object itself.
    pub subresource: Option<String>,
    /// Patch type.
    pub patch_type: PatchType,
    /// Patch body.
    pub data: Value,
    /// User to impersonate, if any.
    pub impersonate: Option<String>,
}

/// What to do to the object, in this order: record `event`, send `finalizers_patch`,
/// then either delete it or send `status_patch` and `patches`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NextAction {
    /// Event to record on the object.
    pub event: Option<StageEvent>,
    /// RFC 6902 JSON patch of `/metadata/finalizers`, if the finalizers change.
    pub finalizers_patch: Option<Value>,
    /// The rendered `statusTemplate`: `{"status": ...}` for the `status` subresource.
    pub status_patch: Option<RenderedPatch>,
    /// The rendered `next.patches` (when given, `statusTemplate` is ignored, as in KWOK).
    pub patches: Vec<RenderedPatch>,
    /// Delete the object (after the finalizer patch; no patches are sent then).
    pub delete: bool,
}

/// Computes `stage`'s next action for `object`.
pub fn next_action(
    stage: &CompiledStage,
    object: &Value,
    renderer: &Renderer,
    env: &Arc<dyn TemplateEnv>,
) -> Result<NextAction, KubeletError> {
    let Some(next) = &stage.stage().spec.next else {
        return Ok(NextAction::default());
    };
    let core_kind = matches!(
        stage.stage().spec.resource_ref.kind.as_str(),
        "Pod" | "Node"
    ) && matches!(
        stage.stage().spec.resource_ref.api_group.as_str(),
        "" | "v1"
    );
    let mut action = NextAction {
        event: next.event.clone(),
        delete: next.delete,
        ..Default::default()
    };
    if let Some(finalizers) = &next.finalizers {
        let ops = finalizers_patch(&meta_finalizers(object), finalizers);
        if !ops.is_empty() {
            action.finalizers_patch = Some(Value::Array(ops));
        }
    }
    if next.delete {
        return Ok(action);
    }
    if !next.patches.is_empty() {
        for patch in &next.patches {
            action
                .patches
                .push(render_patch(patch, core_kind, object, renderer, env)?);
        }
    } else if !next.status_template.is_empty() {
        let status = StagePatch {
            subresource: next
                .status_subresource
                .clone()
                .unwrap_or_else(|| "status".to_owned()),
            root: "status".to_owned(),
            template: next.status_template.clone(),
            patch_type: None,
            impersonation: next.status_patch_as.clone(),
        };
        action.status_patch = Some(render_patch(&status, core_kind, object, renderer, env)?);
    }
    Ok(action)
}

fn meta_finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn render_patch(
    patch: &StagePatch,
    core_kind: bool,
    object: &Value,
    renderer: &Renderer,
    env: &Arc<dyn TemplateEnv>,
) -> Result<RenderedPatch, KubeletError> {
    let patch_type = match patch.patch_type.as_deref() {
        Some("json") => PatchType::Json,
        Some("merge") => PatchType::Merge,
        Some("strategic") => PatchType::StrategicMerge,
        Some("apply") => PatchType::Apply,
        None | Some("") if core_kind => PatchType::StrategicMerge,
        None | Some("") => PatchType::Merge,
        Some(other) => {
            return Err(KubeletError::Template(format!(
                "unknown patch type {other}"
            )));
        }
    };
    let rendered = renderer.render_json(&patch.template, object, env)?;
    let data = match (patch_type, patch.root.as_str()) {
        (_, "") => rendered,
        (PatchType::Json, root) => prefix_json_patch_paths(rendered, root)?,
        (_, root) => json!({ root: rendered }),
    };
    Ok(RenderedPatch {
        subresource: Some(patch.subresource.clone()).filter(|s| !s.is_empty()),
        patch_type,
        data,
        impersonate: patch.impersonation.as_ref().map(|i| i.username.clone()),
    })
}

fn prefix_json_patch_paths(rendered: Value, root: &str) -> Result<Value, KubeletError> {
    let Value::Array(mut ops) = rendered else {
        return Err(KubeletError::Template(
            "a json patch template must render a list of operations".into(),
        ));
    };
    for op in &mut ops {
        if let Some(path) = op.get("path").and_then(Value::as_str) {
            let prefixed = format!("/{root}{path}");
            op["path"] = Value::String(prefixed);
        }
    }
    Ok(Value::Array(ops))
}

fn values(items: &[FinalizerItem]) -> Vec<&str> {
    items.iter().map(|f| f.value.as_str()).collect()
}

/// The JSON patch operations KWOK sends for `next.finalizers`, given the object's finalizers.
pub fn finalizers_patch(current: &[String], finalizers: &StageFinalizers) -> Vec<Value> {
    let add = |current: &[String], ops: &mut Vec<Value>| {
        if finalizers.add.is_empty() {
            return;
        }
        let wanted = values(&finalizers.add);
        if current.is_empty() {
            ops.push(json!({"op": "add", "path": "/metadata/finalizers", "value": wanted}));
        } else {
            for f in wanted {
                if !current.iter().any(|c| c == f) {
                    ops.push(json!({"op": "add", "path": "/metadata/finalizers/-", "value": f}));
                }
            }
        }
    };
    let mut ops = Vec::new();
    let mut empty = finalizers.empty;
    if !empty && !finalizers.remove.is_empty() {
        let remove = values(&finalizers.remove);
        let removed: Vec<Value> = current
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, f)| remove.contains(&f.as_str()))
            .map(|(i, _)| json!({"op": "remove", "path": format!("/metadata/finalizers/{i}")}))
            .collect();
        if removed.len() == current.len() {
            empty = true;
        } else {
            ops.extend(removed);
        }
    }
    if empty {
        if !current.is_empty() {
            ops.push(json!({"op": "remove", "path": "/metadata/finalizers"}));
        }
        add(&[], &mut ops);
    } else {
        add(current, &mut ops);
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::Stage;
    use crate::template::StaticTemplateEnv;

    fn compiled(spec: Value) -> CompiledStage {
        let stage: Stage = serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": spec}))
            .expect("valid stage");
        CompiledStage::new(stage).expect("compiles")
    }

    fn env() -> Arc<dyn TemplateEnv> {
        Arc::new(StaticTemplateEnv {
            now: "2024-01-01T00:00:00Z".into(),
            ..Default::default()
        })
    }

    fn items(names: &[&str]) -> Vec<FinalizerItem> {
        names
            .iter()
            .map(|n| FinalizerItem {
                value: (*n).to_owned(),
            })
            .collect()
    }

    #[test]
    fn finalizer_operations_follow_kwok() {
        let current: Vec<String> = vec!["a".into(), "b".into(), "c".into()];
        let cases = [
            (
                StageFinalizers {
                    add: items(&["x"]),
                    ..Default::default()
                },
                vec![],
                vec![json!({"op": "add", "path": "/metadata/finalizers", "value": ["x"]})],
            ),
            (
                StageFinalizers {
                    add: items(&["a", "x"]),
                    ..Default::default()
                },
                current.clone(),
                vec![json!({"op": "add", "path": "/metadata/finalizers/-", "value": "x"})],
            ),
            (
                StageFinalizers {
                    remove: items(&["a", "c"]),
                    ..Default::default()
                },
                current.clone(),
                vec![
                    json!({"op": "remove", "path": "/metadata/finalizers/2"}),
                    json!({"op": "remove", "path": "/metadata/finalizers/0"}),
                ],
            ),
            (
                StageFinalizers {
                    remove: items(&["a", "b", "c"]),
                    ..Default::default()
                },
                current.clone(),
                vec![json!({"op": "remove", "path": "/metadata/finalizers"})],
            ),
            (
                StageFinalizers {
                    empty: true,
                    add: items(&["k"]),
                    ..Default::default()
                },
                current.clone(),
                vec![
                    json!({"op": "remove", "path": "/metadata/finalizers"}),
                    json!({"op": "add", "path": "/metadata/finalizers", "value": ["k"]}),
                ],
            ),
            (
                StageFinalizers {
                    empty: true,
                    ..Default::default()
                },
                vec![],
                vec![],
            ),
        ];
        for (finalizers, current, want) in cases {
            assert_eq!(
                finalizers_patch(&current, &finalizers),
                want,
                "{finalizers:?} on {current:?}"
            );
        }
    }

    #[test]
    fn status_template_becomes_strategic_status_patch_for_pods() {
        let stage = compiled(json!({
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"}, "selector": {},
            "next": {"statusTemplate": "phase: Running\nstartTime: {{ Now | Quote }}\n", "event": {"type": "Normal", "reason": "Started"}}
        }));
        let action = next_action(&stage, &json!({}), &Renderer::new(), &env()).expect("renders");
        let patch = action.status_patch.expect("status patch");
        assert_eq!(patch.subresource.as_deref(), Some("status"));
        assert_eq!(patch.patch_type, PatchType::StrategicMerge);
        assert_eq!(
            patch.data,
            json!({"status": {"phase": "Running", "startTime": "2024-01-01T00:00:00Z"}})
        );
        assert_eq!(action.event.map(|e| e.reason), Some("Started".to_owned()));
        assert!(!action.delete);
    }

    #[test]
    fn delete_skips_patches_but_keeps_finalizer_patch() {
        let stage = compiled(json!({
            "resourceRef": {"kind": "Pod"}, "selector": {},
            "next": {"delete": true, "finalizers": {"remove": [{"value": "kwok"}]}, "statusTemplate": "phase: X"}
        }));
        let object = json!({"metadata": {"finalizers": ["user", "kwok"]}});
        let action = next_action(&stage, &object, &Renderer::new(), &env()).expect("ok");
        assert!(action.delete);
        assert!(action.status_patch.is_none());
        assert_eq!(
            action.finalizers_patch,
            Some(json!([{"op": "remove", "path": "/metadata/finalizers/1"}]))
        );
    }

    #[test]
    fn patches_take_precedence_and_follow_their_type() {
        let stage = compiled(json!({
            "resourceRef": {"apiGroup": "example.com", "kind": "Widget"}, "selector": {},
            "next": {"statusTemplate": "ignored: true", "patches": [
                {"root": "spec", "template": "size: 3"},
                {"root": "status", "subresource": "status", "type": "json", "template": "- op: add\n  path: /ready\n  value: true"},
                {"template": "x: 1", "type": "bogus"}
            ]}
        }));
        let err =
            next_action(&stage, &json!({}), &Renderer::new(), &env()).expect_err("bogus type");
        assert!(err.to_string().contains("unknown patch type bogus"));

        let stage = compiled(json!({
            "resourceRef": {"apiGroup": "example.com", "kind": "Widget"}, "selector": {},
            "next": {"statusTemplate": "ignored: true", "patches": [
                {"root": "spec", "template": "size: 3"},
                {"root": "status", "subresource": "status", "type": "json", "template": "- op: add\n  path: /ready\n  value: true"}
            ]}
        }));
        let action = next_action(&stage, &json!({}), &Renderer::new(), &env()).expect("ok");
        assert!(action.status_patch.is_none());
        assert_eq!(action.patches[0].patch_type, PatchType::Merge);
        assert_eq!(action.patches[0].data, json!({"spec": {"size": 3}}));
        assert_eq!(action.patches[0].subresource, None);
        assert_eq!(
            action.patches[1].data,
            json!([{"op": "add", "path": "/status/ready", "value": true}])
        );
    }

    #[test]
    fn stage_without_next_does_nothing() {
        let stage = compiled(json!({"resourceRef": {"kind": "Pod"}, "selector": {}}));
        let action = next_action(&stage, &json!({}), &Renderer::new(), &env()).expect("ok");
        assert_eq!(action, NextAction::default());
    }
}
