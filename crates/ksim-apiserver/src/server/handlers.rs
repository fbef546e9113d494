//! The REST verbs on resources: get, list, create, update, patch, delete,
//! deletecollection, and the status, scale, binding, eviction and finalize
//! subresources. Discovery requests are answered here too.
//!
//! Writes follow kube-apiserver's registry: decode, check the path against
//! the body, apply the kind's strategy ([`super::strategy`]), default and
//! validate ([`crate::admission`]), track managedFields, then write to the
//! store with optimistic concurrency (patches retry on conflicts).

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State as AxumState};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use chrono::{SecondsFormat, Utc};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};

use ksim_core::selector::{FieldSelector, LabelSelectorRequirements};
use ksim_store::{ListPage, Preconditions, StoreError, StoredObject, UpdateOutcome};

use crate::ApiError;
use crate::resources::ResourceInfo;
use crate::table::{IncludeObject, TableOptions, build_table, set_table_version};

use super::State;
use super::bootstrap::SYSTEM_NAMESPACES;
use super::codec::{self, Output};
use super::conversion;
use super::discovery;
use super::path::{self, ResourcePath, Target};
use super::registry::{Registry, collection_of, crd_scale_paths};
use super::strategy;

/// Query parameters of a request.
pub(crate) struct Query(HashMap<String, String>);

impl Query {
    fn parse(query: Option<&str>) -> Self {
        let pairs = query
            .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
            .unwrap_or_default();
        Query(pairs.into_iter().collect())
    }

    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub(crate) fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }

    fn dry_run(&self) -> bool {
        self.get("dryRun") == Some("All")
    }
}

/// Now, as Kubernetes writes times.
pub(crate) fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn store_error(resource: &ResourceInfo, name: &str, error: StoreError) -> ApiError {
    match error {
        StoreError::NotFound => ApiError::not_found(&resource.group, &resource.plural, name),
        StoreError::AlreadyExists => {
            ApiError::already_exists(&resource.group, &resource.plural, name)
        }
        StoreError::Conflict(why) => {
            ApiError::conflict(&resource.group, &resource.plural, name, &why)
        }
        StoreError::Expired { requested, .. } => ApiError::gone(format!(
            "The resourceVersion for the provided watch is too old. (requested {requested})"
        )),
        StoreError::InvalidObject(why) => ApiError::bad_request(why),
    }
}

/// The one handler of `/api` and `/apis`.
pub(crate) async fn handle(AxumState(state): AxumState<Arc<State>>, request: Request) -> Response {
    match dispatch(state, request).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn dispatch(state: Arc<State>, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let registry = state.registry();
    let target = path::parse(parts.uri.path(), &registry)?;
    let query = Query::parse(parts.uri.query());
    let headers = parts.headers;
    let discovery_answer = |value: Value, aggregated: bool| {
        if aggregated {
            codec::respond(
                StatusCode::OK,
                discovery::AGGREGATED_CONTENT_TYPE,
                Bytes::from(serde_json::to_vec(&value).unwrap_or_default()),
            )
        } else {
            codec::respond_value(StatusCode::OK, Output::Json, &value)
        }
    };
    if !matches!(target, Target::Resource(_)) && parts.method != Method::GET {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({})",
            parts.method
        )));
    }
    match target {
        Target::CoreVersions => {
            if discovery::wants_aggregated(&headers) {
                return Ok(discovery_answer(
                    discovery::aggregated(&registry, true),
                    true,
                ));
            }
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("127.0.0.1");
            Ok(discovery_answer(discovery::core_versions(host), false))
        }
        Target::Groups => {
            if discovery::wants_aggregated(&headers) {
                return Ok(discovery_answer(
                    discovery::aggregated(&registry, false),
                    true,
                ));
            }
            Ok(discovery_answer(discovery::group_list(&registry), false))
        }
        Target::Group(group) => discovery::group(&registry, &group)
            .map(|v| discovery_answer(v, false))
            .ok_or_else(ApiError::not_found_path),
        Target::GroupVersion(group, version) => Ok(discovery_answer(
            discovery::resource_list(&registry, &group, &version),
            false,
        )),
        Target::Resource(target) => {
            let request = ResourceRequest {
                state: state.clone(),
                registry,
                target,
                query,
                headers,
            };
            request.dispatch(parts.method, body).await
        }
    }
}

/// One request on a resource.
pub(crate) struct ResourceRequest {
    pub(crate) state: Arc<State>,
    registry: Arc<Registry>,
    pub(crate) target: ResourcePath,
    pub(crate) query: Query,
    headers: HeaderMap,
}

async fn read_body(body: Body) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, codec::MAX_BODY_BYTES)
        .await
        .map_err(|_| {
            ApiError::too_large(format!(
                "Request entity too large: limit is {}",
                codec::MAX_BODY_BYTES
            ))
        })
}

impl ResourceRequest {
    fn resource(&self) -> &ResourceInfo {
        &self.target.resource
    }

    fn collection(&self) -> String {
        collection_of(&self.target.resource)
    }

    fn namespace(&self) -> &str {
        self.target.namespace.as_deref().unwrap_or_default()
    }

    fn name(&self) -> &str {
        self.target.name.as_deref().unwrap_or_default()
    }

    fn field_manager(&self, default: &str) -> String {
        if let Some(manager) = self.query.get("fieldManager") {
            return manager.to_string();
        }
        self.headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .and_then(|agent| agent.split('/').next())
            .filter(|name| !name.is_empty())
            .unwrap_or(default)
            .to_string()
    }

