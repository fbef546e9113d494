//! The OpenAPI v3 documents (`/openapi/v3`), generated from the k8s-openapi types and CRDs, the Swagger 2.0 document made from them (`/openapi/v2`, JSON and protobuf), and server-side field validation.
//!
//! [`OpenApi`] is made at start and remade when CRDs change; making it only
//! keeps the CRDs' schemas (what field validation needs). The documents are
//! built on the first request for one of them: those of the built-in
//! group-versions are serialized once per process (for a given set of
//! built-in resources) and shared; only CRD documents are rebuilt.

mod decode;
mod paths;
mod schemas;
mod v2;
mod validation;

pub use v2::{PROTOBUF as V2_PROTOBUF, negotiate as negotiate_v2};

pub use validation::{decode_with_duplicates, duplicate_fields, strict_error, warning_headers};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::ApiError;
use crate::resources::ResourceInfo;
use paths::{PathResource, add_paths};
use schemas::{
    CrdVersion, DELETE_OPTIONS, LIST_META, PATCH, STATUS, built_in_schemas, closure, crd_versions,
    list_schema, published_crd_schema,
};

/// How to answer `GET /openapi/v3/<path>?hash=...`, as kube-apiserver does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentCaching {
    /// The hash asked for is current: `Cache-Control: public, immutable`
    /// (and an `Expires` a year ahead).
    Immutable,
    /// No hash asked for: `Cache-Control: no-cache, private`.
    NoCache,
    /// A stale hash: `301 Moved Permanently` to this URL (the current hash).
    Redirect(String),
}

impl DocumentCaching {
    /// The `Cache-Control` value, if the answer is the document.
    pub fn cache_control(&self) -> Option<&'static str> {
        match self {
            DocumentCaching::Immutable => Some("public, immutable"),
            DocumentCaching::NoCache => Some("no-cache, private"),
            DocumentCaching::Redirect(_) => None,
        }
    }
}

/// One serialized document and its hash.
#[derive(Debug, Clone)]
struct Document {
    bytes: Bytes,
    hash: String,
}

impl Document {
    fn new(value: &Value) -> Self {
        let bytes = Bytes::from(serde_json::to_vec(value).unwrap_or_default());
        let hash = hash(&bytes);
        Document { bytes, hash }
    }
}

/// 128 bits of hash as 32 upper-case hex digits (kube uses SHA-512; clients
/// only compare it).
fn hash(bytes: &[u8]) -> String {
    let mut first = DefaultHasher::new();
    first.write(bytes);
    let mut second = DefaultHasher::new();
    second.write_u64(0x6b73_696d_6f61_7033);
    second.write(bytes);
    format!("{:016X}{:016X}", first.finish(), second.finish())
}

/// The parts of one group-version document before serialization.
#[derive(Debug, Clone, Default)]
struct GroupVersion {
    paths: Map<String, Value>,
    /// Component schemas the document starts from (its kinds, lists, meta types).
    roots: BTreeSet<String>,
    /// Schemas that are not built-in definitions (lists, CRD schemas).
    local: BTreeMap<String, Value>,
}

impl GroupVersion {
    /// An empty group-version that starts from the meta types every document has.
    fn with_meta_roots() -> Self {
        let mut gv = GroupVersion::default();
        for name in [STATUS, DELETE_OPTIONS, PATCH, LIST_META] {
            gv.roots.insert(name.to_string());
        }
        gv
    }

    fn to_document(&self) -> Document {
        let schemas = closure(&self.roots, &self.local);
        Document::new(&json!({
            "openapi": "3.0.0",
            "info": { "title": "Kubernetes", "version": crate::KUBERNETES_VERSION },
            "paths": self.paths,
            "components": {
                "schemas": schemas,
                "securitySchemes": {
                    "BearerToken": {
                        "type": "apiKey",
                        "description": "Bearer Token authentication",
                        "name": "authorization",
                        "in": "header",
                    }
                }
            },
            "security": [{ "BearerToken": [] }],
        }))
    }
}

