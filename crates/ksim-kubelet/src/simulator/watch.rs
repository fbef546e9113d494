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
use serde_json::value::RawValue;

use super::api::SimulatedKind;
use super::engine::Engine;
use super::scan::Scanner;
use crate::error::KubeletError;
use crate::stage::Stage;

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// A watched object kept as the JSON text the server sent (the engine
/// caches it with a view of the fields it reads, see [`super::cached`]);
/// `metadata` holds just what the watcher and the informer read (name,
/// namespace, resourceVersion, uid), boxed: an unpaged list of 100,000 pods
/// is one `Vec` of these, grown (and so copied) as it is decoded, and an
/// `ObjectMeta` is some 400 bytes.
#[derive(Clone, Debug)]
pub struct RawObject {
    metadata: Box<ObjectMeta>,
    /// The whole object's JSON text.
    pub raw: Box<RawValue>,
}

/// The identity fields of an object's `metadata`.
#[derive(Default)]
struct IdentityMeta {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
    uid: Option<String>,
}

/// Reads the identity in an object's `metadata` and stops there: the text was
/// parsed once already (it is valid JSON), so what comes before `metadata`
/// (or within it) is skipped without decoding, and what follows it (a pod's
/// spec and status) is not scanned at all. `None` for anything but an object
/// whose `metadata` is an object of string (or null) identity fields.
fn identity(text: &str) -> Option<IdentityMeta> {
    let mut scanner = Scanner::new(text);
    let mut identity = None;
    // The walk ends (`None`) once `metadata` has been read.
    let _stopped = scanner.object(|key, scanner| {
        if key != "metadata" {
            return scanner.skip_value();
        }
        let mut meta = IdentityMeta::default();
        let read = scanner.object(|key, scanner| {
            let field = match key.as_ref() {
                "name" => &mut meta.name,
                "namespace" => &mut meta.namespace,
                "resourceVersion" => &mut meta.resource_version,
                "uid" => &mut meta.uid,
                _ => return scanner.skip_value(),
            };
            *field = match scanner.peek()? {
                b'"' => Some(scanner.string()?.into_owned()),
                b'n' => {
                    scanner.skip_value()?;
                    None
                }
                _ => return None,
            };
            Some(())
        });
        if read.is_some() {
            identity = Some(meta);
        }
        None
    });
    identity
}

impl RawObject {
    /// Wraps an object's JSON text.
    pub fn new(raw: Box<RawValue>) -> Self {
        // Anything but an object (with an object as metadata) has no identity.
        let IdentityMeta {
            name,
            namespace,
            resource_version,
            uid,
        } = identity(raw.get()).unwrap_or_default();
        let metadata = Box::new(ObjectMeta {
            name,
            namespace,
            resource_version,
            uid,
            ..ObjectMeta::default()
        });
        Self { metadata, raw }
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(Self::new)
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
            Change::Listed(object) => engine.object_listed(kind, object.raw),
            Change::Applied(object) => engine.object_applied(kind, object.raw),
            Change::Deleted(object) => {
                let key = ksim_runtime::informer::object_key(&object);
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
    match serde_json::from_str::<Stage>(object.raw.get()) {
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

    #[test]
    fn raw_objects_keep_the_whole_text_and_their_identity() {
        let text = r#"{"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7",
            "uid": "u", "managedFields": [{"manager": "m"}]}, "status": {"phase": "Running"}}"#;
        let object: RawObject = serde_json::from_str(text).expect("decodes");
        assert_eq!(object.raw.get(), text);
        assert_eq!(object.meta().name.as_deref(), Some("p"));
        assert_eq!(object.meta().namespace.as_deref(), Some("ns"));
        assert_eq!(object.meta().resource_version.as_deref(), Some("7"));
        assert_eq!(object.meta().uid.as_deref(), Some("u"));
        let bare: RawObject = serde_json::from_str("{}").expect("decodes");
        assert!(bare.meta().name.is_none());
        let odd: RawObject = serde_json::from_str(r#"{"metadata": 3}"#).expect("decodes");
        assert!(odd.meta().name.is_none());
        assert!(serde_json::from_str::<RawObject>("[1, \"a\", null]").is_ok());
        // Escaped names, identity read past other fields, null fields.
        let text = r#"{"kind": "Pod", "spec": {"x": "}"}, "metadata": {"labels": {"a": "b"},
            "name": "p\"\u00e9", "namespace": null, "uid": "u"}, "metadata": {"name": "later"}}"#;
        let object: RawObject = serde_json::from_str(text).expect("decodes");
        assert_eq!(object.meta().name.as_deref(), Some("p\"é"));
        assert!(object.meta().namespace.is_none());
        assert_eq!(object.meta().uid.as_deref(), Some("u"));
        // A field of another type: no identity (as a typed decoding fails).
        let odd: RawObject =
            serde_json::from_str(r#"{"metadata": {"name": 3, "uid": "u"}}"#).expect("decodes");
        assert!(odd.meta().uid.is_none());
    }
}