    async fn dispatch(self, method: Method, body: Body) -> Result<Response, ApiError> {
        let output = codec::negotiate(&self.headers)?;
        let has_name = self.target.name.is_some();
        let subresource = self.target.subresource.clone();
        let watch = self.target.watch_prefix || self.query.flag("watch");
        match (method, has_name, subresource.as_deref()) {
            (Method::GET, _, None) if watch => super::watch::serve(self, output),
            (Method::GET, false, None) => self.list(output),
            (Method::GET, true, None | Some("status")) => self.get(output),
            (Method::GET, true, Some("scale")) => self.get_scale(output),
            (Method::POST, false, None) => {
                let body = read_body(body).await?;
                self.create(output, &body)
            }
            (Method::POST, true, Some("binding")) => {
                let body = read_body(body).await?;
                self.bind(&body)
            }
            (Method::POST, true, Some("eviction")) => {
                let body = read_body(body).await?;
                self.evict(&body)
            }
            (Method::PUT, true, None | Some("status") | Some("finalize")) => {
                let body = read_body(body).await?;
                self.update(output, &body)
            }
            (Method::PUT, true, Some("scale")) => {
                let body = read_body(body).await?;
                self.update_scale(output, &body)
            }
            (Method::PATCH, true, _) => {
                let body = read_body(body).await?;
                self.patch(output, &body)
            }
            (Method::DELETE, true, None) => {
                let body = read_body(body).await?;
                self.delete(output, &body)
            }
            (Method::DELETE, false, None) => {
                let body = read_body(body).await?;
                self.delete_collection(output, &body)
            }
            (_, true, Some(sub @ ("log" | "exec" | "attach" | "portforward"))) => Err(
                ApiError::bad_request(simulated_pod_message(self.name(), sub)),
            ),
            (method, _, _) => Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({method})"
            ))),
        }
    }

    /// The object as the client of this resource reads it.
    fn for_version<'a>(&self, object: &'a StoredObject) -> std::borrow::Cow<'a, Value> {
        conversion::from_storage(self.resource(), &object.value)
    }

    /// An object answered in the negotiated form.
    fn respond_object(
        &self,
        status: StatusCode,
        output: Output,
        object: &StoredObject,
    ) -> Response {
        match output {
            Output::Json
                if object.value["apiVersion"].as_str()
                    == Some(self.resource().api_version().as_str()) =>
            {
                codec::respond(status, "application/json", object.json.clone())
            }
            Output::Table { v1beta1 } => {
                let value = self.for_version(object);
                let table = self.table(&[value.as_ref()], false, v1beta1);
                codec::respond_value(status, Output::Json, &table)
            }
            Output::Metadata { v1beta1 } => codec::respond_value(
                status,
                Output::Json,
                &partial_metadata(&object.value, v1beta1),
            ),
            other => codec::respond_value(status, other, &self.for_version(object)),
        }
    }

    pub(crate) fn table(&self, objects: &[&Value], no_headers: bool, v1beta1: bool) -> Value {
        let include_object = match self.query.get("includeObject") {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        };
        let options = TableOptions {
            include_object,
            no_headers,
        };
        let columns = self.registry.printer_columns(self.resource());
        let mut table = build_table(self.resource(), columns, objects, &options, Utc::now());
        if v1beta1 {
            set_table_version(&mut table, "meta.k8s.io/v1beta1");
        }
        table
    }

    fn stored(&self) -> Result<Arc<StoredObject>, ApiError> {
        self.state
            .store
            .get(&self.collection(), self.namespace(), self.name())
            .ok_or_else(|| {
                ApiError::not_found(&self.resource().group, &self.resource().plural, self.name())
            })
    }

    fn get(&self, output: Output) -> Result<Response, ApiError> {
        let object = self.stored()?;
        Ok(self.respond_object(StatusCode::OK, output, &object))
    }

    /// The label and field selectors of the request, as one filter.
    pub(crate) fn selectors(&self) -> Result<ObjectFilter, ApiError> {
        let labels = match self.query.get("labelSelector") {
            Some(s) => LabelSelectorRequirements::parse(s)
                .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?,
            None => LabelSelectorRequirements::default(),
        };
        let mut fields = match self.query.get("fieldSelector") {
            Some(s) => FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?,
            None => FieldSelector::default(),
        };
        strategy::check_field_selector(self.resource(), &fields)?;
        for requirement in &mut fields.requirements {
            requirement.field = conversion::storage_field(self.resource(), &requirement.field);
        }
        Ok(ObjectFilter { labels, fields })
    }

    fn list(&self, output: Output) -> Result<Response, ApiError> {
        let filter = self.selectors()?;
        let limit = self
            .query
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok());
        let continue_after = match self.query.get("continue") {
            Some(token) => Some(decode_continue(token)?),
            None => None,
        };
        let page = self.state.store.list(
            &self.collection(),
            self.target.namespace.as_deref(),
            continue_after.as_ref(),
            limit,
            |object| filter.matches(object),
        );
        Ok(self.respond_list(output, &page))
    }

    fn list_metadata(&self, page: &ListPage) -> Value {
        let mut metadata = json!({"resourceVersion": page.revision.to_string()});
        if let Some(key) = &page.continue_after {
            metadata["continue"] = json!(encode_continue(key, page.revision));
            metadata["remainingItemCount"] = json!(page.remaining);
        }
        metadata
    }

    fn respond_list(&self, output: Output, page: &ListPage) -> Response {
        let metadata = self.list_metadata(page);
        match output {
            Output::Table { v1beta1 } => {
                let values: Vec<std::borrow::Cow<'_, Value>> =
                    page.items.iter().map(|o| self.for_version(o)).collect();
                let refs: Vec<&Value> = values.iter().map(|v| v.as_ref()).collect();
                let mut table = self.table(&refs, false, v1beta1);
                table["metadata"] = metadata;
                codec::respond_value(StatusCode::OK, Output::Json, &table)
            }
            Output::Metadata { v1beta1 } => {
                let items: Vec<Value> = page
                    .items
                    .iter()
                    .map(|o| partial_metadata(&o.value, v1beta1))
                    .collect();
                let list = json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": if v1beta1 { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" },
                    "metadata": metadata,
                    "items": items,
                });
                codec::respond_value(StatusCode::OK, Output::Json, &list)
            }
            Output::Yaml => {
                let items: Vec<Value> = page
                    .items
                    .iter()
                    .map(|o| self.for_version(o).into_owned())
                    .collect();
                let list = json!({
                    "kind": format!("{}List", self.resource().kind),
                    "apiVersion": self.resource().api_version(),
                    "metadata": metadata,
                    "items": items,
                });
                codec::respond_value(StatusCode::OK, Output::Yaml, &list)
            }
            Output::Json => {
                // Items are copied as the bytes serialized at write time.
                let api_version = self.resource().api_version();
                let mut body = BytesMut::with_capacity(
                    128 + page.items.iter().map(|o| o.json.len() + 1).sum::<usize>(),
                );
                let head = json!({
                    "kind": format!("{}List", self.resource().kind),
                    "apiVersion": api_version,
                    "metadata": metadata,
                });
                let head = serde_json::to_vec(&head).unwrap_or_default();
                // `{...}` without its closing brace, then the items.
                body.put_slice(&head[..head.len().saturating_sub(1)]);
                body.put_slice(b",\"items\":[");
                for (i, object) in page.items.iter().enumerate() {
                    if i > 0 {
                        body.put_u8(b',');
                    }
                    if conversion::is_identity(self.resource(), &object.value) {
                        body.put_slice(&object.json);
                    } else {
                        let value = self.for_version(object);
                        body.put_slice(&serde_json::to_vec(value.as_ref()).unwrap_or_default());
                    }
                }
                body.put_slice(b"]}");
                codec::respond(StatusCode::OK, "application/json", body.freeze())
            }
        }
    }

    /// Checks the body's apiVersion/kind/namespace/name against the path
    /// and fills what the path implies.
    fn check_body(&self, object: &mut Value, name_required: bool) -> Result<(), ApiError> {
        let resource = self.resource();
        let expected_version = resource.api_version();
        match object["apiVersion"].as_str() {
            None | Some("") => object["apiVersion"] = json!(expected_version),
            Some(v) if v == expected_version => {}
            Some(v) => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({v}) does not match the expected API version ({expected_version})"
                )));
            }
        }
        match object["kind"].as_str() {
            None | Some("") => object["kind"] = json!(resource.kind),
            Some(k) if k == resource.kind => {}
            Some(k) => {
                return Err(ApiError::bad_request(format!(
                    "{k} in version \"{}\" cannot be handled as a {}: the kind in the data ({k}) does not match the expected kind ({})",
                    resource.version, resource.kind, resource.kind
                )));
            }
        }
        if !object.get("metadata").is_some_and(Value::is_object) {
            object["metadata"] = json!({});
        }
        let metadata = object["metadata"]
            .as_object_mut()
            .expect("metadata was just made an object");
        if resource.namespaced {
            let path_namespace = self.namespace();
            match metadata.get("namespace").and_then(Value::as_str) {
                None | Some("") => {
                    metadata.insert("namespace".into(), json!(path_namespace));
                }
                Some(ns) if ns == path_namespace => {}
                Some(_) => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
            }
        } else {
            metadata.remove("namespace");
        }
        if let Some(url_name) = self.target.name.as_deref() {
            match metadata.get("name").and_then(Value::as_str) {
                None | Some("") if !name_required => {
                    metadata.insert("name".into(), json!(url_name));
                }
                Some(name) if name == url_name => {}
                other => {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({}) does not match the name on the URL ({url_name})",
                        other.unwrap_or_default()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Server-side field validation (`fieldValidation=Strict|Warn|Ignore`):
    /// Strict refuses unknown and duplicate fields, Warn returns them as
    /// warnings to send; unless refused, unknown fields are dropped from the
    /// object, as kube-apiserver's decoding drops them.
    fn validate_fields(
        &self,
        object: &mut Value,
        raw: Option<&[u8]>,
    ) -> Result<Vec<String>, ApiError> {
        let mode = self.query.get("fieldValidation").unwrap_or("Warn");
        if !matches!(mode, "Strict" | "Warn" | "Ignore") {
            return Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {mode}"
            )));
        }
        let unknown = self.state.openapi().unknown_fields(self.resource(), object);
        for problem in &unknown {
            if let Some(path) = problem
                .strip_prefix("unknown field \"")
                .and_then(|p| p.strip_suffix('"'))
            {
                remove_field(object, path);
            }
        }
        if mode == "Ignore" {
            return Ok(Vec::new());
        }
        let mut problems = unknown;
        if let Some(raw) = raw {
            problems.extend(crate::openapi::duplicate_fields(raw));
        }
        if problems.is_empty() {
            Ok(Vec::new())
        } else if mode == "Strict" {
            Err(crate::openapi::strict_error(self.resource(), &problems))
        } else {
            Ok(crate::openapi::warning_headers(&problems))
        }
    }

    fn create(&self, output: Output, body: &[u8]) -> Result<Response, ApiError> {
        if self.resource().namespaced && self.target.namespace.is_none() {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource (post)",
            ));
        }
        let mut object = codec::decode_object(&self.headers, body)?;
        self.check_body(&mut object, false)?;
        let raw = (codec::content_type(&self.headers) == "application/json").then_some(body);
        let warnings = self.validate_fields(&mut object, raw)?;
        let object = conversion::to_storage(self.resource(), object);
        let manager = self.field_manager("unknown");
        let created = if self.query.dry_run() {
            let object = prepare_new_object(&self.state, self.resource(), object, &manager)?;
            Arc::new(StoredObject::dry_run(object))
        } else {
            create_object(&self.state, self.resource(), object, &manager)?
        };
        let mut response = self.respond_object(StatusCode::CREATED, output, &created);
        add_warnings(&mut response, &warnings);
        Ok(response)
    }

    fn update(&self, output: Output, body: &[u8]) -> Result<Response, ApiError> {
        let mut object = codec::decode_object(&self.headers, body)?;
        self.check_body(&mut object, true)?;
        let raw = (codec::content_type(&self.headers) == "application/json").then_some(body);
        let warnings = self.validate_fields(&mut object, raw)?;
        let object = conversion::to_storage(self.resource(), object);
        let expected = match object["metadata"]["resourceVersion"].as_str() {
            Some(v) if !v.is_empty() => Some(parse_revision(v)?),
            _ => None,
        };
        let current = self.stored()?;
        let manager = self.field_manager("unknown");
        let new = self.prepare_write(&current, object, &manager)?;
        let mut response = self.write(output, &current, new, expected)?;
        add_warnings(&mut response, &warnings);
        Ok(response)
    }

    /// Turns what the client sent into the object to store, by subresource.
    fn prepare_write(
        &self,
        current: &StoredObject,
        sent: Value,
        manager: &str,
    ) -> Result<Value, ApiError> {
        let resource = self.resource();
        let definition = definition_of(resource);
        let now = now();
        let api_version = resource.api_version();
        match self.target.subresource.as_deref() {
            Some("status") => {
                let mut new = strategy::prepare_for_status_update(&current.value, &sent);
                ksim_core::apply::track_subresource_update(
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
                crate::admission::default_object(resource, &mut new);
                crate::admission::validate_update(resource, &current.value, &new)?;
                ksim_core::apply::track_update(
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

    /// Writes `new` over `current` and answers it.
    fn write(
        &self,
        output: Output,
        current: &StoredObject,
        new: Value,
        expected: Option<u64>,
    ) -> Result<Response, ApiError> {
        if self.query.dry_run() {
            return Ok(self.respond_object(StatusCode::OK, output, &StoredObject::dry_run(new)));
        }
        let outcome = self
            .state
            .store
            .update(&self.collection(), new, expected)
            .map_err(|e| store_error(self.resource(), self.name(), e))?;
        self.after_write(current, &outcome);
        Ok(self.respond_object(StatusCode::OK, output, outcome.object()))
    }

    /// Side effects of a write on the registry and namespaces.
    fn after_write(&self, _current: &StoredObject, outcome: &UpdateOutcome) {
        let resource = self.resource();
        if resource.group == "apiextensions.k8s.io"
            && !matches!(outcome, UpdateOutcome::Unchanged(_))
        {
            if matches!(outcome, UpdateOutcome::Deleted(_)) {
                remove_custom_resources(&self.state, &outcome.object().value);
            }
            self.state.reload_custom_resources();
        }
        if resource.group.is_empty()
            && resource.plural == "namespaces"
            && matches!(outcome, UpdateOutcome::Updated(_))
        {
            finish_namespace_if_empty(&self.state, self.name());
        }
        if resource.namespaced && matches!(outcome, UpdateOutcome::Deleted(_)) {
            // The last finalizer of the last object of a terminating
            // namespace lets the namespace go.
            finish_namespace_if_empty(&self.state, self.namespace());
        }
    }

    fn patch(&self, output: Output, body: &[u8]) -> Result<Response, ApiError> {
        let patch_type = codec::content_type(&self.headers);
        let resource = self.resource().clone();
        let manager = self.field_manager("unknown");
        let patch = match patch_type.as_str() {
            "application/json-patch+json"
            | "application/merge-patch+json"
            | "application/strategic-merge-patch+json" => serde_json::from_slice::<Value>(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                codec::decode(codec::BodyFormat::Yaml, body)?
            }
            other => return Err(ApiError::unsupported_media_type(other)),
        };
        if patch_type == "application/strategic-merge-patch+json" && resource.custom {
            return Err(ApiError::unsupported_media_type(&patch_type));
        }
        let apply = patch_type == "application/apply-patch+yaml";
        if apply && self.query.get("fieldManager").is_none() {
            return Err(ApiError::bad_request(
                "PATCH /apply requests require a fieldManager",
            ));
        }
        let mut warnings = Vec::new();
        for _attempt in 0..8 {
            let current =
                match self
                    .state
                    .store
                    .get(&self.collection(), self.namespace(), self.name())
                {
                    Some(current) => current,
                    None if apply && self.target.subresource.is_none() => {
                        return self.apply_create(output, &patch, &manager);
                    }
                    None => {
                        return Err(ApiError::not_found(
                            &resource.group,
                            &resource.plural,
                            self.name(),
                        ));
                    }
                };
            let new = if self.target.subresource.as_deref() == Some("scale") {
                self.patch_scale(&current, &patch_type, &patch)?
            } else {
                let live = self.for_version(&current);
                let mut patched = if apply {
                    self.apply_patch(Some(live.as_ref()), &patch, &manager)?
                } else {
                    apply_patch(&resource, &patch_type, live.as_ref(), &patch)?
                };
                self.check_body(&mut patched, true)?;
                warnings = self.validate_fields(&mut patched, None)?;
                let mut patched = conversion::to_storage(&resource, patched);
                if apply {
                    match self.target.subresource.as_deref() {
                        Some("status") => {
                            strategy::prepare_for_status_update(&current.value, &patched)
                        }
                        _ => {
                            strategy::prepare_for_update(&resource, &current.value, &mut patched);
                            crate::admission::default_object(&resource, &mut patched);
                            crate::admission::validate_update(&resource, &current.value, &patched)?;
                            patched
                        }
                    }
                } else {
                    self.prepare_write(&current, patched, &manager)?
                }
            };
            // A resourceVersion in the patch is a precondition.
            let sent_version = patch["metadata"]["resourceVersion"].as_str();
            if let Some(version) = sent_version
                && parse_revision(version)? != current.revision
            {
                return Err(store_error(
                    &resource,
                    self.name(),
                    StoreError::Conflict("the object has been modified; please apply your changes to the latest version and try again".into()),
                ));
            }
            let written = if self.target.subresource.as_deref() == Some("scale") {
                self.write_scale(output, new, Some(current.revision))
            } else {
                self.write(output, &current, new, Some(current.revision))
            };
            match written {
                Err(error) if error.reason == "Conflict" && sent_version.is_none() => continue,
                Ok(mut response) => {
                    add_warnings(&mut response, &warnings);
                    return Ok(response);
                }
                other => return other,
            }
        }
        Err(ApiError::conflict(
            &resource.group,
            &resource.plural,
            self.name(),
            "the object has been modified; please apply your changes to the latest version and try again",
        ))
    }

    /// Server-side apply onto `live`: the applied object, or 409 conflicts.
    fn apply_patch(
        &self,
        live: Option<&Value>,
        applied: &Value,
        manager: &str,
    ) -> Result<Value, ApiError> {
        let resource = self.resource();
        let definition = definition_of(resource);
        let mut applied = applied.clone();
        self.check_body(&mut applied, false)?;
        if self.target.subresource.is_none()
            && resource.has_subresource("status")
            && let Some(map) = applied.as_object_mut()
        {
            map.remove("status");
        }
        let now = now();
        let api_version = resource.api_version();
        let request = ksim_core::apply::ApplyRequest {
            definition: definition.as_deref(),
            live,
            applied: &applied,
            manager,
            force: self.query.flag("force"),
            api_version: &api_version,
            now: &now,
        };
        match ksim_core::apply::server_side_apply(&request) {
            Ok(ksim_core::apply::ApplyOutcome::Applied(object)) => Ok(object),
            Ok(ksim_core::apply::ApplyOutcome::Conflicts(conflicts)) => {
                let mut error =
                    ApiError::conflict(&resource.group, &resource.plural, self.name(), "");
                error.message = ksim_core::apply::conflict_message(&conflicts);
                let causes: Vec<Value> = conflicts
                    .iter()
                    .map(|c| json!({"reason": "FieldManagerConflict", "message": c.cause_message(), "field": c.field}))
                    .collect();
                if let Some(details) = error.details.as_mut() {
                    details["causes"] = json!(causes);
                }
                Err(error)
            }
            Err(e) => Err(ApiError::bad_request(e.to_string())),
        }
    }

    fn apply_create(
        &self,
        output: Output,
        patch: &Value,
        manager: &str,
    ) -> Result<Response, ApiError> {
        let mut applied = self.apply_patch(None, patch, manager)?;
        let _ = self.validate_fields(&mut applied, None)?;
        let applied = conversion::to_storage(self.resource(), applied);
        let created = if self.query.dry_run() {
            Arc::new(StoredObject::dry_run(prepare_new_object(
                &self.state,
                self.resource(),
                applied,
                manager,
            )?))
        } else {
            create_object_tracked(&self.state, self.resource(), applied, None)?
        };
        Ok(self.respond_object(StatusCode::CREATED, output, &created))
    }

    fn scale_of(&self, object: &Value) -> Result<Value, ApiError> {
        let (spec_path, status_path) = self.scale_paths()?;
        let replicas = json_path_get(object, &spec_path)
            .cloned()
            .unwrap_or(json!(0));
        let status_replicas = json_path_get(object, &status_path)
            .cloned()
            .unwrap_or(json!(0));
        let selector = object["status"]["selector"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| selector_string(&object["spec"]["selector"]));
        let metadata = &object["metadata"];
        Ok(json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "uid": metadata["uid"],
                "resourceVersion": metadata["resourceVersion"],
                "creationTimestamp": metadata["creationTimestamp"],
            },
            "spec": {"replicas": replicas},
            "status": {"replicas": status_replicas, "selector": selector},
        }))
    }

    fn scale_paths(&self) -> Result<(String, String), ApiError> {
        let resource = self.resource();
        if resource.custom {
            let crd = self
                .registry
                .crds()
                .iter()
                .find(|crd| {
                    crd["spec"]["group"] == json!(resource.group)
                        && crd["spec"]["names"]["plural"] == json!(resource.plural)
                })
                .ok_or_else(ApiError::not_found_path)?;
            crd_scale_paths(crd, &resource.version).ok_or_else(ApiError::not_found_path)
        } else {
            Ok((".spec.replicas".into(), ".status.replicas".into()))
        }
    }

    fn get_scale(&self, output: Output) -> Result<Response, ApiError> {
        let object = self.stored()?;
        let scale = self.scale_of(&object.value)?;
        Ok(codec::respond_value(StatusCode::OK, plain(output), &scale))
    }

    /// The object with the replicas a (patched or sent) Scale asks for.
    fn with_scale(&self, current: &StoredObject, scale: &Value) -> Result<Value, ApiError> {
        let replicas = scale["spec"]["replicas"].as_i64().ok_or_else(|| {
            ApiError::invalid(
                "autoscaling",
                "Scale",
                self.name(),
                vec![crate::StatusCause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value".into(),
                    field: "spec.replicas".into(),
                }],
            )
        })?;
        if replicas < 0 {
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                self.name(),
                vec![crate::StatusCause {
                    reason: "FieldValueInvalid".into(),
                    message: format!(
                        "Invalid value: {replicas}: must be greater than or equal to 0"
                    ),
                    field: "spec.replicas".into(),
                }],
            ));
        }
        let (spec_path, _) = self.scale_paths()?;
        let mut new = current.value.clone();
        json_path_set(&mut new, &spec_path, json!(replicas));
        let mut prepared = new.clone();
        strategy::prepare_for_update(self.resource(), &current.value, &mut prepared);
        if let Some(status) = current.value.get("status") {
            prepared["status"] = status.clone();
        }
        let definition = definition_of(self.resource());
        ksim_core::apply::track_subresource_update(
            definition.as_deref(),
            Some(&current.value),
            &mut prepared,
            &self.field_manager("unknown"),
            "scale",
            &self.resource().api_version(),
            &now(),
        );
        Ok(prepared)
    }

    fn patch_scale(
        &self,
        current: &StoredObject,
        patch_type: &str,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        let scale = self.scale_of(&current.value)?;
        let patched = match patch_type {
            "application/json-patch+json" | "application/merge-patch+json" => {
                apply_generic_patch(patch_type, &scale, patch)?
            }
            _ => {
                let mut merged = scale.clone();
                json_patch::merge(&mut merged, patch);
                merged
            }
        };
        self.with_scale(current, &patched)
    }

    fn update_scale(&self, output: Output, body: &[u8]) -> Result<Response, ApiError> {
        let scale = codec::decode_object(&self.headers, body)?;
        let current = self.stored()?;
        let expected = match scale["metadata"]["resourceVersion"].as_str() {
            Some(v) if !v.is_empty() => Some(parse_revision(v)?),
            _ => None,
        };
        let new = self.with_scale(&current, &scale)?;
        self.write_scale(output, new, expected)
    }

    /// Writes an object changed through its scale subresource and answers
    /// the resulting Scale.
    fn write_scale(
        &self,
        output: Output,
        new: Value,
        expected: Option<u64>,
    ) -> Result<Response, ApiError> {
        if self.query.dry_run() {
            let scale = self.scale_of(&new)?;
            return Ok(codec::respond_value(StatusCode::OK, plain(output), &scale));
        }
        let outcome = self
            .state
            .store
            .update(&self.collection(), new, expected)
            .map_err(|e| store_error(self.resource(), self.name(), e))?;
        let scale = self.scale_of(&outcome.object().value)?;
        Ok(codec::respond_value(StatusCode::OK, plain(output), &scale))
    }

    fn bind(&self, body: &[u8]) -> Result<Response, ApiError> {
        let binding = codec::decode_object(&self.headers, body)?;
        let node = binding["target"]["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                ApiError::invalid(
                    "",
                    "Binding",
                    self.name(),
                    vec![crate::StatusCause {
                        reason: "FieldValueRequired".into(),
                        message: "Required value".into(),
                        field: "target.name".into(),
                    }],
                )
            })?
            .to_string();
        for _attempt in 0..8 {
            let current = self.stored()?;
            let pod = &current.value;
            if pod["metadata"]["deletionTimestamp"].is_string() {
                return Err(ApiError::conflict(
                    "",
                    "pods/binding",
                    self.name(),
                    &format!(
                        "pod {} is being deleted, cannot be assigned to a host",
                        self.name()
                    ),
                ));
            }
            if let Some(assigned) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
                return Err(ApiError::conflict(
                    "",
                    "pods/binding",
                    self.name(),
                    &format!(
                        "pod {} is already assigned to node \"{assigned}\"",
                        self.name()
                    ),
                ));
            }
            let mut new = pod.clone();
            new["spec"]["nodeName"] = json!(node);
            set_condition(
                &mut new,
                json!({
                    "type": "PodScheduled", "status": "True", "lastProbeTime": null,
                    "lastTransitionTime": now(),
                }),
            );
            if self.query.dry_run() {
                return Ok(success_status(StatusCode::CREATED));
            }
            match self
                .state
                .store
                .update(&self.collection(), new, Some(current.revision))
            {
                Ok(_) => return Ok(success_status(StatusCode::CREATED)),
                Err(StoreError::Conflict(_)) => continue,
                Err(e) => return Err(store_error(self.resource(), self.name(), e)),
            }
        }
        Err(ApiError::conflict(
            "",
            "pods/binding",
            self.name(),
            "the object has been modified; please apply your changes to the latest version and try again",
        ))
    }

    /// The eviction subresource: deletes the pod unless a disruption budget
    /// forbids it (the full PodDisruptionBudget semantics come with the
    /// disruption controller).
    fn evict(&self, body: &[u8]) -> Result<Response, ApiError> {
        let eviction = codec::decode_object(&self.headers, body)?;
        let pod = self.stored()?;
        let phase = pod.value["status"]["phase"].as_str().unwrap_or_default();
        let terminal_or_pending = matches!(phase, "Succeeded" | "Failed" | "Pending");
        let terminating = pod.value["metadata"]["deletionTimestamp"].is_string();
        if !terminal_or_pending && !terminating {
            let labels = pod.labels().cloned().unwrap_or_default();
            let budgets = self.state.store.list(
                "policy/poddisruptionbudgets",
                Some(self.namespace()),
                None,
                None,
                |pdb| {
                    LabelSelectorRequirements::from_json(&pdb.value["spec"]["selector"])
                        .is_ok_and(|s| !s.is_empty() && s.matches(&labels))
                },
            );
            match budgets.items.as_slice() {
                [] => {}
                [budget] => {
                    let status = &budget.value["status"];
                    let generation = budget.value["metadata"]["generation"].as_i64().unwrap_or(0);
                    let observed = status["observedGeneration"].as_i64().unwrap_or(0);
                    let name = budget.name();
                    if observed < generation {
                        return Err(ApiError::too_many_requests(
                            "Cannot evict pod as it would violate the pod's disruption budget.",
                            json!([{"reason": "DisruptionBudget", "message": format!("The disruption budget {name} is still being processed by the server.")}]),
                        ));
                    }
                    if status["disruptionsAllowed"].as_i64().unwrap_or(0) < 1 {
                        return Err(ApiError::too_many_requests(
                            "Cannot evict pod as it would violate the pod's disruption budget.",
                            json!([{"reason": "DisruptionBudget", "message": format!(
                                "The disruption budget {name} needs {} healthy pods and has {} currently",
                                status["desiredHealthy"].as_i64().unwrap_or(0),
                                status["currentHealthy"].as_i64().unwrap_or(0),
                            )}]),
                        ));
                    }
                    let mut updated = budget.value.clone();
                    updated["status"]["disruptionsAllowed"] =
                        json!(status["disruptionsAllowed"].as_i64().unwrap_or(0) - 1);
                    updated["status"]["disruptedPods"][self.name()] = json!(now());
                    if !self.query.dry_run() {
                        self.state
                            .store
                            .update(
                                "policy/poddisruptionbudgets",
                                updated,
                                Some(budget.revision),
                            )
                            .map_err(|e| match e {
                                StoreError::Conflict(why) => {
                                    ApiError::conflict("policy", "poddisruptionbudgets", name, &why)
                                }
                                other => ApiError::internal(other.to_string()),
                            })?;
                    }
                }
                _ => {
                    return Err(ApiError::internal(
                        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                    ));
                }
            }
        }
        if !self.query.dry_run() {
            let options = &eviction["deleteOptions"];
            delete_object(
                &self.state,
                self.resource(),
                self.namespace(),
                self.name(),
                options,
            )?;
        }
        Ok(success_status(StatusCode::CREATED))
    }

    fn delete(&self, output: Output, body: &[u8]) -> Result<Response, ApiError> {
        let options = self.delete_options(body)?;
        let resource = self.resource();
        if resource.group.is_empty()
            && resource.plural == "namespaces"
            && SYSTEM_NAMESPACES.contains(&self.name())
        {
            return Err(ApiError::forbidden(format!(
                "namespaces \"{}\" is forbidden: this namespace may not be deleted",
                self.name()
            )));
        }
        if self.query.dry_run() {
            let current = self.stored()?;
            return Ok(self.respond_object(StatusCode::OK, output, &current));
        }
        let (status, object) = delete_object(
            &self.state,
            resource,
            self.namespace(),
            self.name(),
            &options,
        )?;
        Ok(self.respond_object(status, output, &object))
    }

    fn delete_options(&self, body: &[u8]) -> Result<Value, ApiError> {
        let mut options = if body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            codec::decode(codec::BodyFormat::Json, body)?
        };
        if let Some(grace) = self.query.get("gracePeriodSeconds") {
            let grace: i64 = grace.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid gracePeriodSeconds: {grace}"))
            })?;
            options["gracePeriodSeconds"] = json!(grace);
        }
        if let Some(policy) = self.query.get("propagationPolicy") {
            options["propagationPolicy"] = json!(policy);
        }
        Ok(options)
    }

    fn delete_collection(&self, output: Output, body: &[u8]) -> Result<Response, ApiError> {
        let options = self.delete_options(body)?;
        let filter = self.selectors()?;
        let page = self.state.store.list(
            &self.collection(),
            self.target.namespace.as_deref(),
            None,
            None,
            |object| filter.matches(object),
        );
        let mut deleted = Vec::new();
        for object in &page.items {
            if self.resource().plural == "namespaces" && SYSTEM_NAMESPACES.contains(&object.name())
            {
                continue;
            }
            if self.query.dry_run() {
                deleted.push(object.clone());
                continue;
            }
            match delete_object(
                &self.state,
                self.resource(),
                object.namespace(),
                object.name(),
                &options,
            ) {
                Ok((_, object)) => deleted.push(object),
                Err(error) if error.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        let result = ListPage {
            items: deleted,
            revision: self.state.store.revision(),
            continue_after: None,
            remaining: 0,
        };
        Ok(self.respond_list(output, &result))
    }
}

/// What `kubectl logs/exec/attach/port-forward` get for a simulated pod.
fn simulated_pod_message(pod: &str, subresource: &str) -> String {
    let what = match subresource {
        "log" => "has no logs",
        "exec" => "cannot run commands",
        "attach" => "cannot be attached to",
        _ => "has no ports to forward",
    };
    format!("pod \"{pod}\" is simulated by ksim: its containers do not run, so it {what}")
}

/// The OpenAPI definition of a built-in kind.
fn definition_of(resource: &ResourceInfo) -> Option<String> {
    if resource.custom {
        return None;
    }
    ksim_core::schema::definitions()
        .definition_for_kind(&resource.group, &resource.version, &resource.kind)
        .map(str::to_string)
}

/// Label and field selectors of a list or watch.
pub(crate) struct ObjectFilter {
    labels: LabelSelectorRequirements,
    fields: FieldSelector,
}

impl ObjectFilter {
    pub(crate) fn matches(&self, object: &StoredObject) -> bool {
        if !self.labels.is_empty() {
            let matched = match object.labels() {
                Some(labels) => self.labels.matches(labels),
                None => self.labels.matches(&ksim_core::selector::NoLabels),
            };
            if !matched {
                return false;
            }
        }
        self.fields.requirements.is_empty()
            || self.fields.matches(|field| match field {
                "metadata.name" => Some(object.name().to_string()),
                "metadata.namespace" => Some(object.namespace().to_string()),
                other => strategy::field_value(&object.value, other),
            })
    }
}

fn plain(output: Output) -> Output {
    match output {
        Output::Yaml => Output::Yaml,
        _ => Output::Json,
    }
}

fn add_warnings(response: &mut Response, warnings: &[String]) {
    for warning in warnings {
        if let Ok(value) = HeaderValue::from_str(warning) {
            response.headers_mut().append("Warning", value);
        }
    }
}

fn success_status(code: StatusCode) -> Response {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code.as_u16()});
    codec::respond_value(code, Output::Json, &status)
}