/// `api/v1` or `apis/<group>/<version>`.
fn document_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The built-in part, shared by every [`OpenApi`] built from the same built-in resources.
#[derive(Debug)]
struct BuiltIns {
    resources: Vec<ResourceInfo>,
    group_versions: BTreeMap<String, GroupVersion>,
    documents: BTreeMap<String, Document>,
}

impl BuiltIns {
    fn build(resources: Vec<ResourceInfo>) -> Self {
        let definitions = ksim_core::schema::definitions();
        let mut group_versions: BTreeMap<String, GroupVersion> = BTreeMap::new();
        for r in &resources {
            let Some(definition) = definitions.definition_for_kind(&r.group, &r.version, &r.kind)
            else {
                tracing::debug!(kind = %r.kind, "no OpenAPI schema for built-in kind");
                continue;
            };
            let list_definition = format!("{definition}List");
            let gv = group_versions
                .entry(document_path(&r.group, &r.version))
                .or_insert_with(GroupVersion::with_meta_roots);
            add_paths(
                &mut gv.paths,
                &PathResource {
                    group: &r.group,
                    version: &r.version,
                    kind: &r.kind,
                    plural: &r.plural,
                    namespaced: r.namespaced,
                    subresources: &r.subresources,
                    definition,
                    list_definition: &list_definition,
                    built_in: true,
                },
            );
            gv.roots.insert(definition.to_string());
            gv.roots.insert(list_definition.clone());
            for subresource in &r.subresources {
                let extra = match subresource.as_str() {
                    "scale" => schemas::SCALE,
                    "binding" => schemas::BINDING,
                    "eviction" => schemas::EVICTION,
                    _ => continue,
                };
                gv.roots.insert(extra.to_string());
            }
            gv.local.insert(
                list_definition,
                list_schema(&r.group, &r.version, &r.kind, definition),
            );
        }
        let documents = group_versions
            .iter()
            .map(|(path, gv)| (path.clone(), gv.to_document()))
            .collect();
        BuiltIns {
            resources,
            group_versions,
            documents,
        }
    }

    /// The shared built-in part for these resources, built on first use.
    fn shared(resources: Vec<ResourceInfo>) -> Arc<BuiltIns> {
        static CACHE: Mutex<Option<Arc<BuiltIns>>> = Mutex::new(None);
        let mut cache = CACHE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(built) = cache.as_ref().filter(|b| b.resources == resources) {
            return Arc::clone(built);
        }
        let built = Arc::new(BuiltIns::build(resources));
        *cache = Some(Arc::clone(&built));
        built
    }
}

#[derive(Debug)]
struct Inner {
    /// The built-in resources the documents describe.
    built_in: Arc<Vec<ResourceInfo>>,
    /// The CustomResourceDefinitions (as JSON) the documents describe.
    crds: Vec<Value>,
    /// Built on the first request for a document or the index.
    documents: OnceLock<Documents>,
    /// `/openapi/v2`, built on its first request.
    v2: OnceLock<V2Document>,
    /// `openAPIV3Schema` of each served CRD version, by (group, version, kind).
    crd_schemas: HashMap<(String, String, String), Value>,
}

/// The serialized documents of one [`OpenApi`] and their index.
#[derive(Debug)]
struct Documents {
    documents: BTreeMap<String, Document>,
    index: Bytes,
}

/// The `/openapi/v2` document, as JSON and as protobuf, with their ETags.
#[derive(Debug)]
struct V2Document {
    json: (Bytes, String),
    protobuf: (Bytes, String),
}

/// The `/openapi/v3` documents and field validation of a set of resources.
/// Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct OpenApi {
    inner: Arc<Inner>,
}

impl OpenApi {
    /// The documents of the built-in `resources` (custom ones among them
    /// are ignored: CRDs describe themselves) and of `crds`
    /// (CustomResourceDefinitions as JSON), built when first asked for. The
    /// built-in documents are serialized once per process and reused.
    pub fn new(resources: &[Arc<ResourceInfo>], crds: &[Value]) -> Self {
        let built_in: Vec<ResourceInfo> = resources
            .iter()
            .filter(|r| !r.custom)
            .map(|r| ResourceInfo::clone(r))
            .collect();
        Self::with_built_ins(Arc::new(built_in), crds)
    }

