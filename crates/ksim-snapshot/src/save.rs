//! Reading a cluster into snapshot objects: every object of every served
//! resource ([`SaveOptions::all`], `ksim snapshot save`) or what a
//! simulation needs from any cluster ([`SaveOptions::export`], `ksim
//! snapshot export`). Server-owned fields that a restore cannot set are
//! dropped (resourceVersion, managedFields, selfLink); uids and owner
//! references stay, so a restore can remap them.

use serde_json::{Map, Value, json};

use crate::Error;
use crate::api::{Resource, Resources, Target};
use crate::document::{HEADER, Style, write_document};

/// The annotation the kubelet simulator manages nodes by (KWOK's).
pub const FAKE_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// What to read.
#[derive(Debug, Clone)]
pub struct SaveOptions {
    /// Keep only the kinds a simulation needs, nodes made fake nodes.
    pub export: bool,
    /// Include events.
    pub events: bool,
    /// Only this namespace's namespaced objects (cluster-scoped ones are all kept).
    pub namespace: Option<String>,
    /// Only namespaced objects with these labels.
    pub label_selector: Option<String>,
    /// Keep Secret `data`/`stringData` (dropped otherwise when exporting).
    pub secret_data: bool,
    /// Items per list page.
    pub page_size: u32,
    /// Read through ksim's snapshot path when the cluster has one (objects
    /// arrive as snapshot documents, cleaned by the server); plain paged
    /// lists otherwise. Only for a whole-cluster save (not `export`, no
    /// namespace or selector).
    pub server_side: bool,
}

impl SaveOptions {
    /// Everything (`ksim snapshot save`).
    pub fn all() -> Self {
        SaveOptions {
            export: false,
            events: false,
            namespace: None,
            label_selector: None,
            secret_data: true,
            page_size: 500,
            server_side: true,
        }
    }

    /// What a simulation needs (`ksim snapshot export`).
    pub fn export() -> Self {
        SaveOptions {
            export: true,
            secret_data: false,
            ..SaveOptions::all()
        }
    }
}

/// The kinds `export` keeps (group, kind).
const EXPORTED_KINDS: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "Pod"),
    ("", "ConfigMap"),
    ("", "Secret"),
    ("", "ServiceAccount"),
    ("", "Service"),
    ("", "LimitRange"),
    ("", "ResourceQuota"),
    ("", "PersistentVolume"),
    ("", "PersistentVolumeClaim"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("apps", "ControllerRevision"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("policy", "PodDisruptionBudget"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "StorageClass"),
    ("node.k8s.io", "RuntimeClass"),
];

/// Kinds never saved: not objects one can create back, or events (unless asked).
fn skipped(resource: &Resource, options: &SaveOptions) -> bool {
    if !resource.can_list || !resource.can_create {
        return true;
    }
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Event") => !options.events,
        // The same objects as core events.
        ("events.k8s.io", "Event") => true,
        ("", "ComponentStatus") => true,
        (group, kind) => {
            options.export
                && !EXPORTED_KINDS
                    .iter()
                    .any(|(g, k)| *g == group && *k == kind)
        }
    }
}

/// What was read, and what was left out.
#[derive(Debug, Default)]
pub struct Saved {
    /// The objects, cluster-scoped kinds first, each as a restore wants it.
    pub objects: Vec<Value>,
    /// Service-account tokens left out.
    pub tokens_skipped: usize,
}

/// The resources saved, in the order of the file: cluster-scoped first
/// (namespaces, nodes, CRDs), then namespaced; a stable order so that saves
/// of one state compare equal.
fn saved_resources<'a>(resources: &'a Resources, options: &SaveOptions) -> Vec<&'a Resource> {
    let mut ordered: Vec<&Resource> = resources
        .preferred
        .iter()
        .filter(|r| !skipped(r, options))
        .collect();
    ordered.sort_by_key(|r| (r.namespaced, r.group.clone(), r.kind.clone()));
    ordered
}