fn partial_metadata(object: &Value, v1beta1: bool) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": if v1beta1 { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" },
        "metadata": object.get("metadata").cloned().unwrap_or(json!({})),
    })
}

fn parse_revision(value: &str) -> Result<u64, ApiError> {
    value
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {value:?}")))
}

/// Continue tokens: base64 of `{"v":"meta.k8s.io/v1","rv":N,"start":"<ns>/<name>\u0000"}`,
/// the form kube-apiserver uses.
fn encode_continue(key: &(String, String), revision: u64) -> String {
    let start = format!("{}/{}", key.0, key.1);
    let token = json!({"v": "meta.k8s.io/v1", "rv": revision, "start": format!("{start}\u{0}")});
    base64_encode(&serde_json::to_vec(&token).unwrap_or_default())
}

fn decode_continue(token: &str) -> Result<(String, String), ApiError> {
    let invalid = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let bytes = base64_decode(token).ok_or_else(invalid)?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    let start = value["start"].as_str().ok_or_else(invalid)?;
    let start = start.strip_suffix('\u{0}').unwrap_or(start);
    let (namespace, name) = start.split_once('/').ok_or_else(invalid)?;
    Ok((namespace.to_string(), name.to_string()))
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(BASE64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut buffer = 0u32;
    let mut bits = 0;
    for c in text.bytes().filter(|c| *c != b'=') {
        let value = BASE64.iter().position(|b| *b == c)? as u32;
        buffer = (buffer << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// A `LabelSelector` as a string (`app=web,tier in (a,b)`), as the scale
/// subresource reports it.
fn selector_string(selector: &Value) -> String {
    let mut terms = Vec::new();
    if let Some(labels) = selector["matchLabels"].as_object() {
        for (k, v) in labels {
            terms.push(format!("{k}={}", v.as_str().unwrap_or_default()));
        }
    }
    for expression in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = expression["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = expression["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match expression["operator"].as_str().unwrap_or_default() {
            "In" => terms.push(format!("{key} in ({})", values.join(","))),
            "NotIn" => terms.push(format!("{key} notin ({})", values.join(","))),
            "Exists" => terms.push(key.to_string()),
            "DoesNotExist" => terms.push(format!("!{key}")),
            _ => {}
        }
    }
    terms.join(",")
}

/// Removes the field at a path as field validation reports it
/// (`spec.template.spec.containers[0].bogus`).
fn remove_field(object: &mut Value, path: &str) {
    let mut segments: Vec<&str> = Vec::new();
    for part in path.split('.') {
        let mut rest = part;
        if let Some(bracket) = rest.find('[') {
            segments.push(&rest[..bracket]);
            rest = &rest[bracket..];
            while let Some(end) = rest.find(']') {
                segments.push(&rest[..=end]);
                rest = &rest[end + 1..];
            }
        } else {
            segments.push(rest);
        }
    }
    let Some((last, parents)) = segments.split_last() else {
        return;
    };
    let mut value = object;
    for segment in parents {
        let next = match segment.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            Some(index) => index.parse::<usize>().ok().and_then(|i| value.get_mut(i)),
            None => value.get_mut(*segment),
        };
        match next {
            Some(next) => value = next,
            None => return,
        }
    }
    if let Some(map) = value.as_object_mut() {
        map.remove(*last);
    }
}

/// `.spec.replicas` style path lookup.
fn json_path_get<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.')
        .split('.')
        .try_fold(object, |value, part| value.get(part))
}

fn json_path_set(object: &mut Value, path: &str, new: Value) {
    let mut value = object;
    let parts: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        if !value.get(*part).is_some_and(Value::is_object) {
            value[*part] = json!({});
        }
        value = &mut value[*part];
    }
    if let Some(last) = parts.last() {
        value[*last] = new;
    }
}

/// Sets (or replaces by type) a status condition.
fn set_condition(object: &mut Value, condition: Value) {
    if !object["status"]["conditions"].is_array() {
        object["status"]["conditions"] = json!([]);
    }
    if let Some(conditions) = object["status"]["conditions"].as_array_mut() {
        match conditions
            .iter_mut()
            .find(|c| c["type"] == condition["type"])
        {
            Some(existing) => *existing = condition,
            None => conditions.push(condition),
        }
    }
}

fn apply_generic_patch(
    patch_type: &str,
    original: &Value,
    patch: &Value,
) -> Result<Value, ApiError> {
    let mut result = original.clone();
    match patch_type {
        "application/json-patch+json" => {
            let operations: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch::patch(&mut result, &operations)
                .map_err(|e| ApiError::invalid_patch(e.to_string()))?;
        }
        _ => json_patch::merge(&mut result, patch),
    }
    Ok(result)
}

/// Applies a JSON, merge or strategic merge patch.
fn apply_patch(
    resource: &ResourceInfo,
    patch_type: &str,
    original: &Value,
    patch: &Value,
) -> Result<Value, ApiError> {
    if patch_type == "application/strategic-merge-patch+json" {
        let definition = definition_of(resource).unwrap_or_default();
        return ksim_core::patch::strategic_merge_patch(&definition, original, patch)
            .map_err(|e| ApiError::invalid_patch(e.to_string()));
    }
    if patch_type == "application/merge-patch+json" && !patch.is_object() {
        return Err(ApiError::bad_request(
            "error decoding patch: the patch must be a JSON object",
        ));
    }
    apply_generic_patch(patch_type, original, patch)
}

/// Generated names: `generateName` + 5 characters kube-apiserver's
/// alphabet uses.
fn generated_name(prefix: &str) -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
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
    mut object: Value,
    manager: &str,
) -> Result<Value, ApiError> {
    let metadata = &mut object["metadata"];
    let has_name = metadata["name"].as_str().is_some_and(|n| !n.is_empty());
    if !has_name && let Some(prefix) = metadata["generateName"].as_str().map(str::to_string) {
        metadata["name"] = json!(generated_name(&prefix));
    }
    let uid = uuid::Uuid::new_v4().to_string();
    let now = now();
    strategy::prepare_for_create(resource, &mut object, &uid, &now);
    crate::admission::default_object(resource, &mut object);
    allocate(state, resource, &mut object);
    crate::admission::validate_create(resource, &object)?;
    if resource.namespaced {
        check_namespace_open(
            state,
            resource,
            object["metadata"]["name"].as_str().unwrap_or_default(),
            object["metadata"]["namespace"].as_str().unwrap_or_default(),
        )?;
    }
    let definition = definition_of(resource);
    ksim_core::apply::track_update(
        definition.as_deref(),
        None,
        &mut object,
        manager,
        &resource.api_version(),
        &now,
    );
    Ok(object)
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

/// Creates an object; `manager` None means managedFields are already set
/// (server-side apply).
fn create_object_tracked(
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
    for _attempt in 0..8 {
        let prepared = match manager {
            Some(manager) => prepare_new_object(state, resource, object.clone(), manager)?,
            None => {
                let managed = object["metadata"]["managedFields"].clone();
                let mut prepared = prepare_new_object(state, resource, object.clone(), "")?;
                prepared["metadata"]["managedFields"] = managed;
                prepared
            }
        };
        let name = prepared["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match state.store.create(&collection, prepared) {
            Ok(stored) => {
                if resource.group == "apiextensions.k8s.io" {
                    state.reload_custom_resources();
                }
                return Ok(stored);
            }
            Err(StoreError::AlreadyExists) if generate => continue,
            Err(error) => return Err(store_error(resource, &name, error)),
        }
    }
    Err(ApiError::internal("could not generate a unique name"))
}

/// ClusterIPs and NodePorts of Services, the status of new CRDs.
fn allocate(state: &State, resource: &ResourceInfo, object: &mut Value) {
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
            let now = now();
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
fn check_namespace_open(
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

/// Deletes an object as kube-apiserver does: graceful for bound pods,
/// marking when finalizers remain, at once otherwise. Returns 200 with the
/// deleted object, or 202 with the marked one.
pub(crate) fn delete_object(
    state: &State,
    resource: &ResourceInfo,
    namespace: &str,
    name: &str,
    options: &Value,
) -> Result<(StatusCode, Arc<StoredObject>), ApiError> {
    let collection = collection_of(resource);
    let preconditions = Preconditions {
        uid: options["preconditions"]["uid"].as_str().map(str::to_string),
        resource_version: match options["preconditions"]["resourceVersion"].as_str() {
            Some(v) => Some(parse_revision(v)?),
            None => None,
        },
    };
    for _attempt in 0..8 {
        let current = state
            .store
            .get(&collection, namespace, name)
            .ok_or_else(|| ApiError::not_found(&resource.group, &resource.plural, name))?;
        let value = &current.value;
        let mut finalizers: Vec<Value> = value["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        match options["propagationPolicy"].as_str() {
            Some("Foreground") => push_unique(&mut finalizers, "foregroundDeletion"),
            Some("Orphan") => push_unique(&mut finalizers, "orphan"),
            _ if options["orphanDependents"].as_bool() == Some(true) => {
                push_unique(&mut finalizers, "orphan")
            }
            _ => {}
        }
        let is_namespace = resource.group.is_empty() && resource.plural == "namespaces";
        let grace = pod_grace_period(resource, value, options);
        let already_terminating = value["metadata"]["deletionTimestamp"].is_string();
        if finalizers.is_empty() && grace == 0 && !is_namespace {
            let deleted = state
                .store
                .delete(&collection, namespace, name, &preconditions)
                .map_err(|e| store_error(resource, name, e))?;
            if resource.group == "apiextensions.k8s.io" {
                remove_custom_resources(state, &deleted.value);
                state.reload_custom_resources();
            }
            if resource.namespaced {
                finish_namespace_if_empty(state, namespace);
            }
            return Ok((StatusCode::OK, deleted));
        }
        if already_terminating && !is_namespace {
            let shorter = grace
                < value["metadata"]["deletionGracePeriodSeconds"]
                    .as_i64()
                    .unwrap_or(0);
            if !shorter {
                return Ok((StatusCode::ACCEPTED, current));
            }
        }
        let mut marked = value.clone();
        let deletion_time = Utc::now() + chrono::Duration::seconds(grace);
        marked["metadata"]["deletionTimestamp"] =
            json!(deletion_time.to_rfc3339_opts(SecondsFormat::Secs, true));
        marked["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        if !finalizers.is_empty() {
            marked["metadata"]["finalizers"] = json!(finalizers);
        }
        if is_namespace {
            marked["status"]["phase"] = json!("Terminating");
            if already_terminating {
                marked["metadata"]["deletionTimestamp"] =
                    value["metadata"]["deletionTimestamp"].clone();
            }
        }
        if let Some(pod_grace) = (grace > 0).then_some(grace)
            && resource.plural == "pods"
        {
            marked["spec"]["terminationGracePeriodSeconds"] = json!(pod_grace);
        }
        match state
            .store
            .update(&collection, marked, Some(current.revision))
        {
            Ok(outcome) => {
                if is_namespace {
                    delete_namespace_contents(state, name);
                    if let Some(gone) = finish_namespace_if_empty(state, name) {
                        return Ok((StatusCode::OK, gone));
                    }
                }
                let status = if matches!(outcome, UpdateOutcome::Deleted(_)) {
                    StatusCode::OK
                } else {
                    StatusCode::ACCEPTED
                };
                return Ok((status, outcome.object().clone()));
            }
            Err(StoreError::Conflict(_)) if preconditions.resource_version.is_none() => continue,
            Err(error) => return Err(store_error(resource, name, error)),
        }
    }
    Err(ApiError::conflict(
        &resource.group,
        &resource.plural,
        name,
        "the object has been modified; please apply your changes to the latest version and try again",
    ))
}

fn push_unique(finalizers: &mut Vec<Value>, finalizer: &str) {
    if !finalizers.iter().any(|f| f == finalizer) {
        finalizers.push(json!(finalizer));
    }
}

/// The grace period of a delete: pods bound to a node and not finished wait
/// for their kubelet; everything else goes at once.
fn pod_grace_period(resource: &ResourceInfo, pod: &Value, options: &Value) -> i64 {
    if !(resource.group.is_empty() && resource.plural == "pods") {
        return 0;
    }
    let requested = options["gracePeriodSeconds"]
        .as_i64()
        .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(30)
        .max(0);
    let bound = pod["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty());
    let finished = matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    if !bound || finished { 0 } else { requested }
}

/// Deletes every namespaced object in a terminating namespace (those with
/// finalizers are only marked). Until the namespace controller runs as a
/// client, the server does this itself.
fn delete_namespace_contents(state: &State, namespace: &str) {
    let registry = state.registry();
    let mut seen = std::collections::HashSet::new();
    for resource in registry.resources().iter().filter(|r| r.namespaced) {
        let collection = collection_of(resource);
        if !seen.insert(collection.clone()) {
            continue;
        }
        let page = state
            .store
            .list(&collection, Some(namespace), None, None, |_| true);
        for object in page.items {
            let options = json!({"gracePeriodSeconds": 0});
            if let Err(error) = delete_object(state, resource, namespace, object.name(), &options)
                && error.code != 404
            {
                tracing::warn!(%error, namespace, name = object.name(), "cannot delete namespace content");
            }
        }
    }
}

/// Once nothing is left in a terminating namespace, removes the
/// `kubernetes` finalizer from its `spec.finalizers` (what the namespace
/// controller does through `/finalize`); the store then removes the
/// namespace if no other finalizer holds it. Returns the deleted namespace.
fn finish_namespace_if_empty(state: &State, namespace: &str) -> Option<Arc<StoredObject>> {
    let ns = state.store.get("/namespaces", "", namespace)?;
    if !ns.value["metadata"]["deletionTimestamp"].is_string() {
        return None;
    }
    let registry = state.registry();
    let occupied = registry
        .resources()
        .iter()
        .filter(|r| r.namespaced)
        .any(|r| {
            !state
                .store
                .list(&collection_of(r), Some(namespace), None, Some(1), |_| true)
                .items
                .is_empty()
        });
    if occupied {
        return None;
    }
    let mut finalized = ns.value.clone();
    let remaining: Vec<Value> = finalized["spec"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f.as_str() != Some("kubernetes"))
        .cloned()
        .collect();
    finalized["spec"]["finalizers"] = json!(remaining);
    match state
        .store
        .update("/namespaces", finalized, Some(ns.revision))
    {
        Ok(UpdateOutcome::Deleted(gone)) => Some(gone),
        _ => None,
    }
}

/// Deletes every custom resource of a deleted CRD.
fn remove_custom_resources(state: &State, crd: &Value) {
    let (Some(group), Some(plural)) = (
        crd["spec"]["group"].as_str(),
        crd["spec"]["names"]["plural"].as_str(),
    ) else {
        return;
    };
    let collection = format!("{group}/{plural}");
    let page = state.store.list(&collection, None, None, None, |_| true);
    for object in page.items {
        let _ = state.store.delete(
            &collection,
            object.namespace(),
            object.name(),
            &Preconditions::default(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let key = ("default".to_string(), "web-1".to_string());
        let token = encode_continue(&key, 42);
        assert_eq!(decode_continue(&token).expect("valid"), key);
        assert_eq!(decode_continue("!!!").expect_err("invalid").code, 400);
    }

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64_encode(b"ksim"), "a3NpbQ==");
        assert_eq!(base64_decode("a3NpbQ==").expect("valid"), b"ksim");
    }

    #[test]
    fn unknown_fields_are_removed_by_their_reported_path() {
        let mut object = json!({"spec": {"bogus": 1, "template": {"spec": {"containers": [{"name": "a"}, {"name": "b", "imagePullPolcy": "x"}]}}}});
        remove_field(&mut object, "spec.bogus");
        remove_field(
            &mut object,
            "spec.template.spec.containers[1].imagePullPolcy",
        );
        remove_field(&mut object, "spec.missing.deeper");
        assert_eq!(
            object,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}}})
        );
    }

    #[test]
    fn scale_selector_strings() {
        let selector = json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]});
        assert_eq!(selector_string(&selector), "app=web,tier in (a,b)");
    }

    #[test]
    fn bound_pods_wait_for_their_kubelet() {
        let pods = crate::resources::built_in_resources()
            .into_iter()
            .find(|r| r.plural == "pods")
            .expect("pods");
        let bound = json!({"spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30}, "status": {"phase": "Running"}});
        assert_eq!(pod_grace_period(&pods, &bound, &json!({})), 30);
        assert_eq!(
            pod_grace_period(&pods, &bound, &json!({"gracePeriodSeconds": 0})),
            0
        );
        let unbound = json!({"spec": {}, "status": {"phase": "Pending"}});
        assert_eq!(pod_grace_period(&pods, &unbound, &json!({})), 0);
    }
}