    /// The same built-in documents with another set of CRDs.
    pub fn with_crds(&self, crds: &[Value]) -> Self {
        Self::with_built_ins(Arc::clone(&self.inner.built_in), crds)
    }

    fn with_built_ins(built_in: Arc<Vec<ResourceInfo>>, crds: &[Value]) -> Self {
        let mut crd_schemas = HashMap::new();
        for version in crds.iter().flat_map(crd_versions) {
            if let Some(schema) = version.schema {
                crd_schemas.insert((version.group, version.version, version.kind), schema);
            }
        }
        OpenApi {
            inner: Arc::new(Inner {
                built_in,
                crds: crds.to_vec(),
                documents: OnceLock::new(),
                v2: OnceLock::new(),
                crd_schemas,
            }),
        }
    }

    /// The documents, built on first use.
    fn documents(&self) -> &Documents {
        self.inner
            .documents
            .get_or_init(|| build_documents(&self.inner.built_in, &self.inner.crds))
    }

    /// `GET /openapi/v3`: `{"paths":{"api/v1":{"serverRelativeURL":"/openapi/v3/api/v1?hash=..."},...}}`.
    pub fn index(&self) -> Bytes {
        self.documents().index.clone()
    }

    /// `GET /openapi/v3/<path>` (`api/v1`, `apis/apps/v1`): the JSON document and its hash.
    pub fn document(&self, path: &str) -> Option<(Bytes, String)> {
        let path = path.trim_matches('/');
        self.documents()
            .documents
            .get(path)
            .map(|d| (d.bytes.clone(), d.hash.clone()))
    }

    /// `GET /openapi/v2`: the Swagger 2.0 document of every group-version
    /// (the same paths and schemas as the v3 documents), as JSON or, when
    /// `protobuf`, as gnostic's `openapi.v2.Document`; and its ETag.
    pub fn v2(&self, protobuf: bool) -> (Bytes, String) {
        let v2 = self.inner.v2.get_or_init(|| {
            let v3: Vec<Value> = self
                .documents()
                .documents
                .values()
                .filter_map(|d| serde_json::from_slice(&d.bytes).ok())
                .collect();
            let document = v2::document(&v3);
            let tagged = |bytes: Vec<u8>| {
                let etag = format!("\"{}\"", hash(&bytes));
                (Bytes::from(bytes), etag)
            };
            V2Document {
                json: tagged(serde_json::to_vec(&document).unwrap_or_default()),
                protobuf: tagged(v2::protobuf(&document)),
            }
        });
        if protobuf {
            v2.protobuf.clone()
        } else {
            v2.json.clone()
        }
    }

    /// How to answer a request for the document at `path` that asked for
    /// `requested_hash` (the `hash` query parameter), given its current hash.
    pub fn caching(
        path: &str,
        requested_hash: Option<&str>,
        current_hash: &str,
    ) -> DocumentCaching {
        match requested_hash {
            None | Some("") => DocumentCaching::NoCache,
            Some(hash) if hash == current_hash => DocumentCaching::Immutable,
            Some(_) => DocumentCaching::Redirect(format!(
                "/openapi/v3/{}?hash={current_hash}",
                path.trim_matches('/')
            )),
        }
    }

    /// Server-side field validation: the unknown fields of `object` against
    /// the kind's schema (`unknown field "spec.foo"`,
    /// `unknown field "spec.template.spec.containers[0].imagePullPolcy"`), in
    /// document order. Built-ins are checked against their definitions;
    /// custom resources against their `openAPIV3Schema`, honouring
    /// `x-kubernetes-preserve-unknown-fields`. Kinds without a schema give none.
    /// Duplicate fields need the raw body: see [`duplicate_fields`].
    pub fn unknown_fields(&self, resource: &ResourceInfo, object: &Value) -> Vec<String> {
        self.check_fields(resource, object).unknown
    }

    /// The decoding error kube-apiserver answers for a body that does not
    /// fit the kind's Go types: 400 BadRequest
    /// `ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string`,
    /// or `... cannot be handled as a Pod: quantities must match the regular expression ...`.
    /// Custom resources decode as unstructured JSON: none (their schema is
    /// checked by [`crate::admission::validate_custom_resource`]).
    pub fn decode_errors(&self, resource: &ResourceInfo, object: &Value) -> Option<ApiError> {
        self.check_fields(resource, object).decode_error
    }