/// Lists `resource` in pages, handing each page's objects, cleaned, to
/// `each` with the number of service-account tokens left out.
async fn list_cleaned(
    target: &Target,
    resource: &Resource,
    options: &SaveOptions,
    mut each: impl FnMut(Vec<Value>, usize),
) -> Result<(), Error> {
    let namespace = options.namespace.as_deref().filter(|_| resource.namespaced);
    let selector = options
        .label_selector
        .as_deref()
        .filter(|_| resource.namespaced);
    target
        .list_pages(resource, namespace, selector, options.page_size, |items| {
            let mut objects = Vec::with_capacity(items.len());
            let mut tokens_skipped = 0;
            for mut item in items {
                if let Some(object) = item.as_object_mut() {
                    object.insert("apiVersion".into(), json!(resource.api_version));
                    object.insert("kind".into(), json!(resource.kind));
                }
                if resource.kind == "Namespace"
                    && resource.group.is_empty()
                    && let Some(only) = &options.namespace
                    && item["metadata"]["name"].as_str() != Some(only.as_str())
                {
                    continue;
                }
                match clean(item, resource, options) {
                    Some(object) => objects.push(object),
                    None => tokens_skipped += 1,
                }
            }
            each(objects, tokens_skipped);
            Ok(())
        })
        .await
        .or_else(|error| match error {
            // A resource the caller may not list is left out, with a
            // warning; not nodes or pods, without which there is no copy.
            Error::Api(message)
                if message.contains("forbidden")
                    && !(resource.group.is_empty()
                        && matches!(resource.kind.as_str(), "Node" | "Pod")) =>
            {
                tracing::warn!(kind = %resource.group_kind(), %message, "not saved");
                Ok(())
            }
            other => Err(other),
        })
}

/// Reads the cluster's objects (through paged lists).
pub async fn collect(target: &Target, options: &SaveOptions) -> Result<Saved, Error> {
    let resources = target.resources().await?;
    let mut saved = Saved::default();
    for resource in saved_resources(&resources, options) {
        list_cleaned(target, resource, options, |objects, tokens_skipped| {
            saved.objects.extend(objects);
            saved.tokens_skipped += tokens_skipped;
        })
        .await?;
    }
    Ok(saved)
}

/// What [`write`] wrote.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Written {
    /// Objects written.
    pub objects: usize,
    /// Service-account tokens left out.
    pub tokens_skipped: usize,
    /// Bytes written, the header included.
    pub bytes: u64,
    /// Whether the objects were read through ksim's snapshot path (else
    /// through paged lists).
    pub server_side: bool,
}

/// What the reading side hands the writing thread.
enum Piece {
    /// Snapshot documents as ksim's snapshot path answers them (flow
    /// style), in pieces that may end anywhere.
    Documents(bytes::Bytes),
    /// Listed objects, cleaned.
    Objects(Vec<Value>),
}

/// Reads the cluster's objects and writes them to `out` as a snapshot file
/// ([`crate::document::HEADER`], then a document per object in `style`),
/// each piece written as soon as it is read: the file is written while the
/// cluster is still being read, on a thread of its own. From a ksim cluster
/// (with [`SaveOptions::server_side`]) the objects arrive as documents and
/// are written as they come; from any other cluster they are listed and
/// cleaned here. Both give the same file. Returns `out`, flushed.
pub async fn write<W: std::io::Write + Send + 'static>(
    target: &Target,
    options: &SaveOptions,
    style: Style,
    out: W,
) -> Result<(Written, W), Error> {
    let resources = target.resources().await?;
    let (sender, receiver) = std::sync::mpsc::channel::<Piece>();
    let writer = std::thread::Builder::new()
        .name("snapshot-writer".into())
        .spawn(move || write_pieces(&receiver, style, out))
        .map_err(|e| Error::Invalid(format!("cannot start the snapshot writer: {e}")))?;
    let mut server_side = options.server_side
        && !options.export
        && options.namespace.is_none()
        && options.label_selector.is_none();
    let mut used_server_side = false;
    let mut tokens_skipped = 0;
    let read = async {
        for resource in saved_resources(&resources, options) {
            if server_side {
                match target.snapshot_documents(resource).await? {
                    Some(mut documents) => {
                        used_server_side = true;
                        while let Some(piece) = documents.next().await {
                            if sender.send(Piece::Documents(piece?)).is_err() {
                                // The writer stopped: its error is returned.
                                return Ok(());
                            }
                        }
                        continue;
                    }
                    None => {
                        tracing::debug!("no ksim snapshot path: saving through lists");
                        server_side = false;
                    }
                }
            }
            list_cleaned(target, resource, options, |objects, skipped| {
                tokens_skipped += skipped;
                // A stopped writer's error is returned below.
                let _ = sender.send(Piece::Objects(objects));
            })
            .await?;
        }
        Ok::<(), Error>(())
    };
    let read = read.await;
    drop(sender);
    let written = writer
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the snapshot writer panicked")));
    read?;
    let (out, objects, bytes) = written.map_err(|source| Error::Io {
        path: "snapshot".into(),
        source,
    })?;
    Ok((
        Written {
            objects,
            tokens_skipped,
            bytes,
            server_side: used_server_side,
        },
        out,
    ))
}

