//! Creates and updates: the path of a new object (names, server metadata,
//! allocations, defaulting, validation, managedFields) and of an update
//! (strategy, admission, optimistic write), with their side effects on
//! CRDs and namespaces.

use super::delete::remove_custom_resources;
use super::*;

impl ResourceRequest {
    pub(super) fn create(&self, output: Output, body: &[u8]) -> Result<Response, ApiError> {
        if self.resource().namespaced && self.target.namespace.is_none() {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource (post)",
            ));
        }
        let (mut object, duplicates) = self.decode_sent(body)?;
        self.check_body(&mut object, false)?;
        let warnings = self.validate_fields_with(&mut object, duplicates)?;
        let object = conversion::to_storage(self.resource(), object);
        let manager = self.field_manager("unknown");
        let created = if self.query.dry_run() {
            let object = prepare_new_object(&self.state, self.resource(), object, Some(&manager))?;
            Arc::new(StoredObject::dry_run(object))
        } else {
            create_object(&self.state, self.resource(), object, &manager)?
        };
        let mut response = self.respond_object(StatusCode::CREATED, output, &created);
        add_warnings(&mut response, &warnings);
        Ok(response)
    }

    pub(super) fn update(&self, output: Output, body: &[u8]) -> Result<Response, ApiError> {
        let (mut object, duplicates) = self.decode_sent(body)?;
        self.check_body(&mut object, true)?;
        let warnings = self.validate_fields_with(&mut object, duplicates)?;
        let object = conversion::to_storage(self.resource(), object);
        let expected = match object["metadata"]["resourceVersion"].as_str() {
            Some(v) if !v.is_empty() => Some(parse_revision(v)?),
            _ => None,
        };
        let current = self.stored()?;
        let manager = self.field_manager("unknown");
        let new = self.prepare_write(&current, object, &manager)?;
        let written = self.tracks_into_text();
        let mut response = self.write(output, &current, new, expected, written)?;
        add_warnings(&mut response, &warnings);
        Ok(response)
    }

    /// The object a create or update sent, and the duplicate fields of a
    /// JSON body (found by the same parse when it can be).
    fn decode_sent<'b>(&self, body: &'b [u8]) -> Result<(Value, Duplicates<'b>), ApiError> {
        if codec::content_type(&self.headers) != "application/json" {
            return Ok((codec::decode_object(&self.headers, body)?, Duplicates::None));
        }
        match crate::openapi::decode_with_duplicates(body) {
            Some((object, found)) => Ok((object, Duplicates::Found(found))),
            None => Ok((
                codec::decode_object(&self.headers, body)?,
                Duplicates::Body(body),
            )),
        }
    }

    /// Turns what the client sent into the object to store, by subresource.
    pub(super) fn prepare_write(
        &self,
        current: &StoredObject,
        sent: Value,
        manager: &str,
    ) -> Result<Value, ApiError> {
        let resource = self.resource();
        let definition = definition_of(resource);
        let now = self.state.now();
        let api_version = resource.api_version();
        match self.target.subresource.as_deref() {
            Some("status") => {
                let mut new = strategy::prepare_for_status_update(&current.value, &sent);
                if resource.custom {
                    admit_update(&self.state, resource, &current.value, &mut new)?;
                }
                // Written straight into the text the store keeps.
                ksim_core::apply::track_subresource_update_text(
                    definition.as_deref(),
                    Some(&current.value),
                    &mut new,
                    manager,
                    "status",
                    &api_version,
                    &now,
                );
                Ok(new)
            }
            Some("finalize") => {
                let mut new = current.value.clone();
                new["spec"]["finalizers"] = sent["spec"]["finalizers"].clone();
                Ok(new)
            }
            _ => {
                let mut new = sent;
                strategy::prepare_for_update(resource, &current.value, &mut new);
                admit_update(&self.state, resource, &current.value, &mut new)?;
                ksim_core::apply::track_update_text(
                    definition.as_deref(),
                    Some(&current.value),
                    &mut new,
                    manager,
                    &api_version,
                    &now,
                );
                Ok(new)
            }
        }
    }

    /// Whether [`Self::prepare_write`] writes the managedFields it tracks
    /// as the store's text (all but `finalize`, which tracks none).
    pub(super) fn tracks_into_text(&self) -> bool {
        self.target.subresource.as_deref() != Some("finalize")
    }

    /// Writes `new` over `current` and answers it; `written`: `new`'s
    /// managedFields, if text, are what [`Self::prepare_write`] tracked
    /// (stored without being checked again).
    pub(super) fn write(
        &self,
        output: Output,
        current: &StoredObject,
        new: Value,
        expected: Option<u64>,
        written: bool,
    ) -> Result<Response, ApiError> {
        if self.query.dry_run() {
            return Ok(self.respond_object(StatusCode::OK, output, &StoredObject::dry_run(new)));
        }
        let store = &self.state.store;
        let updated = if written {
            store.update_written(&self.collection(), new, expected)
        } else {
            store.update(&self.collection(), new, expected)
        };
        let outcome = updated.map_err(|e| store_error(self.resource(), self.name(), e))?;
        self.after_write(current, &outcome);
        Ok(self.respond_object(StatusCode::OK, output, outcome.object()))
    }

    /// Side effects of a write on the registry and namespaces.
    pub(super) fn after_write(&self, _current: &StoredObject, outcome: &UpdateOutcome) {
        let resource = self.resource();
        if resource.group == "apiextensions.k8s.io"
            && !matches!(outcome, UpdateOutcome::Unchanged(_))
        {
            if matches!(outcome, UpdateOutcome::Deleted(_)) {
                remove_custom_resources(&self.state, &outcome.object().value);
            }
            self.state.reload_custom_resources();
        }
    }
}

