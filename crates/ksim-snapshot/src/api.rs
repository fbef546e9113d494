//! The cluster a snapshot is read from or written to, as a plain API
//! client: discovery of the served resources, paged lists, creates and
//! patches as JSON, each request behind an optional client-side rate limit
//! (client-go's token bucket: `qps` per second, bursts of `burst`).
//!
//! Creating many objects at once goes through a [`BulkCreate`]: over HTTP,
//! ksim's bulk path (`POST /ksim/v1alpha1/objects`); in process, whatever
//! the owner of the API server hands the target
//! ([`Target::with_bulk_creation`]: `ksim serve --snapshot` calls the
//! server's own bulk creation, without encoding the objects). A trait, not
//! a dependency on the API server: this crate stays a plain API client that
//! works against any cluster, and the one shortcut is given by whoever holds
//! the server.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;

use kube::core::Request;
use kube::discovery::{Discovery, Scope, verbs};
use serde_json::Value;
use tokio::sync::Mutex;
use tokio::time::Instant; // wall-clock: a client-side rate limit on a remote cluster

use crate::Error;

/// A client-side rate limit: a token bucket refilled at `qps` tokens a
/// second holding at most `burst`.
#[derive(Debug)]
pub struct RateLimit {
    qps: f64,
    burst: f64,
    bucket: Mutex<(f64, Instant)>,
    /// Tokens handed out.
    permitted: AtomicU64,
}

impl RateLimit {
    /// A bucket starting full. `qps <= 0` means no limit.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        RateLimit {
            qps,
            burst,
            bucket: Mutex::new((burst, Instant::now())), // wall-clock: rate limit
            permitted: AtomicU64::new(0),
        }
    }

    /// How many tokens were handed out (one per request sent).
    pub fn permitted(&self) -> u64 {
        self.permitted.load(Ordering::Relaxed)
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        self.permitted.fetch_add(1, Ordering::Relaxed);
        if self.qps <= 0.0 {
            return;
        }
        let wait = {
            let mut bucket = self.bucket.lock().await;
            let now = Instant::now(); // wall-clock: rate limit
            let refill = now.duration_since(bucket.1).as_secs_f64() * self.qps;
            bucket.0 = (bucket.0 + refill).min(self.burst);
            bucket.1 = now;
            bucket.0 -= 1.0;
            if bucket.0 >= 0.0 {
                None
            } else {
                Some(Duration::from_secs_f64(-bucket.0 / self.qps))
            }
        };
        if let Some(wait) = wait {
            tracing::debug!(
                seconds = wait.as_secs_f64(),
                "waiting for the client-side rate limit"
            );
            tokio::time::sleep(wait).await; // wall-clock: rate limit
        }
    }
}

/// What a create answers that a restore needs.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct Created {
    #[serde(default)]
    pub metadata: CreatedMetadata,
}

/// The created object's new identity.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct CreatedMetadata {
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub generation: Option<i64>,
}

/// ksim's bulk creation path.
const BULK_PATH: &str = "/ksim/v1alpha1/objects";

/// The field manager of objects created in bulk by a restore.
pub const BULK_FIELD_MANAGER: &str = "ksim-snapshot";

/// One object to create in bulk: the object as a POST to its collection
/// carries it, and the status to merge in as a merge patch of its `status`
/// subresource would, in the same write.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BulkObject {
    pub object: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

/// One bulk item's result: the created object's identity, or the Status its
/// POST would have answered.
pub type BulkResult = Result<CreatedMetadata, Box<kube::core::Status>>;

/// What a bulk creation answered.
#[derive(Debug)]
pub enum BulkAnswer {
    /// One result per item, in order.
    Created(Vec<BulkResult>),
    /// The cluster has no bulk path (not a ksim cluster): the items, given
    /// back untouched, for the API's own verbs.
    Unsupported(Vec<BulkObject>),
}

