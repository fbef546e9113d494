//! The Stage CustomResourceDefinition (`stages.kwok.x-k8s.io`) and the default
//! stages: installed when missing, so a bare cluster gets KWOK's behaviour.

use std::time::Duration;

use serde_json::{Value, json};

use super::api;
use crate::error::KubeletError;
use crate::stage::Stage;
use crate::stages::default_stages;

/// Name of the Stage CRD.
pub const STAGE_CRD_NAME: &str = "stages.kwok.x-k8s.io";
/// Collection path of Stages.
pub const STAGES_PATH: &str = "/apis/kwok.x-k8s.io/v1alpha1/stages";
const CRDS_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// The CustomResourceDefinition that serves Stages (cluster-scoped, as in KWOK).
pub fn stage_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": STAGE_CRD_NAME},
        "spec": {
            "group": "kwok.x-k8s.io",
            "scope": "Cluster",
            "names": {
                "kind": "Stage",
                "listKind": "StageList",
                "plural": "stages",
                "singular": "stage",
            },
            "versions": [{
                "name": "v1alpha1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "Stage is an API that describes the staged change of a resource",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                }},
            }],
        },
    })
}

/// Creates the Stage CRD if it is missing and waits until Stages are served.
pub async fn ensure_stage_crd(client: &kube::Client) -> Result<(), KubeletError> {
    match api::create(client, CRDS_PATH, &stage_crd()).await {
        Ok(_) => {}
        Err(e) if api::is_conflict(&e) => {}
        Err(e) => return Err(KubeletError::api("create the Stage CRD", e)),
    }
    let mut last = None;
    for _ in 0..200 {
        match api::get(client, STAGES_PATH).await {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(25)).await; // wall-clock: polls the API server (maybe remote) until it serves the new CRD
    }
    Err(KubeletError::api(
        "wait for Stages to be served",
        last.map_or_else(|| "timed out".to_owned(), |e| e.to_string()),
    ))
}

/// Creates the default stages when no Stage exists; returns how many it created.
pub async fn ensure_default_stages(client: &kube::Client) -> Result<usize, KubeletError> {
    let list = api::get(client, &format!("{STAGES_PATH}?limit=1"))
        .await
        .map_err(|e| KubeletError::api("list Stages", e))?;
    let existing = list
        .get("items")
        .and_then(Value::as_array)
        .is_some_and(|items| !items.is_empty());
    if existing {
        return Ok(0);
    }
    let mut created = 0;
    for stage in default_stages()? {
        created += usize::from(create_stage(client, &with_last_applied(stage)?).await?);
    }
    Ok(created)
}

/// The annotation `kubectl apply` keeps the last applied configuration in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// `stage` as `kubectl create --save-config` would create it, so users may
/// `kubectl apply` their own version over it without a warning.
pub fn with_last_applied(mut stage: Stage) -> Result<Stage, KubeletError> {
    let text = serde_json::to_string(&stage).map_err(|e| KubeletError::StageYaml(e.to_string()))?;
    let annotations = stage
        .metadata
        .other
        .entry("annotations".to_owned())
        .or_insert_with(|| json!({}));
    if let Some(map) = annotations.as_object_mut() {
        map.insert(LAST_APPLIED.to_owned(), Value::String(format!("{text}\n")));
    }
    Ok(stage)
}

/// Creates one Stage; `false` when one of that name exists already.
pub async fn create_stage(client: &kube::Client, stage: &Stage) -> Result<bool, KubeletError> {
    let body = serde_json::to_value(stage).map_err(|e| KubeletError::StageYaml(e.to_string()))?;
    match api::create(client, STAGES_PATH, &body).await {
        Ok(_) => Ok(true),
        Err(e) if api::is_conflict(&e) => Ok(false),
        Err(e) => Err(KubeletError::api(
            format!("create Stage {}", stage.metadata.name),
            e,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_stages_carry_their_last_applied_configuration() {
        let stage = default_stages().expect("decode").remove(0);
        let annotated = with_last_applied(stage.clone()).expect("encodes");
        let text = annotated.metadata.other["annotations"][LAST_APPLIED]
            .as_str()
            .expect("annotation set");
        let recorded: Stage = serde_json::from_str(text).expect("the stage as JSON");
        assert_eq!(recorded, stage);
    }

    #[test]
    fn crd_serves_cluster_scoped_stages_of_kwok_group() {
        let crd = stage_crd();
        assert_eq!(crd["metadata"]["name"], STAGE_CRD_NAME);
        assert_eq!(crd["spec"]["scope"], "Cluster");
        assert_eq!(crd["spec"]["names"]["plural"], "stages");
        assert_eq!(
            format!(
                "/apis/{}/{}/{}",
                crd["spec"]["group"].as_str().expect("group"),
                crd["spec"]["versions"][0]["name"]
                    .as_str()
                    .expect("version"),
                crd["spec"]["names"]["plural"].as_str().expect("plural"),
            ),
            STAGES_PATH
        );
    }
}
