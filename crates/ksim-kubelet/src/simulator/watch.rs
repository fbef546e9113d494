//! Watches feeding the simulator, over `ksim_runtime::informer`: Stages (any
//! change re-evaluates every object), Nodes and Pods (each event re-evaluates
//! that object). Re-lists drop objects that vanished meanwhile.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use ksim_runtime::informer::{Change, changes};
use kube::Resource;
use kube::api::{Api, ApiResource, GroupVersionKind};
use kube::core::{DynamicResourceScope, ObjectMeta};
use kube::runtime::watcher;
use serde::Deserialize;
use serde_json::Value;

use super::api::SimulatedKind;
use super::engine::{Engine, object_key};
use crate::error::KubeletError;
use crate::stage::Stage;

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// A watched object kept as the JSON tree the engine works on, decoded once
/// straight from the event (no typed round trip); `metadata` holds just what the
/// watcher and the informer read (name, namespace, resourceVersion, uid),
/// boxed: an unpaged list of 100,000 pods is one `Vec` of these, grown (and
/// so copied) as it is decoded, and an `ObjectMeta` is some 400 bytes.
#[derive(Clone, Debug)]
pub struct RawObject {
    metadata: Box<ObjectMeta>,
    /// The whole object.
    pub value: Value,
}

impl RawObject {
    /// Wraps a JSON object.
    pub fn new(value: Value) -> Self {
        let text = |field: &str| {
            value
                .get("metadata")
                .and_then(|m| m.get(field))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let metadata = Box::new(ObjectMeta {
            name: text("name"),
            namespace: text("namespace"),
            resource_version: text("resourceVersion"),
            uid: text("uid"),
            ..ObjectMeta::default()
        });
        Self { metadata, value }
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(ObjectVisitor { depth: 0 })
            .map(Self::new)
    }
}

/// Decodes an object as JSON but skips `metadata.managedFields` without building it:
/// no stage reads it, and it is the largest part of a watched Pod or Node (kept, it
/// would be decoded, cached and converted for every template).
struct ObjectVisitor {
    /// 0 at the object, 1 inside its `metadata`.
    depth: u8,
}

impl<'de> serde::de::Visitor<'de> for ObjectVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = match (self.depth, key.as_str()) {
                (0, "metadata") => map.next_value_seed(MetadataSeed)?,
                (1, "managedFields") => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    continue;
                }
                _ => map.next_value::<Value>()?,
            };
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }

    // Anything but an object is kept as it is (the watcher reports what it cannot use).
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Value>()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
}

/// The `metadata` of an object, without `managedFields`.
struct MetadataSeed;

impl<'de> serde::de::DeserializeSeed<'de> for MetadataSeed {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(ObjectVisitor { depth: 1 })
    }
}

impl Resource for RawObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.kind)
    }
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.group)
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.version)
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.api_version)
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.plural)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The watch configuration of the simulator's informers: one unpaged list, so that the
/// watch resumes from the revision every listed object was read at. (A paged list whose
/// pages are read at different revisions resumes from the last page's, and would miss
/// what changed meanwhile on earlier pages: a deletion started then would never be seen.)
pub fn informer_config() -> watcher::Config {
    watcher::Config {
        page_size: None,
        ..watcher::Config::default()
    }
}

/// Feeds Node or Pod events into the engine until the stream ends.
pub async fn watch_objects(engine: Arc<Engine>, kind: SimulatedKind) -> Result<(), KubeletError> {
    let resource = match kind {
        SimulatedKind::Node => resource("", "v1", "Node", "nodes"),
        SimulatedKind::Pod => resource("", "v1", "Pod", "pods"),
    };
    let api: Api<RawObject> = Api::all_with(engine.client.clone(), &resource);
    let config = match kind {
        SimulatedKind::Node => informer_config(),
        // Only pods bound to a node: no stage acts on a pod before (a kubelet
        // watches its node's pods alone), and the scheduling queue's churn is
        // not sent here at all.
        SimulatedKind::Pod => informer_config().fields("spec.nodeName!="),
    };
    let mut stream = std::pin::pin!(changes(api, config, &engine.options.clock));
    while let Some(change) = stream.next().await {
        match change {
            Change::Listed(object) | Change::Applied(object) => match kind {
                SimulatedKind::Node => engine.node_applied(object.value),
                SimulatedKind::Pod => engine.pod_applied(object.value),
            },
            Change::Deleted(object) => {
                let key = object_key(kind, &object.value);
                match kind {
                    SimulatedKind::Node => engine.node_deleted(&key),
                    SimulatedKind::Pod => engine.pod_deleted(&key),
                }
            }
            Change::Synced(present) => {
                engine.retain(kind, &present);
                engine.listed(kind);
            }
        }
    }
    Ok(())
}

fn decode_stage(object: &RawObject) -> Option<Stage> {
    match Stage::deserialize(&object.value) {
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
    let api: Api<RawObject> = Api::all_with(engine.client.clone(), &resource);
    let mut stream = std::pin::pin!(changes(api, informer_config(), &engine.options.clock));
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn raw_objects_keep_the_whole_object_and_its_identity() {
        let value = json!({
            "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7", "uid": "u"},
            "status": {"phase": "Running"},
        });
        let object: RawObject = serde_json::from_value(value.clone()).expect("decodes");
        assert_eq!(object.value, value);
        assert_eq!(object.meta().name.as_deref(), Some("p"));
        assert_eq!(object.meta().namespace.as_deref(), Some("ns"));
        assert_eq!(object.meta().resource_version.as_deref(), Some("7"));
        assert_eq!(object.meta().uid.as_deref(), Some("u"));
        let bare: RawObject = serde_json::from_value(json!({})).expect("decodes");
        assert!(bare.meta().name.is_none());
    }

    #[test]
    fn raw_objects_leave_out_managed_fields_only() {
        let text = r#"{"metadata": {"name": "p", "managedFields": [{"manager": "m",
            "fieldsV1": {"f:status": {}}}], "labels": {"managedFields": "kept"}},
            "spec": {"managedFields": [1]}, "status": {"phase": "Running"}}"#;
        let object: RawObject = serde_json::from_str(text).expect("decodes");
        assert_eq!(
            object.value,
            json!({
                "metadata": {"name": "p", "labels": {"managedFields": "kept"}},
                "spec": {"managedFields": [1]},
                "status": {"phase": "Running"},
            })
        );
        let odd: RawObject = serde_json::from_str(r#"{"metadata": 3}"#).expect("decodes");
        assert_eq!(odd.value, json!({"metadata": 3}));
        assert!(serde_json::from_str::<RawObject>("[1, \"a\", null]").is_ok());
    }
}