/// Creates many objects at once, each as a POST of it (and a merge patch of
/// its status) would; a failed item does not stop the others.
pub trait BulkCreate: Send + Sync {
    /// Creates `items`; the objects are moved, not copied.
    fn create(&self, items: Vec<BulkObject>) -> BoxFuture<'static, Result<BulkAnswer, Error>>;
    /// Objects handed over per call.
    fn chunk_size(&self) -> usize;
    /// Calls in flight at once.
    fn in_flight(&self) -> usize;
}

/// ksim's bulk path over HTTP: a request per few hundred objects.
struct HttpBulk {
    target: Target,
}

impl BulkCreate for HttpBulk {
    fn create(&self, items: Vec<BulkObject>) -> BoxFuture<'static, Result<BulkAnswer, Error>> {
        let target = self.target.clone();
        Box::pin(async move { target.create_many_over_http(items).await })
    }

    fn chunk_size(&self) -> usize {
        500
    }

    fn in_flight(&self) -> usize {
        4
    }
}

/// The body of a bulk creation, serialized from borrowed items.
#[derive(serde::Serialize)]
struct BulkBody<'a> {
    items: &'a [BulkObject],
}

/// What ksim's bulk creation answers.
#[derive(Debug, serde::Deserialize)]
struct BulkAnswerBody {
    #[serde(default)]
    items: Vec<BulkItemAnswer>,
}

/// One item's result: its identity, or the Status its POST would answer.
#[derive(Debug, serde::Deserialize)]
struct BulkItemAnswer {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    status: Option<kube::core::Status>,
}

/// ksim's path reading collections as snapshot documents.
const SNAPSHOT_PATH: &str = "/ksim/v1alpha1/snapshot";

/// The streamed answer of [`Target::snapshot_documents`].
pub struct SnapshotDocuments {
    body: kube::client::Body,
}

impl SnapshotDocuments {
    /// The next piece of the documents (pieces end anywhere); `None` at the end.
    pub async fn next(&mut self) -> Option<Result<bytes::Bytes, Error>> {
        use http_body_util::BodyExt;
        loop {
            match self.body.frame().await? {
                Ok(frame) => match frame.into_data() {
                    Ok(data) if data.is_empty() => {}
                    Ok(data) => return Some(Ok(data)),
                    // Trailers: nothing to read.
                    Err(_) => {}
                },
                Err(error) => return Some(Err(Error::from_kube(error))),
            }
        }
    }
}

/// A served resource: where it lives and what it allows.
#[derive(Debug, Clone)]
pub struct Resource {
    pub group: String,
    pub version: String,
    pub api_version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    /// Whether it has a `status` subresource.
    pub has_status: bool,
    pub can_list: bool,
    pub can_create: bool,
    pub can_watch: bool,
}

impl Resource {
    /// The collection's path, in `namespace` for a namespaced resource.
    pub fn path(&self, namespace: Option<&str>) -> String {
        let prefix = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        match namespace.filter(|_| self.namespaced) {
            Some(ns) => format!("{prefix}/namespaces/{ns}/{}", self.plural),
            None => format!("{prefix}/{}", self.plural),
        }
    }

    /// `kind.group` (`Pod`, `Deployment.apps`), as messages name kinds.
    pub fn group_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
}

/// The resources a cluster serves, by apiVersion and kind.
#[derive(Debug, Clone, Default)]
pub struct Resources {
    /// Every served resource, each group at its preferred version.
    pub preferred: Vec<Resource>,
    by_kind: HashMap<(String, String), Resource>,
}

impl Resources {
    /// A table of resources (group, version, kind, plural, namespaced), for tests.
    pub fn for_tests(table: &[(&str, &str, &str, &str, bool)]) -> Self {
        let mut resources = Resources::default();
        for (group, version, kind, plural, namespaced) in table {
            let api_version = if group.is_empty() {
                (*version).to_string()
            } else {
                format!("{group}/{version}")
            };
            let resource = Resource {
                group: (*group).into(),
                version: (*version).into(),
                api_version: api_version.clone(),
                kind: (*kind).into(),
                plural: (*plural).into(),
                namespaced: *namespaced,
                has_status: true,
                can_list: true,
                can_create: true,
                can_watch: true,
            };
            resources.preferred.push(resource.clone());
            resources
                .by_kind
                .insert((api_version, (*kind).to_string()), resource);
        }
        resources
    }