/// Generated names: `generateName` + 5 characters of kube-apiserver's
/// alphabet, drawn from the cluster's random source keyed by where the name
/// is made (seeded, the same requests give the same names, however other
/// clients' requests interleave with them).
pub(crate) fn generated_name(state: &State, scope: &str, prefix: &str) -> String {
    let suffix = state
        .clock
        .random()
        .keyed(&format!("name:{scope}/{prefix}"))
        .name_suffix(5);
    let prefix = if prefix.len() > 58 {
        &prefix[..58]
    } else {
        prefix
    };
    format!("{prefix}{suffix}")
}

/// Everything a create does before the store: names, server metadata,
/// the kind's allocations, defaulting and validation.
pub(crate) fn prepare_new_object(
    state: &State,
    resource: &ResourceInfo,
    object: Value,
    manager: Option<&str>,
) -> Result<Value, ApiError> {
    let (object, now) = admit_new_object(state, resource, object)?;
    Ok(track_new_object(resource, object, manager, &now))
}

/// [`prepare_new_object`] up to its managedFields: names, server metadata,
/// allocations, defaulting, validation and admission (all that may refuse
/// the create). The object and its creation time.
fn admit_new_object(
    state: &State,
    resource: &ResourceInfo,
    mut object: Value,
) -> Result<(Value, String), ApiError> {
    admit_priority(state, resource, &mut object, None)?;
    let metadata = &mut object["metadata"];
    let has_name = metadata["name"].as_str().is_some_and(|n| !n.is_empty());
    // The uid's key, `uid:<plural>/<namespace>/<name>`, written once; its
    // scope (without `uid:`) keys a generated name.
    let mut key = String::with_capacity(64);
    key.push_str("uid:");
    key.push_str(&resource.plural);
    key.push('/');
    key.push_str(metadata["namespace"].as_str().unwrap_or_default());
    if !has_name && let Some(prefix) = metadata["generateName"].as_str().map(str::to_string) {
        metadata["name"] = json!(generated_name(state, &key["uid:".len()..], &prefix));
    }
    key.push('/');
    key.push_str(metadata["name"].as_str().unwrap_or_default());
    let uid = state.clock.random().keyed(&key).uuid();
    let now = state.now();
    strategy::prepare_for_create(resource, &mut object, &uid, &now);
    let openapi = state.openapi();
    let schema = resource
        .custom
        .then(|| openapi.crd_schema(resource))
        .flatten();
    crate::admission::default_object(resource, &mut object);
    strategy::set_pod_qos_class(resource, &mut object);
    if let Some(schema) = schema {
        crate::admission::default_custom_resource(schema, &mut object);
    }
    allocate(state, resource, &mut object);
    crate::admission::validate_create(resource, &object)?;
    if let Some(schema) = schema {
        crate::admission::validate_custom_resource(resource, schema, &object)?;
    }
    if resource.namespaced {
        check_namespace_open(
            state,
            resource,
            object["metadata"]["name"].as_str().unwrap_or_default(),
            object["metadata"]["namespace"].as_str().unwrap_or_default(),
        )?;
        if resource.group.is_empty() && resource.plural == "pods" {
            admit_service_account(state, &mut object)?;
        }
    }
    Ok((object, now))
}