    /// [`OpenApi::unknown_fields`] and [`OpenApi::decode_errors`] in one walk
    /// over the object (use this on create and update).
    pub fn check_fields(&self, resource: &ResourceInfo, object: &Value) -> FieldCheck {
        let mut check = FieldCheck::default();
        if resource.custom {
            if let Some(schema) = self.crd_schema(resource) {
                validation::structural_unknown_fields(
                    schema,
                    object,
                    "",
                    true,
                    0,
                    &mut check.unknown,
                );
            }
        } else if let Some(schema) = ksim_core::schema::definitions()
            .definition_for_kind(&resource.group, &resource.version, &resource.kind)
            .and_then(|definition| built_in_schemas().get(definition))
        {
            let findings = decode::check_built_in(schema, &resource.kind, object);
            check.unknown = findings.unknown;
            check.decode_error = findings.decode_error.map(|error| {
                ApiError::bad_request(format!(
                    "{kind} in version {version:?} cannot be handled as a {kind}: {error}",
                    kind = resource.kind,
                    version = resource.version,
                ))
            });
        }
        check
    }

    /// The `openAPIV3Schema` of a custom resource's CRD version, if it has one.
    pub fn crd_schema(&self, resource: &ResourceInfo) -> Option<&Value> {
        let key = (
            resource.group.clone(),
            resource.version.clone(),
            resource.kind.clone(),
        );
        self.inner.crd_schemas.get(&key)
    }
}

/// What one walk over a written object found: see [`OpenApi::check_fields`].
#[derive(Debug, Clone, Default)]
pub struct FieldCheck {
    /// `unknown field "spec.foo"`, as [`OpenApi::unknown_fields`] reports them.
    pub unknown: Vec<String>,
    /// The 400 decoding error, as [`OpenApi::decode_errors`] reports it.
    pub decode_error: Option<ApiError>,
}

/// The documents of the built-in resources and of the CRDs, and their index.
fn build_documents(built_in: &[ResourceInfo], crds: &[Value]) -> Documents {
    let built_ins = BuiltIns::shared(built_in.to_vec());
    let mut documents = built_ins.documents.clone();
    let mut custom: BTreeMap<String, GroupVersion> = BTreeMap::new();
    for version in crds.iter().flat_map(crd_versions) {
        let path = version.document_path();
        let gv = custom.entry(path.clone()).or_insert_with(|| {
            built_ins
                .group_versions
                .get(&path)
                .cloned()
                .unwrap_or_else(GroupVersion::with_meta_roots)
        });
        add_crd_version(gv, &version);
    }
    for (path, gv) in &custom {
        documents.insert(path.clone(), gv.to_document());
    }
    let index: Map<String, Value> = documents
        .iter()
        .map(|(path, document)| {
            (
                path.clone(),
                json!({ "serverRelativeURL": format!("/openapi/v3/{path}?hash={}", document.hash) }),
            )
        })
        .collect();
    let index = Bytes::from(serde_json::to_vec(&json!({ "paths": index })).unwrap_or_default());
    Documents { documents, index }
}

/// Adds a CRD version's schemas and paths to its group-version.
fn add_crd_version(gv: &mut GroupVersion, version: &CrdVersion) {
    let definition = version.definition();
    let list_definition = format!("{definition}List");
    add_paths(
        &mut gv.paths,
        &PathResource {
            group: &version.group,
            version: &version.version,
            kind: &version.kind,
            plural: &version.plural,
            namespaced: version.namespaced,
            subresources: &version.subresources,
            definition: &definition,
            list_definition: &list_definition,
            built_in: false,
        },
    );
    if version.subresources.iter().any(|s| s == "scale") {
        gv.roots.insert(schemas::SCALE.to_string());
    }
    gv.local
        .insert(definition.clone(), published_crd_schema(version));
    gv.local.insert(
        list_definition.clone(),
        list_schema(&version.group, &version.version, &version.kind, &definition),
    );
    gv.roots.insert(definition);
    gv.roots.insert(list_definition);
}

#[cfg(test)]
mod tests;
