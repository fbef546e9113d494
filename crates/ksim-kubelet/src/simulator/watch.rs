//! Watches feeding the simulator: Stages (any change re-evaluates every object),
//! Nodes and Pods (each event re-evaluates that object). Re-lists drop objects
//! that vanished meanwhile.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
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
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut relisted: Option<HashSet<String>> = None;
    let applied = |object: Value| match kind {
        SimulatedKind::Node => engine.node_applied(object),
        SimulatedKind::Pod => engine.pod_applied(object),
    };
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => relisted = Some(HashSet::new()),
            Ok(watcher::Event::InitApply(object)) => {
                if let Some(object) = to_json(&object) {
                    if let Some(seen) = relisted.as_mut() {
                        seen.insert(object_key(kind, &object));
                    }
                    applied(object);
                }
            }
            Ok(watcher::Event::InitDone) => {
                if let Some(seen) = relisted.take() {
                    engine.retain(kind, &seen);
                }
            }
            Ok(watcher::Event::Apply(object)) => {
                if let Some(object) = to_json(&object) {
                    applied(object);
                }
            }
            Ok(watcher::Event::Delete(object)) => {
                if let Some(object) = to_json(&object) {
                    let key = object_key(kind, &object);
                    match kind {
                        SimulatedKind::Node => engine.node_deleted(&key),
                        SimulatedKind::Pod => engine.pod_deleted(&key),
                    }
                }
            }
            Err(error) => tracing::warn!(kind = kind.kind(), %error, "watch failed; retrying"),
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

/// Keeps the engine's Stages equal to the cluster's until the stream ends.
pub async fn watch_stages(engine: Arc<Engine>) -> Result<(), KubeletError> {
    let resource = resource("kwok.x-k8s.io", "v1alpha1", "Stage", "stages");
    let api: Api<DynamicObject> = Api::all_with(engine.client.clone(), &resource);
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut stages: HashMap<String, Stage> = HashMap::new();
    let mut listing: Option<HashMap<String, Stage>> = None;
    let publish = |stages: &HashMap<String, Stage>| {
        let mut all: Vec<Stage> = stages.values().cloned().collect();
        all.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        engine.set_stages(all);
    };
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => listing = Some(HashMap::new()),
            Ok(watcher::Event::InitApply(object)) => {
                if let (Some(stage), Some(listing)) = (decode_stage(&object), listing.as_mut()) {
                    listing.insert(stage.metadata.name.clone(), stage);
                }
            }
            Ok(watcher::Event::InitDone) => {
                if let Some(listed) = listing.take() {
                    stages = listed;
                    publish(&stages);
                }
            }
            Ok(watcher::Event::Apply(object)) => {
                if let Some(stage) = decode_stage(&object) {
                    stages.insert(stage.metadata.name.clone(), stage);
                    publish(&stages);
                }
            }
            Ok(watcher::Event::Delete(object)) => {
                if let Some(name) = &object.metadata.name {
                    stages.remove(name);
                    publish(&stages);
                }
            }
            Err(error) => tracing::warn!(%error, "stage watch failed; retrying"),
        }
    }
    Ok(())
}