/// The managedFields of a new object [`admit_new_object`] admitted at
/// `now`, written by `manager` (None: kept as they are).
fn track_new_object(
    resource: &ResourceInfo,
    mut object: Value,
    manager: Option<&str>,
    now: &str,
) -> Value {
    let sent_managed_fields = object
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .is_some_and(|m| !m.is_null());
    if let Some(manager) = manager
        && !sent_managed_fields
    {
        // The creator's entry, written straight into the text the store
        // keeps (what tracking the create below records). The status a kind
        // with a status subresource starts with is the server's: not tracked.
        let skip = resource.has_subresource("status").then_some("status");
        let managed = ksim_core::apply::created_text(
            definition_of(resource).as_deref(),
            &object,
            skip,
            manager,
            &resource.api_version(),
            now,
        );
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            match managed {
                Some(managed) => metadata.insert("managedFields".into(), Value::String(managed)),
                None => metadata.remove("managedFields"),
            };
        }
    } else if let Some(manager) = manager {
        let definition = definition_of(resource);
        // The status a kind with a status subresource starts with is the
        // server's (a reset field), not the writer's: it is not tracked.
        let reset_status = if resource.has_subresource("status") {
            object.as_object_mut().and_then(|map| map.remove("status"))
        } else {
            None
        };
        ksim_core::apply::track_update(
            definition.as_deref(),
            None,
            &mut object,
            manager,
            &resource.api_version(),
            now,
        );
        if let Some(status) = reset_status {
            object["status"] = status;
        }
    }
    object
}

/// Creates an object as a POST does (used by the handlers and bootstrap).
pub(crate) fn create_object(
    state: &State,
    resource: &ResourceInfo,
    object: Value,
    manager: &str,
) -> Result<Arc<StoredObject>, ApiError> {
    create_object_tracked(state, resource, object, Some(manager))
}

/// Creates an object the cluster makes itself (built-in namespaces, default
/// service accounts): no managedFields are tracked for it.
pub(crate) fn create_cluster_object(
    state: &State,
    resource: &ResourceInfo,
    object: Value,
) -> Result<Arc<StoredObject>, ApiError> {
    create_object_tracked(state, resource, object, None)
}