    /// The resource serving `apiVersion`/`kind`, at any served version.
    pub fn find(&self, api_version: &str, kind: &str) -> Option<&Resource> {
        self.by_kind
            .get(&(api_version.to_string(), kind.to_string()))
    }
}

/// A cluster reached through a `kube::Client` (and, for bulk creation, a
/// [`BulkCreate`] its owner may hand over).
#[derive(Clone)]
pub struct Target {
    client: kube::Client,
    limit: Option<Arc<RateLimit>>,
    bulk: Option<Arc<dyn BulkCreate>>,
}

impl Target {
    /// A target with no client-side rate limit.
    pub fn new(client: kube::Client) -> Self {
        Target {
            client,
            limit: None,
            bulk: None,
        }
    }

    /// A target whose every request waits on `limit`: the client is
    /// wrapped, so that requests made on the target's behalf by kube
    /// (discovery's, a watch's) wait too.
    pub fn with_rate_limit(client: kube::Client, limit: RateLimit) -> Self {
        let limit = Arc::new(limit);
        let namespace = client.default_namespace().to_string();
        let gate = limit.clone();
        let limited = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let (client, limit) = (client.clone(), gate.clone());
            async move {
                limit.acquire().await;
                client.send(request).await
            }
        });
        Target {
            client: kube::Client::new(limited, namespace),
            limit: Some(limit),
            bulk: None,
        }
    }

    /// This target creating objects in bulk through `bulk` (the API server
    /// in process) instead of ksim's bulk path over HTTP.
    pub fn with_bulk_creation(mut self, bulk: Arc<dyn BulkCreate>) -> Self {
        self.bulk = Some(bulk);
        self
    }

    /// How this target creates objects in bulk.
    pub fn bulk_creation(&self) -> Arc<dyn BulkCreate> {
        match &self.bulk {
            Some(bulk) => bulk.clone(),
            None => Arc::new(HttpBulk {
                target: self.clone(),
            }),
        }
    }

    /// The client-side rate limit every request waits on, if any.
    pub fn rate_limit(&self) -> Option<&RateLimit> {
        self.limit.as_deref()
    }

    /// The underlying client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Discovers the served resources (every version of every group).
    pub async fn resources(&self) -> Result<Resources, Error> {
        let discovery = Discovery::new(self.client.clone())
            .run()
            .await
            .map_err(Error::from_kube)?;
        let mut resources = Resources::default();
        for group in discovery.groups() {
            let preferred = group.preferred_version_or_latest().to_string();
            for version in group.versions() {
                for (ar, caps) in group.versioned_resources(version) {
                    let resource = Resource {
                        group: ar.group.clone(),
                        version: ar.version.clone(),
                        api_version: ar.api_version.clone(),
                        kind: ar.kind.clone(),
                        plural: ar.plural.clone(),
                        namespaced: caps.scope == Scope::Namespaced,
                        has_status: caps.subresources.iter().any(|(s, _)| s.plural == "status"),
                        can_list: caps.supports_operation(verbs::LIST),
                        can_create: caps.supports_operation(verbs::CREATE),
                        can_watch: caps.supports_operation(verbs::WATCH),
                    };
                    if version == preferred {
                        resources.preferred.push(resource.clone());
                    }
                    resources
                        .by_kind
                        .insert((ar.api_version.clone(), ar.kind.clone()), resource);
                }
            }
        }
        Ok(resources)
    }

    /// Sends a request and reads its JSON answer.
    pub async fn send(&self, request: http::Request<Vec<u8>>) -> Result<Value, kube::Error> {
        self.send_as(request).await
    }

    /// Sends a request and reads from its JSON answer only what `T` holds
    /// (the rest is skipped, not built into a tree).
    async fn send_as<T: serde::de::DeserializeOwned>(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> Result<T, kube::Error> {
        self.client.request::<T>(request).await
    }

    /// Lists `resource` (in `namespace`, else everywhere) in pages of
    /// `page_size`, handing each page's items to `each`.
    pub async fn list_pages(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        page_size: u32,
        mut each: impl FnMut(Vec<Value>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let request = Request::new(resource.path(namespace));
        let mut token: Option<String> = None;
        loop {
            let mut params = kube::api::ListParams::default().limit(page_size);
            if let Some(selector) = label_selector {
                params = params.labels(selector);
            }
            if let Some(token) = &token {
                params = params.continue_token(token);
            }
            let http = request
                .list(&params)
                .map_err(|e| Error::Transport(e.to_string()))?;
            let mut page = self.send(http).await.map_err(Error::from_kube)?;
            let items = match page.get_mut("items").map(Value::take) {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            };
            each(items)?;
            token = page["metadata"]["continue"]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                return Ok(());
            }
        }
    }

    /// Reads every object of `resource` through ksim's snapshot path
    /// (`GET /ksim/v1alpha1/snapshot/<collection path>`): the objects as
    /// the documents of a snapshot file, streamed. `None` when the cluster
    /// has no such path (not a ksim cluster: 404, or 403 where RBAC guards
    /// non-resource paths), so the caller lists instead.
    pub async fn snapshot_documents(
        &self,
        resource: &Resource,
    ) -> Result<Option<SnapshotDocuments>, Error> {
        let http = http::Request::get(format!("{SNAPSHOT_PATH}{}", resource.path(None)))
            .header(http::header::ACCEPT, "application/yaml")
            .body(kube::client::Body::empty())
            .map_err(|e| Error::Transport(e.to_string()))?;
        let response = self.client.send(http).await.map_err(Error::from_kube)?;
        let status = response.status();
        if matches!(status.as_u16(), 403..=405) {
            return Ok(None);
        }
        if !status.is_success() {
            let body = response
                .into_body()
                .collect_bytes()
                .await
                .map_err(Error::from_kube)?;
            let message = match serde_json::from_slice::<kube::core::Status>(&body) {
                Ok(status) if !status.message.is_empty() => status.message,
                _ => format!("{status}: {}", String::from_utf8_lossy(&body).trim()),
            };
            return Err(Error::Api(message));
        }
        Ok(Some(SnapshotDocuments {
            body: response.into_body(),
        }))
    }

    /// Creates `object`; the created object as the server stored it.
    pub async fn create(&self, resource: &Resource, object: &Value) -> Result<Value, kube::Error> {
        self.send_as(Self::create_request(resource, object)?).await
    }

    /// Creates `object`; only the new uid and generation read back.
    pub async fn create_brief(
        &self,
        resource: &Resource,
        object: &Value,
    ) -> Result<Created, kube::Error> {
        self.send_as(Self::create_request(resource, object)?).await
    }

    fn create_request(
        resource: &Resource,
        object: &Value,
    ) -> Result<http::Request<Vec<u8>>, kube::Error> {
        let namespace = object["metadata"]["namespace"].as_str();
        let body = serde_json::to_vec(object).map_err(kube::Error::SerdeError)?;
        Request::new(resource.path(namespace))
            .create(&kube::api::PostParams::default(), body)
            .map_err(kube::Error::BuildRequest)
    }

    /// Creates many objects in one request through ksim's bulk path
    /// (`POST /ksim/v1alpha1/objects`), by [`BULK_FIELD_MANAGER`]. The items
    /// come back untouched if the cluster has no such path (not a ksim
    /// cluster).
    async fn create_many_over_http(&self, items: Vec<BulkObject>) -> Result<BulkAnswer, Error> {
        let body = serde_json::to_vec(&BulkBody { items: &items })
            .map_err(|e| Error::Invalid(format!("cannot encode objects: {e}")))?;
        let http = http::Request::post(format!("{BULK_PATH}?fieldManager={BULK_FIELD_MANAGER}"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(|e| Error::Transport(e.to_string()))?;
        let answer: BulkAnswerBody = match self.send_as(http).await {
            Ok(answer) => answer,
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 405 => {
                return Ok(BulkAnswer::Unsupported(items));
            }
            Err(error) => return Err(Error::from_kube(error)),
        };
        Ok(BulkAnswer::Created(
            answer
                .items
                .into_iter()
                .map(|item| match item.status {
                    Some(status) => Err(Box::new(status)),
                    None => Ok(CreatedMetadata {
                        uid: item.uid,
                        generation: item.generation,
                    }),
                })
                .collect(),
        ))
    }

    /// A JSON merge patch of object `name` (or its `subresource`).
    pub async fn merge_patch(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        patch: &impl serde::Serialize,
    ) -> Result<(), kube::Error> {
        let request = Request::new(resource.path(namespace));
        let params = kube::api::PatchParams::default();
        let patch = kube::api::Patch::Merge(patch);
        let http = match subresource {
            Some(sub) => request.patch_subresource(sub, name, &params, &patch),
            None => request.patch(name, &params, &patch),
        }
        .map_err(kube::Error::BuildRequest)?;
        self.send_as::<serde::de::IgnoredAny>(http)
            .await
            .map(|_| ())
    }

    /// Binds pod `name` to `node` (the `binding` subresource).
    pub async fn bind(
        &self,
        namespace: Option<&str>,
        name: &str,
        node: &str,
    ) -> Result<(), kube::Error> {
        let namespace = namespace.unwrap_or("default");
        let binding = serde_json::json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        let body = serde_json::to_vec(&binding).map_err(kube::Error::SerdeError)?;
        let http = http::Request::post(format!(
            "/api/v1/namespaces/{namespace}/pods/{name}/binding"
        ))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)
        .map_err(kube::Error::HttpError)?;
        self.send_as::<serde::de::IgnoredAny>(http)
            .await
            .map(|_| ())
    }

    /// Replaces object `name` (or its `subresource`, e.g. `status`) with
    /// `object` (a PUT; `object` carries the resourceVersion it replaces).
    pub async fn replace(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        object: &Value,
    ) -> Result<(), kube::Error> {
        let body = serde_json::to_vec(object).map_err(kube::Error::SerdeError)?;
        let request = Request::new(resource.path(namespace));
        let params = kube::api::PostParams::default();
        let http = match subresource {
            Some(sub) => request.replace_subresource(sub, name, &params, body),
            None => request.replace(name, &params, body),
        }
        .map_err(kube::Error::BuildRequest)?;
        self.send_as::<serde::de::IgnoredAny>(http)
            .await
            .map(|_| ())
    }

    /// Reads object `name`.
    pub async fn get(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, kube::Error> {
        let http = Request::new(resource.path(namespace))
            .get(name, &kube::api::GetParams::default())
            .map_err(kube::Error::BuildRequest)?;
        self.send(http).await
    }

    /// Deletes object `name` at once (no grace period; its dependents are
    /// left to the garbage collector, which deletes them by uid).
    pub async fn delete(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), kube::Error> {
        let params = kube::api::DeleteParams {
            grace_period_seconds: Some(0),
            propagation_policy: Some(kube::api::PropagationPolicy::Background),
            ..Default::default()
        };
        let http = Request::new(resource.path(namespace))
            .delete(name, &params)
            .map_err(kube::Error::BuildRequest)?;
        match self.send_as::<serde::de::IgnoredAny>(http).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_bucket_lets_a_burst_through_then_paces_at_qps() {
        let limit = RateLimit::new(10.0, 5);
        let start = Instant::now();
        for _ in 0..5 {
            limit.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "a burst does not wait");
        for _ in 0..10 {
            limit.acquire().await;
        }
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(990) && waited <= Duration::from_millis(1010),
            "ten more at 10 qps take a second, took {waited:?}"
        );
    }
}
