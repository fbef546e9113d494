//! Watches feeding the simulator, over `ksim_runtime::informer`: Stages (any
//! change re-evaluates every object), Nodes and Pods (each event re-evaluates
//! that object). Re-lists drop objects that vanished meanwhile.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use ksim_runtime::informer::{Change, changes};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;
use serde_json::Value;

use super::api::SimulatedKind;
use super::engine::{Engine, object_key};
use crate::error::KubeletError;
use crate::stage::Stage;

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn to_json(object: &DynamicObject) -> Option<Value> {
    match serde_json::to_value(object) {
        Ok(value) => Some(value),
        Err(error) => {
            tracing::warn!(%error, "object not encodable");
            None
        }
    }
}

/// Feeds Node or Pod events into the engine until the stream ends.
pub async fn watch_objects(engine: Arc<Engine>, kind: SimulatedKind) -> Result<(), KubeletError> {
    let resource = match kind {
        SimulatedKind::Node => resource("", "v1", "Node", "nodes"),
        SimulatedKind::Pod => resource("", "v1", "Pod", "pods"),
    };
    let api: Api<DynamicObject> = Api::all_with(engine.client.clone(), &resource);
    let mut stream = std::pin::pin!(changes(api, watcher::Config::default()));
    while let Some(change) = stream.next().await {
        match change {
            Change::Listed(object) | Change::Applied(object) => {
                if let Some(object) = to_json(&object) {
                    match kind {
                        SimulatedKind::Node => engine.node_applied(object),
                        SimulatedKind::Pod => engine.pod_applied(object),
                    }
                }
            }
            Change::Deleted(object) => {
                if let Some(object) = to_json(&object) {
                    let key = object_key(kind, &object);
                    match kind {
                        SimulatedKind::Node => engine.node_deleted(&key),
                        SimulatedKind::Pod => engine.pod_deleted(&key),
                    }
                }
            }
            Change::Synced(present) => engine.retain(kind, &present),
        }
    }
    Ok(())
}

fn decode_stage(object: &DynamicObject) -> Option<Stage> {
    let value = to_json(object)?;
    match serde_json::from_value::<Stage>(value) {
        Ok(stage) => Some(stage),
        Err(error) => {
            tracing::warn!(
                stage = object.metadata.name.as_deref().unwrap_or_default(),
                %error,
                "stage not decodable; ignored"
            );
            None
        }
    }
}

/// Keeps the engine's Stages equal to the cluster's until the stream ends. Stages of
/// a (re-)list are published once the list is complete.
pub async fn watch_stages(engine: Arc<Engine>) -> Result<(), KubeletError> {
    let resource = resource("kwok.x-k8s.io", "v1alpha1", "Stage", "stages");
    let api: Api<DynamicObject> = Api::all_with(engine.client.clone(), &resource);
    let mut stream = std::pin::pin!(changes(api, watcher::Config::default()));
    let mut stages: HashMap<String, Stage> = HashMap::new();
    let publish = |stages: &HashMap<String, Stage>| {
        let mut all: Vec<Stage> = stages.values().cloned().collect();
        all.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        engine.set_stages(all);
    };
    while let Some(change) = stream.next().await {
        match change {
            Change::Listed(object) => {
                if let Some(stage) = decode_stage(&object) {
                    stages.insert(stage.metadata.name.clone(), stage);
                }
            }
            Change::Synced(present) => {
                stages.retain(|name, _| present.contains(name));
                publish(&stages);
            }
            Change::Applied(object) => {
                if let Some(stage) = decode_stage(&object) {
                    stages.insert(stage.metadata.name.clone(), stage);
                    publish(&stages);
                }
            }
            Change::Deleted(object) => {
                if let Some(name) = &object.metadata.name {
                    stages.remove(name);
                    publish(&stages);
                }
            }
        }
    }
    Ok(())
}