/// Creates an object; `manager` None means managedFields are already set
/// (server-side apply) or not tracked (objects the cluster makes itself).
pub(crate) fn create_object_tracked(
    state: &State,
    resource: &ResourceInfo,
    object: Value,
    manager: Option<&str>,
) -> Result<Arc<StoredObject>, ApiError> {
    let generate = object["metadata"]["name"]
        .as_str()
        .is_none_or(str::is_empty)
        && object["metadata"]["generateName"].is_string();
    let collection = collection_of(resource);
    let mut object = object;
    for _attempt in 0..8 {
        // Only a generated name is tried again: otherwise the object is
        // used once and needs no copy.
        let attempt = if generate {
            object.clone()
        } else {
            std::mem::take(&mut object)
        };
        let managed = match manager {
            Some(_) => Value::Null,
            None => attempt["metadata"]["managedFields"].clone(),
        };
        let (admitted, now) = admit_new_object(state, resource, attempt)?;
        let name = admitted["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        // An object that exists already is refused as the store would
        // refuse it, without its managedFields or JSON being made first (a
        // kubelet's lease create on a restored cluster). The store still
        // decides when another write creates it meanwhile.
        if !generate
            && state
                .store
                .get(
                    &collection,
                    admitted["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or_default(),
                    &name,
                )
                .is_some()
        {
            return Err(store_error(resource, &name, StoreError::AlreadyExists));
        }
        // managedFields written here (none sent) are stored as written.
        let written = manager.is_some()
            && admitted["metadata"]
                .get("managedFields")
                .is_none_or(Value::is_null);
        let mut prepared = track_new_object(resource, admitted, manager, &now);
        if !managed.is_null() {
            prepared["metadata"]["managedFields"] = managed;
        }
        let created = if written {
            state.store.create_written(&collection, prepared)
        } else {
            state.store.create(&collection, prepared)
        };
        match created {
            Ok(stored) => {
                after_create(state, resource, &name);
                return Ok(stored);
            }
            Err(StoreError::AlreadyExists) if generate => continue,
            Err(error) => return Err(store_error(resource, &name, error)),
        }
    }
    Err(ApiError::internal("could not generate a unique name"))
}

/// Creates an object as a POST by `manager` does, then merges `status`
/// into it as a merge patch of its status subresource by the same manager
/// would, in one write to the store: the object appears with its status
/// at once (a snapshot restored in bulk). Kinds without a status
/// subresource keep what the create made of the object.
pub(crate) fn create_object_with_status(
    state: &State,
    resource: &ResourceInfo,
    object: Value,
    status: Option<Value>,
    manager: &str,
) -> Result<Arc<StoredObject>, ApiError> {
    let status = status.filter(|s| {
        s.as_object().is_some_and(|m| !m.is_empty()) && resource.has_subresource("status")
    });
    let sent_managed_fields = object
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .is_some_and(|m| !m.is_null());
    if !sent_managed_fields && let Some(status) = status {
        // The usual item: the create's and the status write's entries are
        // written straight into the text the store keeps, with what the
        // two trackings below would record.
        let mut prepared = prepare_new_object(state, resource, object, None)?;
        let created_status = prepared.get("status").cloned();
        merge_owned(&mut prepared["status"], status);
        let created_at = prepared["metadata"]["creationTimestamp"]
            .as_str()
            .map_or_else(|| state.now(), str::to_owned);
        let managed = ksim_core::apply::created_then_field_written(
            definition_of(resource).as_deref(),
            &prepared,
            "status",
            created_status.as_ref(),
            manager,
            "status",
            &resource.api_version(),
            &created_at,
            &state.now(),
        );
        if let Some(metadata) = prepared.get_mut("metadata").and_then(Value::as_object_mut) {
            match managed {
                Some(managed) => metadata.insert("managedFields".into(), Value::String(managed)),
                None => metadata.remove("managedFields"),
            };
        }
        return store_new_object(state, resource, prepared, true);
    }
    let mut prepared = prepare_new_object(state, resource, object, Some(manager))?;
    if let Some(status) = status {
        // Only the status changes: it alone is copied and compared.
        let created_status = prepared.get("status").cloned();
        json_patch::merge(&mut prepared["status"], &status);
        ksim_core::apply::track_field_update(
            definition_of(resource).as_deref(),
            created_status.as_ref(),
            &mut prepared,
            "status",
            manager,
            "status",
            &resource.api_version(),
            &state.now(),
        );
    }
    // Without managedFields sent, those stored are the text written above.
    store_new_object(state, resource, prepared, !sent_managed_fields)
}

/// `json_patch::merge` of a patch that is not needed afterwards: its values
/// are moved into `target` instead of copied (RFC 7386: an object merges
/// key by key, a null removes the key, anything else replaces).
fn merge_owned(target: &mut Value, patch: Value) {
    let Value::Object(patch) = patch else {
        *target = patch;
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let Value::Object(fields) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            fields.remove(&key);
        } else {
            merge_owned(fields.entry(key).or_insert(Value::Null), value);
        }
    }
}

/// Stores a prepared new object, with what its creation sets off;
/// `written`: its managedFields, if text, is what `ksim_core::apply` wrote
/// for it (stored without checking it again).
fn store_new_object(
    state: &State,
    resource: &ResourceInfo,
    prepared: Value,
    written: bool,
) -> Result<Arc<StoredObject>, ApiError> {
    let name = prepared["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let collection = collection_of(resource);
    let stored = match written {
        true => state.store.create_written(&collection, prepared),
        false => state.store.create(&collection, prepared),
    }
    .map_err(|error| store_error(resource, &name, error))?;
    after_create(state, resource, &name);
    Ok(stored)
}

/// What creating an object sets off: the registry follows CRDs, a new
/// namespace gets its `default` ServiceAccount.
fn after_create(state: &State, resource: &ResourceInfo, name: &str) {
    if resource.group == "apiextensions.k8s.io" {
        state.reload_custom_resources();
    }
    if resource.group.is_empty() && resource.plural == "namespaces" {
        create_default_service_account(state, name);
    }
}

/// ClusterIPs and NodePorts of Services, the status of new CRDs.
pub(crate) fn allocate(state: &State, resource: &ResourceInfo, object: &mut Value) {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Service") => {
            let spec = &mut object["spec"];
            let kind = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
            if kind != "ExternalName" && spec["clusterIP"].as_str().is_none_or(str::is_empty) {
                let ip = state.allocate_cluster_ip();
                spec["clusterIP"] = json!(ip);
                spec["clusterIPs"] = json!([ip]);
            }
            if matches!(kind.as_str(), "NodePort" | "LoadBalancer")
                && let Some(ports) = spec["ports"].as_array_mut()
            {
                for port in ports {
                    if port["nodePort"].as_i64().is_none_or(|p| p == 0) {
                        port["nodePort"] = json!(state.allocate_node_port());
                    }
                }
            }
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            let names = object["spec"]["names"].clone();
            let storage: Vec<Value> = object["spec"]["versions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|v| v["storage"].as_bool() == Some(true))
                .map(|v| v["name"].clone())
                .collect();
            let now = state.now();
            object["status"] = json!({
                "acceptedNames": names,
                "storedVersions": storage,
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
                ],
            });
        }
        _ => {}
    }
}

