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
use chrono::SecondsFormat;
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

pub(crate) mod bulk;
mod delete;
mod eviction;
mod patch;
mod read;
mod review;
pub(crate) mod snapshot;
mod subresources;
mod write;

pub(crate) use delete::delete_object;
pub(crate) use read::base64_encode;
pub(crate) use write::{create_cluster_object, prepare_new_object};

/// Query parameters of a request.
pub(crate) struct Query(HashMap<String, String>);

impl Query {
    pub(crate) fn parse(query: Option<&str>) -> Self {
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
            let deprecation = deprecation_warning(&target.resource);
            let request = ResourceRequest {
                state: state.clone(),
                registry,
                target,
                query,
                headers,
            };
            let mut response = request.dispatch(parts.method, body).await?;
            if let Some(warning) = deprecation {
                add_warnings(&mut response, &[warning.to_string()]);
            }
            Ok(response)
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

/// How much of an oversized body is read (and dropped) before answering
/// 413, so that a client still writing it reads the answer rather than a
/// reset connection.
const OVERSIZED_BODY_DRAIN_BYTES: usize = 64 * 1024 * 1024;

async fn read_body(body: Body) -> Result<Bytes, ApiError> {
    use http_body_util::BodyExt;
    let too_large = || {
        ApiError::too_large(format!(
            "Request entity too large: limit is {}",
            codec::MAX_BODY_BYTES
        ))
    };
    let mut body = body;
    let mut collected = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Err(too_large());
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen += data.len();
        if seen > codec::MAX_BODY_BYTES {
            if seen > OVERSIZED_BODY_DRAIN_BYTES {
                return Err(too_large());
            }
            collected = bytes::BytesMut::new();
            continue;
        }
        collected.extend_from_slice(&data);
    }
    if seen > codec::MAX_BODY_BYTES {
        return Err(too_large());
    }
    Ok(collected.freeze())
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
        field_manager(&self.query, &self.headers, default)
    }

    async fn dispatch(self, method: Method, body: Body) -> Result<Response, ApiError> {
        let output = codec::negotiate(&self.headers)?;
        let has_name = self.target.name.is_some();
        let subresource = self.target.subresource.clone();
        let watch = self.target.watch_prefix || self.query.flag("watch");
        if crate::resources::is_review(self.resource()) {
            return match (method, has_name, subresource) {
                (Method::POST, false, None) => {
                    let body = read_body(body).await?;
                    self.review(&body)
                }
                (method, _, _) => Err(ApiError::method_not_allowed(format!(
                    "the server does not allow this method on the requested resource ({method})"
                ))),
            };
        }
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
            Output::Json => match conversion::json_for_version(self.resource(), object) {
                Some(json) => codec::respond(status, "application/json", Bytes::from(json)),
                None => codec::respond_value(status, Output::Json, &self.for_version(object)),
            },
            Output::Table { v1beta1 } => {
                let value = conversion::for_table(self.resource(), &object.value);
                let table = self.table(&[value.as_ref()], false, v1beta1);
                codec::respond_value(status, Output::Json, &table)
            }
            Output::Metadata { v1beta1 } => codec::respond(
                status,
                "application/json",
                Bytes::from(object.partial_metadata_json(meta_api_version(v1beta1))),
            ),
            other => codec::respond_value(status, other, &self.for_version(object)),
        }
    }

    fn table_options(&self, no_headers: bool) -> TableOptions {
        let include_object = match self.query.get("includeObject") {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        };
        TableOptions {
            include_object,
            no_headers,
        }
    }

    pub(crate) fn table(&self, objects: &[&Value], no_headers: bool, v1beta1: bool) -> Value {
        let options = self.table_options(no_headers);
        let columns = self.registry.printer_columns(self.resource());
        let mut table = build_table(
            self.resource(),
            columns,
            objects,
            &options,
            self.state.clock.now(),
        );
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
        let duplicates = match raw {
            Some(body) => Duplicates::Body(body),
            None => Duplicates::None,
        };
        self.validate_fields_with(object, duplicates)
    }

    /// [`Self::validate_fields`] with the body's duplicate fields as known.
    fn validate_fields_with(
        &self,
        object: &mut Value,
        duplicates: Duplicates<'_>,
    ) -> Result<Vec<String>, ApiError> {
        let mode = self.query.get("fieldValidation").unwrap_or("Warn");
        if !matches!(mode, "Strict" | "Warn" | "Ignore") {
            return Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {mode}"
            )));
        }
        let check = self.state.openapi().check_fields(self.resource(), object);
        if let Some(error) = check.decode_error {
            return Err(error);
        }
        let unknown = check.unknown;
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
        match duplicates {
            Duplicates::None => {}
            Duplicates::Body(raw) => problems.extend(crate::openapi::duplicate_fields(raw)),
            Duplicates::Found(found) => problems.extend(found),
        }
        if problems.is_empty() {
            Ok(Vec::new())
        } else if mode == "Strict" {
            Err(crate::openapi::strict_error(self.resource(), &problems))
        } else {
            Ok(crate::openapi::warning_headers(&problems))
        }
    }
}

/// The duplicate fields of a sent body, for field validation.
pub(crate) enum Duplicates<'b> {
    /// Not a JSON body: none are looked for.
    None,
    /// To be found in this JSON body.
    Body(&'b [u8]),
    /// Found already (by the parse that decoded the body).
    Found(Vec<String>),
}

/// Defaulting and validation of an update of the main resource (or, for a
/// custom resource, of its status too: kube validates the whole object).
fn admit_update(
    state: &State,
    resource: &ResourceInfo,
    old: &Value,
    new: &mut Value,
) -> Result<(), ApiError> {
    let openapi = state.openapi();
    let schema = resource
        .custom
        .then(|| openapi.crd_schema(resource))
        .flatten();
    crate::admission::default_object(resource, new);
    if let Some(schema) = schema {
        crate::admission::default_custom_resource(schema, new);
    }
    write::admit_priority(state, resource, new, Some(old))?;
    crate::admission::validate_update(resource, old, new)?;
    if let Some(schema) = schema {
        crate::admission::validate_custom_resource(resource, schema, new)?;
    }
    Ok(())
}

/// The `Warning` kube-apiserver 1.33 sends with every request on a
/// deprecated API.
fn deprecation_warning(resource: &ResourceInfo) -> Option<&'static str> {
    (resource.group.is_empty() && resource.plural == "endpoints").then_some(
        "299 - \"v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice\"",
    )
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
    /// Whether neither a label nor a field selector was given.
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.requirements.is_empty()
    }

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

/// The `meta.k8s.io` version a client asked Tables or PartialObjectMetadata in.
pub(crate) fn meta_api_version(v1beta1: bool) -> &'static str {
    if v1beta1 {
        "meta.k8s.io/v1beta1"
    } else {
        "meta.k8s.io/v1"
    }
}

fn parse_revision(value: &str) -> Result<u64, ApiError> {
    value
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {value:?}")))
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

/// The field manager of a write: the `fieldManager` parameter, else the
/// name part of the User-Agent (as kube-apiserver derives it), else `default`.
pub(super) fn field_manager(query: &Query, headers: &http::HeaderMap, default: &str) -> String {
    if let Some(manager) = query.get("fieldManager") {
        return manager.to_string();
    }
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|agent| agent.split('/').next())
        .filter(|name| !name.is_empty())
        .unwrap_or(default)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