/// The writing thread of [`write`]: every piece until the reading side
/// hangs up; the output, the objects and bytes written.
fn write_pieces<W: std::io::Write>(
    receiver: &std::sync::mpsc::Receiver<Piece>,
    style: Style,
    mut out: W,
) -> std::io::Result<(W, usize, u64)> {
    let mut bytes = 0u64;
    let mut objects = 0usize;
    // Lines of ksim's documents seen (two a document: `---` and the object).
    let mut document_lines = 0usize;
    // The unfinished line of documents being turned into block style.
    let mut pending: Vec<u8> = Vec::new();
    let mut rendered: Vec<u8> = Vec::with_capacity(1 << 20);
    let header = format!("{HEADER}\n");
    out.write_all(header.as_bytes())?;
    bytes += header.len() as u64;
    for piece in receiver {
        rendered.clear();
        match piece {
            Piece::Documents(text) if style == Style::Flow => {
                document_lines += text.iter().filter(|b| **b == b'\n').count();
                out.write_all(&text)?;
                bytes += text.len() as u64;
                continue;
            }
            Piece::Documents(text) => {
                pending.extend_from_slice(&text);
                let Some(end) = pending.iter().rposition(|b| *b == b'\n') else {
                    continue;
                };
                for line in pending[..end].split(|b| *b == b'\n') {
                    if line.is_empty() || line == b"---" {
                        continue;
                    }
                    let object: Value = serde_json::from_slice(line).map_err(|e| {
                        std::io::Error::other(format!("a document the cluster sent: {e}"))
                    })?;
                    write_document(&object, style, &mut rendered).map_err(std::io::Error::other)?;
                    objects += 1;
                }
                pending.drain(..=end);
            }
            Piece::Objects(values) => {
                for object in &values {
                    write_document(object, style, &mut rendered).map_err(std::io::Error::other)?;
                }
                objects += values.len();
            }
        }
        out.write_all(&rendered)?;
        bytes += rendered.len() as u64;
    }
    if !pending.is_empty() {
        return Err(std::io::Error::other(
            "the cluster's snapshot documents end in the middle of one",
        ));
    }
    out.flush()?;
    Ok((out, objects + document_lines / 2, bytes))
}

/// An object as a snapshot keeps it; `None` for what is never exported
/// (service-account tokens).
pub fn clean(mut object: Value, resource: &Resource, options: &SaveOptions) -> Option<Value> {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["resourceVersion", "managedFields", "selfLink"] {
            metadata.remove(field);
        }
    }
    let group_kind = (resource.group.as_str(), resource.kind.as_str());
    if options.export {
        match group_kind {
            ("", "Secret") => {
                if object["type"] == "kubernetes.io/service-account-token" {
                    return None;
                }
                if !options.secret_data {
                    if let Some(map) = object.as_object_mut() {
                        map.remove("data");
                        map.remove("stringData");
                    }
                    // kubectl apply keeps the whole object, data included, there.
                    if let Some(annotations) = object["metadata"]
                        .get_mut("annotations")
                        .and_then(Value::as_object_mut)
                    {
                        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
                    }
                }
            }
            ("", "ServiceAccount") => {
                // Token secrets are not exported, so neither are references to them.
                if let Some(map) = object.as_object_mut() {
                    map.remove("secrets");
                }
            }
            ("", "Node") => fake_node(&mut object),
            ("", "Pod") => export_pod(&mut object),
            _ => {}
        }
    }
    Some(object)
}

/// A real node as a fake node the kubelet simulator manages: labels, taints,
/// capacity, allocatable, conditions and addresses kept; the fake-node
/// annotation added; what a real kubelet reports about its machine dropped.
fn fake_node(node: &mut Value) {
    if !node["metadata"]["annotations"].is_object() {
        node["metadata"]["annotations"] = json!({});
    }
    node["metadata"]["annotations"][FAKE_NODE_ANNOTATION] = json!("fake");
    if let Some(status) = node.get_mut("status").and_then(Value::as_object_mut) {
        status.retain(|key, _| {
            matches!(
                key.as_str(),
                "capacity" | "allocatable" | "conditions" | "addresses" | "nodeInfo" | "phase"
            )
        });
    }
    if let Some(spec) = node.get_mut("spec").and_then(Value::as_object_mut) {
        // A cloud provider's id means nothing to the simulator.
        spec.remove("providerID");
    }
}