/// 404 if the namespace does not exist; 403 if it is terminating.
pub(crate) fn check_namespace_open(
    state: &State,
    resource: &ResourceInfo,
    name: &str,
    namespace: &str,
) -> Result<(), ApiError> {
    let Some(ns) = state.store.get("/namespaces", "", namespace) else {
        return Err(ApiError::not_found("", "namespaces", namespace));
    };
    if ns.value["metadata"]["deletionTimestamp"].is_string() {
        return Err(ApiError::forbidden(format!(
            "{} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
            resource.qualified_plural()
        )));
    }
    Ok(())
}

/// What kube-controller-manager's serviceaccount controller does for every
/// namespace: a `default` ServiceAccount.
fn create_default_service_account(state: &State, namespace: &str) {
    let Some(resource) = state.registry().find("", "v1", "serviceaccounts") else {
        return;
    };
    let account = json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": namespace},
    });
    match create_cluster_object(state, &resource, account) {
        Ok(_) => {}
        Err(error) if error.code == 409 => {}
        Err(error) => {
            tracing::warn!(%error, namespace, "cannot create the default service account")
        }
    }
}

/// The ServiceAccount admission plugin: a pod runs as `default` unless it
/// names another account, and the account must exist.
fn admit_service_account(state: &State, pod: &mut Value) -> Result<(), ApiError> {
    let spec = &mut pod["spec"];
    let account = match spec["serviceAccountName"]
        .as_str()
        .filter(|n| !n.is_empty())
    {
        Some(name) => name.to_string(),
        None => match spec["serviceAccount"].as_str().filter(|n| !n.is_empty()) {
            Some(name) => name.to_string(),
            None => "default".to_string(),
        },
    };
    spec["serviceAccountName"] = json!(account);
    spec["serviceAccount"] = json!(account);
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    if state
        .store
        .get("/serviceaccounts", namespace, &account)
        .is_none()
    {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        return Err(ApiError::forbidden(format!(
            "pods \"{name}\" is forbidden: error looking up service account {namespace}/{account}: serviceaccount \"{account}\" not found"
        )));
    }
    Ok(())
}

/// The Priority admission plugin on a write: a new pod's priority comes
/// from its class; a pod update keeps it; one PriorityClass at most is the
/// global default. `old` is the stored object of an update.
pub(crate) fn admit_priority(
    state: &State,
    resource: &ResourceInfo,
    object: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let classes = StoredPriorityClasses(state);
    match (resource.group.as_str(), resource.kind.as_str(), old) {
        ("", "Pod", None) => crate::admission::admit_new_pod(object, &classes),
        ("", "Pod", Some(old)) => {
            crate::admission::admit_pod_update(old, object);
            Ok(())
        }
        ("scheduling.k8s.io", "PriorityClass", old) => {
            crate::admission::admit_priority_class(object, old.is_none(), &classes)
        }
        _ => Ok(()),
    }
}

/// PriorityClasses as the store holds them.
struct StoredPriorityClasses<'a>(&'a State);

impl StoredPriorityClasses<'_> {
    const COLLECTION: &'static str = "scheduling.k8s.io/priorityclasses";
}

impl crate::admission::PriorityClasses for StoredPriorityClasses<'_> {
    fn get(&self, name: &str) -> Option<Value> {
        self.0
            .store
            .get(Self::COLLECTION, "", name)
            .map(|class| class.value.clone())
    }

    fn global_defaults(&self) -> Vec<Value> {
        self.0
            .store
            .list(Self::COLLECTION, None, None, None, |class| {
                class.value["globalDefault"].as_bool() == Some(true)
            })
            .items
            .iter()
            .map(|class| class.value.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn an_owned_merge_patch_merges_as_a_merge_patch() {
        let targets = [
            json!({"phase": "Pending", "qosClass": "BestEffort", "conditions": [{"type": "A"}]}),
            json!(null),
            json!("text"),
            json!({"a": {"b": 1, "c": 2}}),
        ];
        let patches = [
            json!({"phase": "Running", "qosClass": null, "conditions": [{"type": "B"}]}),
            json!({"a": {"b": null, "d": {"e": null, "f": 1}}, "g": null}),
            json!({}),
            json!([1, 2]),
            json!(null),
        ];
        for target in &targets {
            for patch in &patches {
                let mut merged = target.clone();
                json_patch::merge(&mut merged, patch);
                let mut owned = target.clone();
                super::merge_owned(&mut owned, patch.clone());
                assert_eq!(owned, merged, "{target} + {patch}");
            }
        }
    }
}