/// A real pod as a simulated one: spec, labels, owners and phase kept;
/// projected service-account token volumes (which a real cluster injects)
/// dropped.
fn export_pod(pod: &mut Value) {
    let spec = &mut pod["spec"];
    let mut dropped: Vec<String> = Vec::new();
    if let Some(volumes) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        volumes.retain(|volume| {
            let token = volume["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("kube-api-access-"))
                && volume["projected"].is_object();
            if token && let Some(name) = volume["name"].as_str() {
                dropped.push(name.to_string());
            }
            !token
        });
    }
    if !dropped.is_empty() {
        for list in ["containers", "initContainers"] {
            if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
                for container in containers {
                    if let Some(mounts) = container
                        .get_mut("volumeMounts")
                        .and_then(Value::as_array_mut)
                    {
                        mounts.retain(|m| {
                            !m["name"]
                                .as_str()
                                .is_some_and(|n| dropped.iter().any(|d| d == n))
                        });
                    }
                }
            }
        }
    }
    if let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut) {
        let keep: Map<String, Value> = status
            .iter()
            .filter(|(k, _)| {
                matches!(
                    k.as_str(),
                    "phase"
                        | "conditions"
                        | "hostIP"
                        | "hostIPs"
                        | "podIP"
                        | "podIPs"
                        | "startTime"
                        | "qosClass"
                        | "containerStatuses"
                        | "initContainerStatuses"
                )
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        *status = keep;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(group: &str, kind: &str) -> Resource {
        Resource {
            group: group.into(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
            namespaced: true,
            has_status: true,
            can_list: true,
            can_create: true,
            can_watch: true,
        }
    }

    #[test]
    fn server_owned_fields_are_dropped_and_uids_kept() {
        let pod = json!({"metadata": {"name": "p", "uid": "u", "resourceVersion": "7",
            "managedFields": [{}], "selfLink": "/x"}});
        let saved = clean(pod, &resource("", "Pod"), &SaveOptions::all()).expect("kept");
        assert_eq!(saved, json!({"metadata": {"name": "p", "uid": "u"}}));
    }

    #[test]
    fn export_drops_secret_data_and_tokens_unless_asked() {
        let secret = json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "dg=="}});
        let exported = clean(
            secret.clone(),
            &resource("", "Secret"),
            &SaveOptions::export(),
        )
        .expect("kept");
        assert!(exported.get("data").is_none());
        let mut with_data = SaveOptions::export();
        with_data.secret_data = true;
        let exported = clean(secret, &resource("", "Secret"), &with_data).expect("kept");
        assert_eq!(exported["data"]["k"], "dg==");
        let token =
            json!({"metadata": {"name": "t"}, "type": "kubernetes.io/service-account-token"});
        assert!(clean(token, &resource("", "Secret"), &with_data).is_none());
    }

    #[test]
    fn exported_nodes_are_fake_nodes() {
        let node = json!({"metadata": {"name": "n", "labels": {"a": "b"}},
            "spec": {"providerID": "aws:///x", "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}, "images": [{}]}});
        let exported = clean(node, &resource("", "Node"), &SaveOptions::export()).expect("kept");
        assert_eq!(
            exported["metadata"]["annotations"][FAKE_NODE_ANNOTATION],
            "fake"
        );
        assert!(exported["spec"].get("providerID").is_none());
        assert_eq!(exported["spec"]["taints"][0]["key"], "k");
        assert!(exported["status"].get("images").is_none());
        assert_eq!(exported["status"]["allocatable"]["cpu"], "4");
    }

    #[test]
    fn exported_pods_lose_their_token_volumes() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {
            "volumes": [{"name": "kube-api-access-x1", "projected": {}}, {"name": "data", "emptyDir": {}}],
            "containers": [{"name": "c", "volumeMounts": [{"name": "kube-api-access-x1"}, {"name": "data"}]}]},
            "status": {"phase": "Running", "containerStatuses": [], "resize": "x"}});
        let exported = clean(pod, &resource("", "Pod"), &SaveOptions::export()).expect("kept");
        assert_eq!(
            exported["spec"]["volumes"],
            json!([{"name": "data", "emptyDir": {}}])
        );
        assert_eq!(
            exported["spec"]["containers"][0]["volumeMounts"],
            json!([{"name": "data"}])
        );
        assert_eq!(exported["status"]["phase"], "Running");
        assert!(exported["status"].get("resize").is_none());
    }
}
