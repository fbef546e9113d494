//! Recordings of a cluster's changes and their replay.
//!
//! # Format (version 1)
//!
//! A recording is UTF-8 JSON Lines, one JSON object a line, each line
//! written whole and flushed, so a reader can follow the file while it
//! grows and a recorder that is killed leaves every line but possibly the
//! last one complete (a replay stops at the last complete line):
//!
//! - line 1, the header: `{"ksimRecording": "v1", "startTime": RFC 3339}`;
//! - every other line, one change: `{"t": NANOSECONDS, "type": "ADDED" |
//!   "MODIFIED" | "DELETED", "object": OBJECT}` where `t` counts from
//!   `startTime` and `object` is the whole object as the watch sent it
//!   (managedFields dropped). The objects that existed when recording
//!   started come first, as `ADDED` at `t` 0. A kind defined later (a
//!   CustomResourceDefinition created meanwhile) is recorded from when its
//!   definition is established, found by watching the definitions: its
//!   objects' changes from the revision at which the definition appeared,
//!   so that none is missed, however soon it came and went. A kind whose
//!   definition is deleted is no longer watched, and its objects the
//!   recording still holds are recorded as `DELETED` then (they went with
//!   it; their own watch need not tell). A watch that expires (410 Gone:
//!   its revision left the server's history) is followed by a list, and
//!   what changed meanwhile is recorded at the list's time, as kube's
//!   watcher tells it: `ADDED`, `MODIFIED` (unchanged objects are not
//!   recorded again) and `DELETED`. A deletion the recorder did not see
//!   carries the object's identity only: `apiVersion`, `kind`, and
//!   `metadata` `name`, `namespace`, `uid` and `resourceVersion`.
//!
//! A replay applies the changes in order: creates (owner uids remapped as a
//! snapshot restore does), merge patches of what changed (the main resource
//! and its `status` apart) and deletions, at the recorded pace, faster by a
//! factor, or as fast as possible. Changes to different objects run
//! concurrently; those to one object stay in order, and an object waits for
//! the creation of its namespace and owners when the recording holds them,
//! and a custom resource for its replayed definition to be served (the
//! changes of a kind the recording defines stay in order with those of its
//! definition, which may be deleted and created again): in discovery, then
//! at its path (a server may answer 404 there a moment after discovery
//! shows a definition created again), up to 30 s, after which the change is
//! skipped with a warning. The deletion of a custom resource whose kind is
//! no longer served is done (it went with its definition). An object
//! created again while its predecessor is still being deleted (a
//! definition or namespace whose finalizers are at work) waits for it to
//! go, up to 30 s.
//!
//! Times are the cluster's: a ksim cluster on a virtual clock (it answers
//! `GET /ksim/v1alpha1/clock` with `"mode": "virtual"`) is recorded with
//! `t` read from that clock, and a replay into one keeps its pace on that
//! clock (once every earlier change is applied, the clock is advanced to
//! the next change's time through `POST /ksim/v1alpha1/clock/advance`,
//! the cluster settling on the way) instead of waiting on the wall clock;
//! any other cluster runs on the wall clock.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use futures::StreamExt;
use serde_json::{Map, Value, json};
use tokio::sync::{Notify, mpsc};

use crate::Error;
use crate::api::{Resource, Resources, Target};

/// The version a recording's header names.
pub const VERSION: &str = "v1";

/// One recorded change.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Nanoseconds from the start of the recording.
    pub t: i64,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: String,
    pub object: Value,
}

/// The header line.
pub fn header(start: DateTime<Utc>) -> String {
    json!({"ksimRecording": VERSION, "startTime": start.to_rfc3339_opts(SecondsFormat::Nanos, true)})
        .to_string()
}

/// One change's line (no newline).
pub fn line(change: &Change) -> String {
    json!({"t": change.t, "type": change.kind, "object": change.object}).to_string()
}

/// Reads a recording: its changes up to the last complete line. A broken
/// line before the last one is an error with its line number.
pub fn parse(text: &str) -> Result<Vec<Change>, Error> {
    let mut lines = text.split_inclusive('\n').enumerate().peekable();
    let Some((_, first)) = lines.next() else {
        return Err(Error::RecordLine {
            line: 1,
            message: "empty file: no ksimRecording header".into(),
        });
    };
    let header: Value = serde_json::from_str(first.trim()).map_err(|e| Error::RecordLine {
        line: 1,
        message: format!("not a recording header: {e}"),
    })?;
    match header["ksimRecording"].as_str() {
        Some(VERSION) => {}
        Some(other) => {
            return Err(Error::RecordLine {
                line: 1,
                message: format!("recording version {other:?} is not supported (want {VERSION:?})"),
            });
        }
        None => {
            return Err(Error::RecordLine {
                line: 1,
                message: "not a recording header: no ksimRecording".into(),
            });
        }
    }
    let mut changes = Vec::new();
    while let Some((index, text)) = lines.next() {
        let last = lines.peek().is_none();
        if last && !text.ends_with('\n') {
            // Cut off by a killed recorder.
            tracing::warn!(
                line = index + 1,
                "the last line is incomplete: replaying up to the one before"
            );
            break;
        }
        if text.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(text.trim()).map_err(|e| Error::RecordLine {
            line: index + 1,
            message: e.to_string(),
        })?;
        let bad = |message: &str| Error::RecordLine {
            line: index + 1,
            message: message.to_string(),
        };
        let t = value["t"].as_i64().ok_or_else(|| bad("no t"))?;
        let kind = value["type"].as_str().ok_or_else(|| bad("no type"))?;
        if !matches!(kind, "ADDED" | "MODIFIED" | "DELETED") {
            return Err(bad(&format!("unknown type {kind:?}")));
        }
        let object = value
            .get("object")
            .cloned()
            .ok_or_else(|| bad("no object"))?;
        if object["apiVersion"].as_str().is_none() || object["kind"].as_str().is_none() {
            return Err(bad("the object has no apiVersion or kind"));
        }
        changes.push(Change {
            t,
            kind: kind.to_string(),
            object,
        });
    }
    Ok(changes)
}

/// Whether a resource is recorded: watchable and listable, and in `kinds`
/// (plural, `plural.group`, or kind, any case) when given; events only when named.
fn recorded(resource: &Resource, kinds: &[String]) -> bool {
    if !resource.can_watch || !resource.can_list {
        return false;
    }
    let names = [
        resource.plural.clone(),
        format!("{}.{}", resource.plural, resource.group),
        resource.kind.to_lowercase(),
        format!("{}.{}", resource.kind.to_lowercase(), resource.group),
    ];
    let named = kinds.iter().any(|k| {
        names
            .iter()
            .any(|n| n.eq_ignore_ascii_case(k.trim_end_matches('.')))
    });
    if kinds.is_empty() {
        !matches!(
            (resource.group.as_str(), resource.kind.as_str()),
            ("", "Event") | ("events.k8s.io", "Event")
        )
    } else {
        named
    }
}

/// Records `target`'s changes to `out` until `stop` resolves; returns the
/// number of changes written.
pub async fn record(
    target: &Target,
    kinds: &[String],
    start: DateTime<Utc>,
    clock: ksim_runtime::clock::Clock,
    mut out: impl Write + Send + 'static,
    stop: impl std::future::Future<Output = ()>,
) -> Result<usize, Error> {
    let resources = target.resources().await?;
    let watched: Vec<Resource> = resources
        .preferred
        .iter()
        .filter(|r| recorded(r, kinds))
        .cloned()
        .collect();
    if watched.is_empty() {
        return Err(Error::Invalid(format!(
            "no served resource matches --kinds {}",
            kinds.join(",")
        )));
    }
    // A virtual cluster's changes are timed on its own clock.
    let (start, time) = match virtual_now(target).await {
        Some(now) => (now, TimeSource::Cluster(target.clone())),
        None => (start, TimeSource::Local(clock)),
    };
    writeln!(out, "{}", header(start)).map_err(|e| io("recording", e))?;
    out.flush().map_err(|e| io("recording", e))?;
    let (sender, mut receiver) = mpsc::unbounded_channel::<String>();
    // The initial state: every object as ADDED at t 0, and where each watch starts.
    let mut versions = Vec::new();
    for resource in &watched {
        let (items, version) = list_all(target, resource).await?;
        let mut known = Known::new(resource);
        known.note_all(&items);
        for object in items {
            let _ = sender.send(line(&Change {
                t: 0,
                kind: "ADDED".into(),
                object,
            }));
        }
        versions.push((version, Arc::new(Mutex::new(known))));
    }
    let writer = tokio::task::spawn_blocking(move || -> Result<usize, Error> {
        let mut written = 0;
        while let Some(first) = receiver.blocking_recv() {
            let mut batch = vec![first];
            while let Ok(more) = receiver.try_recv() {
                batch.push(more);
            }
            for text in &batch {
                out.write_all(text.as_bytes())
                    .and_then(|()| out.write_all(b"\n"))
                    .map_err(|e| io("recording", e))?;
            }
            out.flush().map_err(|e| io("recording", e))?;
            written += batch.len();
        }
        Ok(written)
    });
    let definitions = resources
        .find("apiextensions.k8s.io/v1", "CustomResourceDefinition")
        .filter(|r| r.can_list && r.can_watch)
        .cloned();
    let mut watchers = tokio::task::JoinSet::new();
    let mut recording = HashMap::new();
    for (resource, (version, known)) in watched.into_iter().zip(versions) {
        let sink = Sink::Record {
            start,
            time: time.clone(),
            sender: sender.clone(),
        };
        let target = target.clone();
        let key = resource_key(&resource);
        let watched = known.clone();
        let handle =
            watchers.spawn(async move { watch(&target, &resource, version, &watched, sink).await });
        recording.insert(key, Recorded { handle, known });
    }
    {
        let follow = async {
            match definitions {
                Some(definitions) => {
                    let follower = Follower {
                        target,
                        kinds,
                        start,
                        time: &time,
                        sender: &sender,
                    };
                    follower
                        .run(&definitions, &mut recording, &mut watchers)
                        .await;
                }
                None => tracing::debug!("no CustomResourceDefinitions to follow"),
            }
            // Recording goes on until stopped.
            std::future::pending::<()>().await
        };
        tokio::select! {
            () = stop => {}
            () = follow => {}
        }
    }
    drop(sender);
    watchers.abort_all();
    while watchers.join_next().await.is_some() {}
    writer
        .await
        .map_err(|e| Error::Invalid(format!("the recording writer failed: {e}")))?
}

/// A resource's identity among those recorded, at any version:
/// `plural.group`, the name of the CustomResourceDefinition of a custom one.
fn resource_key(resource: &Resource) -> String {
    format!("{}.{}", resource.plural, resource.group)
}

/// A kind being recorded: its watch, and the objects it knows.
struct Recorded {
    handle: tokio::task::AbortHandle,
    known: Arc<Mutex<Known>>,
}

/// The objects of one kind a recorder knows to exist (each one's uid and
/// resourceVersion, by namespace and name), as its recording says: what a
/// list after an expired watch is compared with, and what is left to
/// record as deleted when the kind's definition goes. Once closed, the
/// kind's watch records nothing more.
struct Known {
    api_version: String,
    kind: String,
    objects: HashMap<(String, String), (String, String)>,
    closed: bool,
}

impl Known {
    fn new(resource: &Resource) -> Self {
        Known {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
            objects: HashMap::new(),
            closed: false,
        }
    }

    /// An object's namespace and name, and its uid and resourceVersion.
    fn identity(object: &Value) -> ((String, String), (String, String)) {
        let metadata = &object["metadata"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        (
            (text(&metadata["namespace"]), text(&metadata["name"])),
            (text(&metadata["uid"]), text(&metadata["resourceVersion"])),
        )
    }

    /// Takes in what a change to `object` says.
    fn note(&mut self, change: &str, object: &Value) {
        let (id, version) = Self::identity(object);
        if change == "DELETED" {
            self.objects.remove(&id);
        } else {
            self.objects.insert(id, version);
        }
    }

    fn note_all(&mut self, objects: &[Value]) {
        for object in objects {
            self.note("ADDED", object);
        }
    }

    /// What a recording knows of an object it saw last as `version`: its
    /// kind and identity (a deletion the recorder did not see carries this).
    fn stub(&self, id: &(String, String), version: &(String, String)) -> Value {
        let mut metadata = Map::new();
        metadata.insert("name".into(), json!(id.1));
        if !id.0.is_empty() {
            metadata.insert("namespace".into(), json!(id.0));
        }
        if !version.0.is_empty() {
            metadata.insert("uid".into(), json!(version.0));
        }
        if !version.1.is_empty() {
            metadata.insert("resourceVersion".into(), json!(version.1));
        }
        json!({"apiVersion": self.api_version, "kind": self.kind, "metadata": metadata})
    }

    /// Takes in a list of every object of the kind, made after a watch
    /// expired: the changes it shows (what is gone as `DELETED`, first;
    /// what is new as `ADDED`; what changed as `MODIFIED`; an object
    /// deleted and created again as both), as kube's watcher tells them
    /// after listing again.
    fn relist(&mut self, objects: Vec<Value>) -> Vec<(&'static str, Value)> {
        let mut deleted = Vec::new();
        let mut changed = Vec::new();
        let mut listed = HashMap::with_capacity(objects.len());
        for object in objects {
            let (id, version) = Self::identity(&object);
            match self.objects.remove(&id) {
                None => changed.push(("ADDED", object)),
                Some(old) if old.0 != version.0 => {
                    deleted.push((id.clone(), old));
                    changed.push(("ADDED", object));
                }
                Some(old) if old.1 != version.1 => changed.push(("MODIFIED", object)),
                Some(_) => {}
            }
            listed.insert(id, version);
        }
        deleted.extend(std::mem::replace(&mut self.objects, listed));
        deleted.sort();
        let mut out: Vec<(&'static str, Value)> = deleted
            .iter()
            .map(|(id, version)| ("DELETED", self.stub(id, version)))
            .collect();
        out.extend(changed);
        out
    }

    /// Closes the kind: every object still known, as the deletions to record.
    fn close(&mut self) -> Vec<Value> {
        self.closed = true;
        let mut gone: Vec<_> = std::mem::take(&mut self.objects).into_iter().collect();
        gone.sort();
        gone.iter()
            .map(|(id, version)| self.stub(id, version))
            .collect()
    }
}

fn lock(known: &Mutex<Known>) -> std::sync::MutexGuard<'_, Known> {
    known.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Follows the cluster's CustomResourceDefinitions while recording.
struct Follower<'a> {
    target: &'a Target,
    kinds: &'a [String],
    start: DateTime<Utc>,
    time: &'a TimeSource,
    sender: &'a mpsc::UnboundedSender<String>,
}

/// Where a kind's recording starts.
enum From {
    /// A list of its objects (as `ADDED`), then a watch from the list.
    List,
    /// A watch from this revision: its definition appeared then, so every
    /// object of the kind is newer.
    Revision(String),
}

impl Follower<'_> {
    /// Watches the definitions (`definitions`, the CRD resource) and records
    /// a kind once its definition is established and `kinds` selects it
    /// (those already in `recording`, by [`resource_key`], aside), stopping
    /// it when its definition is deleted. Runs until the definitions cannot
    /// be watched any more.
    async fn run(
        &self,
        definitions: &Resource,
        recording: &mut HashMap<String, Recorded>,
        watchers: &mut tokio::task::JoinSet<()>,
    ) {
        let (listed, version) = loop {
            match list_all(self.target, definitions).await {
                Ok(listed) => break listed,
                Err(error) => {
                    tracing::warn!(%error, "cannot list CustomResourceDefinitions; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await; // wall-clock: retrying a remote list
                }
            }
        };
        let (events, mut changes) = mpsc::unbounded_channel();
        let mut known = Known::new(definitions);
        known.note_all(&listed);
        let known = Mutex::new(known);
        for definition in listed {
            // Defined before this list: their objects may exist already.
            let _ = events.send(("LISTED", definition));
        }
        {
            let (target, definitions) = (self.target.clone(), definitions.clone());
            let sink = Sink::Definitions(events);
            watchers
                .spawn(async move { watch(&target, &definitions, version, &known, sink).await });
        }
        // Where each definition's kind starts, from when it was first seen.
        let mut seen: HashMap<String, From> = HashMap::new();
        while let Some((change, definition)) = changes.recv().await {
            let Some(name) = definition["metadata"]["name"].as_str() else {
                continue;
            };
            if change == "DELETED" {
                seen.remove(name);
                if let Some(recorded) = recording.remove(name) {
                    recorded.handle.abort();
                    // Its objects go with it; their watch may never tell.
                    let t = self.time.offset(self.start).await;
                    let gone = lock(&recorded.known).close();
                    let deleted = gone.len();
                    for object in gone {
                        let change = Change {
                            t,
                            kind: "DELETED".into(),
                            object,
                        };
                        let _ = self.sender.send(line(&change));
                    }
                    tracing::info!(kind = %name, deleted, "its definition was deleted: no longer recorded");
                }
                continue;
            }
            let from = seen.entry(name.to_string()).or_insert_with(|| {
                match definition["metadata"]["resourceVersion"].as_str() {
                    Some(version) if change == "ADDED" => From::Revision(version.to_string()),
                    _ => From::List,
                }
            });
            if !established(&definition) || recording.contains_key(name) {
                continue;
            }
            let Some(resource) = defined_resource(&definition) else {
                continue;
            };
            if !recorded(&resource, self.kinds) {
                continue;
            }
            let from = std::mem::replace(from, From::List);
            tracing::info!(kind = %name, "its definition is established: recorded from now on");
            let sink = Sink::Record {
                start: self.start,
                time: self.time.clone(),
                sender: self.sender.clone(),
            };
            let target = self.target.clone();
            let known = Arc::new(Mutex::new(Known::new(&resource)));
            let watched = known.clone();
            let handle = watchers.spawn(async move {
                record_kind(&target, &resource, from, &watched, sink).await;
            });
            recording.insert(name.to_string(), Recorded { handle, known });
        }
    }
}

/// Whether a CustomResourceDefinition is established (its kind served).
fn established(definition: &Value) -> bool {
    definition["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True")
}

/// The resource a CustomResourceDefinition defines, at its storage version
/// if served, else its first served one.
fn defined_resource(definition: &Value) -> Option<Resource> {
    let spec = &definition["spec"];
    let group = spec["group"].as_str()?;
    let versions = spec["versions"].as_array()?;
    let served = |v: &&Value| v["served"] == true;
    let version = versions
        .iter()
        .filter(served)
        .find(|v| v["storage"] == true)
        .or_else(|| versions.iter().find(served))?;
    let name = version["name"].as_str()?;
    Some(Resource {
        group: group.to_string(),
        version: name.to_string(),
        api_version: format!("{group}/{name}"),
        kind: spec["names"]["kind"].as_str()?.to_string(),
        plural: spec["names"]["plural"].as_str()?.to_string(),
        namespaced: spec["scope"] == "Namespaced",
        has_status: version["subresources"].get("status").is_some(),
        can_list: true,
        can_create: true,
        can_watch: true,
    })
}

/// Records a kind defined while recording, from `from`.
async fn record_kind(
    target: &Target,
    resource: &Resource,
    from: From,
    known: &Mutex<Known>,
    sink: Sink,
) {
    let version = match from {
        From::Revision(version) => version,
        From::List => loop {
            // Established a moment before it is served, on some servers.
            match list_all(target, resource).await {
                Ok((items, version)) => {
                    if !sink.relist(known, items).await {
                        return;
                    }
                    break version;
                }
                Err(error) => {
                    tracing::debug!(kind = %resource.group_kind(), %error, "cannot list yet; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await; // wall-clock: polls a remote server
                }
            }
        },
    };
    watch(target, resource, version, known, sink).await;
}

/// Where a watch's changes go.
enum Sink {
    /// Into the recording, as timed lines.
    Record {
        start: DateTime<Utc>,
        time: TimeSource,
        sender: mpsc::UnboundedSender<String>,
    },
    /// To the [`Follower`], as they are (`LISTED` for those listed again).
    Definitions(mpsc::UnboundedSender<(&'static str, Value)>),
}

impl Sink {
    /// The time of a change handed on now (nanoseconds from the start of
    /// the recording; 0 for the definitions, which are not timed).
    async fn stamp(&self) -> i64 {
        match self {
            Sink::Record { start, time, .. } => time.offset(*start).await,
            Sink::Definitions(_) => 0,
        }
    }

    /// Hands on one change made at `t`; `relisted`: found by a list after
    /// the watch (a definition new there goes to the [`Follower`] as
    /// `LISTED`: its objects may be older than it). False once nobody
    /// takes them.
    fn deliver(&self, t: i64, change: &'static str, object: Value, relisted: bool) -> bool {
        match self {
            Sink::Record { sender, .. } => {
                let change = Change {
                    t,
                    kind: change.into(),
                    object,
                };
                sender.send(line(&change)).is_ok()
            }
            Sink::Definitions(sender) => {
                let change = if relisted && change == "ADDED" {
                    "LISTED"
                } else {
                    change
                };
                sender.send((change, object)).is_ok()
            }
        }
    }

    /// Hands on one change the watch told, noting it in `known`; false
    /// once nobody takes them or the kind is closed.
    async fn send(&self, known: &Mutex<Known>, change: &'static str, object: Value) -> bool {
        let t = self.stamp().await;
        // No await from here: a closed kind records nothing after its end.
        let mut known = lock(known);
        if known.closed {
            return false;
        }
        known.note(change, &object);
        self.deliver(t, change, object, false)
    }

    /// Hands on what a list of every object shows changed since `known`.
    async fn relist(&self, known: &Mutex<Known>, objects: Vec<Value>) -> bool {
        let t = self.stamp().await;
        let mut known = lock(known);
        if known.closed {
            return false;
        }
        known
            .relist(objects)
            .into_iter()
            .all(|(change, object)| self.deliver(t, change, object, true))
    }
}

fn io(path: &str, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_string(),
        source,
    }
}

/// Every object of a resource and the list's resourceVersion.
async fn list_all(target: &Target, resource: &Resource) -> Result<(Vec<Value>, String), Error> {
    let mut items = Vec::new();
    let request = kube::core::Request::new(resource.path(None));
    let mut token: Option<String> = None;
    loop {
        let mut params = kube::api::ListParams::default().limit(500);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let http = request
            .list(&params)
            .map_err(|e| Error::Transport(e.to_string()))?;
        let page = target.send(http).await.map_err(Error::from_kube)?;
        for mut item in page["items"].as_array().cloned().unwrap_or_default() {
            complete(&mut item, resource);
            items.push(item);
        }
        token = page["metadata"]["continue"]
            .as_str()
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        if token.is_none() {
            let version = page["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            return Ok((items, version));
        }
    }
}

/// Sets apiVersion/kind (lists leave them out) and drops managedFields.
fn complete(object: &mut Value, resource: &Resource) {
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), json!(resource.api_version));
        map.insert("kind".into(), json!(resource.kind));
    }
    if let Some(metadata) = object["metadata"].as_object_mut() {
        metadata.remove("managedFields");
    }
}

/// The path of a ksim cluster's clock.
const CLOCK_PATH: &str = "/ksim/v1alpha1/clock";
/// The path that advances a ksim cluster's virtual clock.
const ADVANCE_PATH: &str = "/ksim/v1alpha1/clock/advance";

/// The time of a ksim cluster on a virtual clock; `None` for any other
/// cluster (a real clock, or no ksim clock path).
async fn virtual_now(target: &Target) -> Option<DateTime<Utc>> {
    let request = http::Request::get(CLOCK_PATH).body(Vec::new()).ok()?;
    let clock = target.send(request).await.ok()?;
    if clock["mode"] != "virtual" {
        return None;
    }
    clock_time(&clock)
}

fn clock_time(clock: &Value) -> Option<DateTime<Utc>> {
    clock["now"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// Moves a ksim cluster's virtual clock to `to` (it settles on the way).
async fn advance_to(target: &Target, to: DateTime<Utc>) -> Result<(), Error> {
    let body = json!({"to": to.to_rfc3339_opts(SecondsFormat::Nanos, true)}).to_string();
    let request = http::Request::post(ADVANCE_PATH)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body.into_bytes())
        .map_err(|e| Error::Invalid(e.to_string()))?;
    target
        .send(request)
        .await
        .map(drop)
        .map_err(|e| match Error::from_kube(e) {
            Error::Api(message) => {
                Error::Api(format!("cannot advance the cluster's clock: {message}"))
            }
            other => other,
        })
}

/// Where a recording's times come from.
#[derive(Clone)]
enum TimeSource {
    /// This process's clock.
    Local(ksim_runtime::clock::Clock),
    /// A ksim cluster's virtual clock, read through its API.
    Cluster(Target),
}

impl TimeSource {
    /// Nanoseconds from `start`.
    async fn offset(&self, start: DateTime<Utc>) -> i64 {
        let now = match self {
            TimeSource::Local(clock) => clock.now(),
            TimeSource::Cluster(target) => match virtual_now(target).await {
                Some(now) => now,
                None => {
                    tracing::warn!("cannot read the cluster's clock; timing a change on its start");
                    start
                }
            },
        };
        (now - start).num_nanoseconds().unwrap_or(i64::MAX).max(0)
    }
}

/// Watches one resource from `version`, handing each change to `sink`
/// and noting it in `known`; after a 410 Gone (the watch's revision is no
/// longer in the server's history) it lists again and hands on what
/// changed meanwhile (see [`Known::relist`]). Runs until `sink` or the
/// kind is closed.
async fn watch(
    target: &Target,
    resource: &Resource,
    mut version: String,
    known: &Mutex<Known>,
    sink: Sink,
) {
    let request = kube::core::Request::new(resource.path(None));
    loop {
        let params = kube::api::WatchParams::default().timeout(290);
        let Ok(http) = request.watch(&params, &version) else {
            return;
        };
        let mut gone = false;
        match target.client().request_events::<Value>(http).await {
            Ok(stream) => {
                let mut stream = std::pin::pin!(stream);
                while let Some(event) = stream.next().await {
                    let (kind, mut object) = match event {
                        Ok(kube::core::WatchEvent::Added(o)) => ("ADDED", o),
                        Ok(kube::core::WatchEvent::Modified(o)) => ("MODIFIED", o),
                        Ok(kube::core::WatchEvent::Deleted(o)) => ("DELETED", o),
                        Ok(kube::core::WatchEvent::Bookmark(b)) => {
                            version = b.metadata.resource_version;
                            continue;
                        }
                        Ok(kube::core::WatchEvent::Error(status)) => {
                            gone = status.code == 410;
                            break;
                        }
                        Err(error) => {
                            tracing::warn!(kind = %resource.group_kind(), %error, "watch stream failed");
                            break;
                        }
                    };
                    if let Some(v) = object["metadata"]["resourceVersion"].as_str() {
                        version = v.to_string();
                    }
                    complete(&mut object, resource);
                    if !sink.send(known, kind, object).await {
                        return;
                    }
                }
            }
            // Some servers answer a watch from too old a revision so.
            Err(kube::Error::Api(status)) if status.code == 410 => gone = true,
            Err(error) => {
                tracing::warn!(kind = %resource.group_kind(), %error, "watch failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await; // wall-clock: retrying a remote watch
                continue;
            }
        }
        while gone {
            tracing::info!(kind = %resource.group_kind(), "the watch expired: listing again");
            match list_all(target, resource).await {
                Ok((items, v)) => {
                    if !sink.relist(known, items).await {
                        return;
                    }
                    version = v;
                    gone = false;
                }
                Err(error) => {
                    tracing::warn!(kind = %resource.group_kind(), %error, "cannot list again");
                    tokio::time::sleep(Duration::from_secs(1)).await; // wall-clock: retrying a remote list
                }
            }
        }
    }
}

/// How fast to replay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    /// The recorded pace times this factor (1: as recorded, 10: ten times faster).
    Factor(f64),
    /// No waiting.
    Max,
}

/// What a replay did.
#[derive(Debug, Default, Clone)]
pub struct ReplayReport {
    pub applied: usize,
    /// Changes of kinds the cluster does not serve, skipped.
    pub unserved: usize,
}

/// The identity of an object in a recording.
fn key(object: &Value) -> String {
    format!(
        "{}/{}/{}/{}",
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
        object["metadata"]["namespace"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Shared by the replay's workers: the new uid of every recorded uid created
/// so far, and the namespaces created.
#[derive(Default)]
struct Created {
    state: Mutex<(HashMap<String, String>, HashSet<String>)>,
    changed: Notify,
}

/// The object without what the server owns, its owner references
/// remapped, for comparing and creating.
fn comparable(object: &Value, uids: &HashMap<String, String>) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object["metadata"].as_object_mut() {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
            "selfLink",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            metadata.remove(field);
        }
        if let Some(references) = metadata
            .get_mut("ownerReferences")
            .and_then(Value::as_array_mut)
        {
            references.retain_mut(|r| match r["uid"].as_str().and_then(|u| uids.get(u)) {
                Some(new) => {
                    r["uid"] = json!(new);
                    true
                }
                None => false,
            });
            if references.is_empty() {
                metadata.remove("ownerReferences");
            }
        }
    }
    object
}

/// The JSON merge patch turning `old` into `new` (RFC 7386).
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut patch = Map::new();
            for (k, v) in b {
                match a.get(k) {
                    Some(old) => {
                        if let Some(d) = merge_diff(old, v) {
                            patch.insert(k.clone(), d);
                        }
                    }
                    None => {
                        patch.insert(k.clone(), v.clone());
                    }
                }
            }
            for k in a.keys() {
                if !b.contains_key(k) {
                    patch.insert(k.clone(), Value::Null);
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        (a, b) if a == b => None,
        (_, b) => Some(b.clone()),
    }
}

/// Replays `changes` into `target`.
pub async fn replay(
    target: &Target,
    mut changes: Vec<Change>,
    speed: Speed,
    workers: usize,
) -> Result<ReplayReport, Error> {
    definitions_first(&mut changes);
    let resources = Arc::new(Discovery {
        served: tokio::sync::RwLock::new(Arc::new(target.resources().await?)),
        defined: defined_kinds(&changes),
    });
    // What the recording will create, so that dependents wait for it.
    let mut will_create: HashSet<String> = HashSet::new();
    let mut namespaces: HashSet<String> = HashSet::new();
    for change in &changes {
        if change.kind == "ADDED" {
            if let Some(uid) = change.object["metadata"]["uid"].as_str() {
                will_create.insert(uid.to_string());
            }
            if change.object["kind"] == "Namespace" && change.object["apiVersion"] == "v1" {
                namespaces.insert(
                    change.object["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
            }
        }
    }
    let will_create = Arc::new(will_create);
    let namespaces = Arc::new(namespaces);
    let routes = definition_routes(&changes);
    let created = Arc::new(Created::default());
    let progress = Arc::new(Progress::default());
    let workers = workers.max(1);
    let mut senders = Vec::with_capacity(workers);
    let mut handles = Vec::with_capacity(workers);
    for _ in 0..workers {
        let (sender, mut receiver) = mpsc::channel::<Change>(1024);
        senders.push(sender);
        let target = target.clone();
        let resources = resources.clone();
        let will_create = will_create.clone();
        let namespaces = namespaces.clone();
        let created = created.clone();
        let progress = progress.clone();
        handles.push(tokio::spawn(async move {
            let mut last: HashMap<String, Value> = HashMap::new();
            let mut report = ReplayReport::default();
            while let Some(change) = receiver.recv().await {
                let api_version = change.object["apiVersion"].as_str().unwrap_or_default();
                let kind = change.object["kind"].as_str().unwrap_or_default();
                let defined = resources.defines(api_version, kind);
                let found = if change.kind == "DELETED" && defined {
                    // Not served now: gone with its definition, nothing to wait for.
                    let served = resources.served_now(api_version, kind).await;
                    if served.is_none() {
                        last.remove(&key(&change.object));
                        report.applied += 1;
                        progress.one_done();
                        continue;
                    }
                    served
                } else {
                    resources.find(&target, api_version, kind).await
                };
                let Some(mut resource) = found else {
                    report.unserved += 1;
                    progress.one_done();
                    continue;
                };
                // A definition created again (or anew) may be served a
                // while after discovery shows it, on some servers: its
                // objects wait for it, as long as for the first one.
                let mut attempts = 0;
                let applied = loop {
                    let applied = apply_change(
                        &target,
                        &resource,
                        &change,
                        &mut last,
                        &will_create,
                        &namespaces,
                        &created,
                    )
                    .await;
                    if change.kind == "DELETED" && matches!(applied, Err(Error::NotServed(_))) {
                        // Its definition went between discovery and the
                        // deletion: gone with it, nothing to wait for.
                        last.remove(&key(&change.object));
                        break Ok(());
                    }
                    if !(defined && matches!(applied, Err(Error::NotServed(_))) && attempts < 150)
                    {
                        break applied;
                    }
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(200)).await; // wall-clock: polls a remote server
                    if let Some(fresh) = resources.rediscover(&target, api_version, kind).await {
                        resource = fresh;
                    }
                };
                if let Err(Error::NotServed(error)) = &applied
                    && defined
                {
                    tracing::warn!(%error, "the kind is still not served after 30 s: change skipped");
                    report.unserved += 1;
                    progress.one_done();
                    continue;
                }
                if let Err(error) = applied {
                    progress.stop();
                    return Err(error);
                }
                report.applied += 1;
                progress.one_done();
            }
            Ok::<ReplayReport, Error>(report)
        }));
    }
    // The pace: a virtual cluster's own clock, else the wall clock.
    let mut pace = match speed {
        Speed::Factor(factor) if factor > 0.0 => match virtual_now(target).await {
            Some(start) => Pace::Cluster {
                start,
                reached: Duration::ZERO,
                factor,
            },
            None => Pace::Wall {
                origin: tokio::time::Instant::now(), // wall-clock: replay paces itself in real time
                factor,
            },
        },
        _ => Pace::Max,
    };
    let mut failed = None;
    let mut pace_error = None;
    for (sent, change) in changes.into_iter().enumerate() {
        let recorded = Duration::from_nanos(u64::try_from(change.t.max(0)).unwrap_or(0));
        match &mut pace {
            Pace::Max => {}
            Pace::Wall { origin, factor } => {
                let due = recorded.div_f64(*factor);
                tokio::time::sleep_until(*origin + due).await; // wall-clock: the replay's pace
            }
            Pace::Cluster {
                start,
                reached,
                factor,
            } => {
                let due = recorded.div_f64(*factor);
                if due > *reached {
                    // The changes before this one happen before the clock moves on.
                    progress.wait_for(sent).await;
                    if progress.stopped() {
                        break;
                    }
                    let to = chrono::Duration::from_std(due)
                        .ok()
                        .and_then(|d| start.checked_add_signed(d));
                    let Some(to) = to else {
                        pace_error = Some(Error::Invalid(format!(
                            "a change at {} ns is out of the clock's range",
                            change.t
                        )));
                        break;
                    };
                    if let Err(error) = advance_to(target, to).await {
                        pace_error = Some(error);
                        break;
                    }
                    *reached = due;
                }
            }
        }
        let api_version = change.object["apiVersion"].as_str().unwrap_or_default();
        let kind = change.object["kind"].as_str().unwrap_or_default();
        // Only after its definition's first change: a custom resource
        // recorded before its definition (a recording's initial state, or
        // a recorder's two watches of definitions told apart after a gap)
        // waits for it to be served, so it must not queue behind it: not
        // on its definition's worker at all.
        let worker = match routes.get(&(api_version.to_string(), kind.to_string())) {
            Some((definition, first)) if *first < sent => worker_of(definition, workers),
            Some((definition, _)) => {
                let worker = worker_of(&key(&change.object), workers);
                if worker == worker_of(definition, workers) {
                    (worker + 1) % workers
                } else {
                    worker
                }
            }
            None => worker_of(&key(&change.object), workers),
        };
        if senders[worker].send(change).await.is_err() {
            failed = Some(worker);
            break;
        }
    }
    drop(senders);
    let mut report = ReplayReport::default();
    let mut first_error = None;
    for handle in handles {
        match handle.await {
            Ok(Ok(part)) => {
                report.applied += part.applied;
                report.unserved += part.unserved;
            }
            Ok(Err(error)) => {
                first_error.get_or_insert(error);
            }
            Err(error) => {
                first_error
                    .get_or_insert(Error::Invalid(format!("a replay worker failed: {error}")));
            }
        }
    }
    if let Some(error) = pace_error {
        first_error.get_or_insert(error);
    }
    match first_error {
        Some(error) => Err(Error::Restore(format!(
            "replay stopped after {} changes: {error}",
            report.applied
        ))),
        None if failed.is_some() => Err(Error::Invalid("a replay worker stopped".into())),
        None => Ok(report),
    }
}

/// What the target cluster serves, discovered again when a change names a
/// kind that a CustomResourceDefinition of the recording defines (its
/// creation, replayed on another worker, makes it served).
struct Discovery {
    served: tokio::sync::RwLock<Arc<Resources>>,
    /// (apiVersion, kind) of the recording's CustomResourceDefinitions.
    defined: HashSet<(String, String)>,
}

impl Discovery {
    /// Whether a definition of the recording defines `kind` of `api_version`.
    fn defines(&self, api_version: &str, kind: &str) -> bool {
        self.defined
            .contains(&(api_version.to_string(), kind.to_string()))
    }

    /// The resource serving `kind` of `api_version` as last discovered.
    async fn served_now(&self, api_version: &str, kind: &str) -> Option<Resource> {
        self.served.read().await.find(api_version, kind).cloned()
    }

    /// Discovers the served kinds again; the resource serving `kind` of
    /// `api_version`, if any.
    async fn rediscover(&self, target: &Target, api_version: &str, kind: &str) -> Option<Resource> {
        let mut served = self.served.write().await;
        match target.resources().await {
            Ok(fresh) => *served = Arc::new(fresh),
            Err(error) => tracing::warn!(%error, "cannot discover the served kinds"),
        }
        served.find(api_version, kind).cloned()
    }

    /// The resource serving `kind` of `api_version`: at once if served; for
    /// a kind the recording defines, once discovery serves it (polled for
    /// up to 30 s); `None` for a kind the cluster does not serve.
    async fn find(&self, target: &Target, api_version: &str, kind: &str) -> Option<Resource> {
        if let Some(resource) = self.served.read().await.find(api_version, kind) {
            return Some(resource.clone());
        }
        if !self
            .defined
            .contains(&(api_version.to_string(), kind.to_string()))
        {
            return None;
        }
        for _ in 0..150 {
            {
                let mut served = self.served.write().await;
                if let Some(resource) = served.find(api_version, kind) {
                    return Some(resource.clone());
                }
                match target.resources().await {
                    Ok(fresh) => *served = Arc::new(fresh),
                    Err(error) => tracing::warn!(%error, "cannot discover the served kinds"),
                }
                if let Some(resource) = served.find(api_version, kind) {
                    return Some(resource.clone());
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await; // wall-clock: polls a remote server's discovery
        }
        None
    }
}

/// How a replay keeps its pace.
enum Pace {
    /// No waiting.
    Max,
    /// The wall clock, from `origin`.
    Wall {
        origin: tokio::time::Instant,
        factor: f64,
    },
    /// A ksim cluster's virtual clock, which stood at `start` and has been
    /// advanced by `reached` (the recorded time divided by the factor).
    Cluster {
        start: DateTime<Utc>,
        reached: Duration,
        factor: f64,
    },
}

/// How many changes the replay's workers have done, and whether one has
/// stopped on an error.
#[derive(Default)]
struct Progress {
    done: std::sync::atomic::AtomicUsize,
    stopped: std::sync::atomic::AtomicBool,
    changed: Notify,
}

impl Progress {
    fn one_done(&self) {
        self.done.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.changed.notify_waiters();
    }

    fn stop(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::Release);
        self.changed.notify_waiters();
    }

    fn stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Waits until `count` changes are done, or a worker has stopped.
    async fn wait_for(&self, count: usize) {
        loop {
            let changed = self.changed.notified();
            if self.stopped() || self.done.load(std::sync::atomic::Ordering::Acquire) >= count {
                return;
            }
            changed.await;
        }
    }
}

/// Whether a change is one of a CustomResourceDefinition.
fn is_definition(change: &Change) -> bool {
    change.object["kind"] == "CustomResourceDefinition"
        && change.object["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("apiextensions.k8s.io/"))
}

/// Puts the definitions of the recording's initial state (its leading
/// `ADDED` changes at `t` 0, a listing in no particular order) before the
/// rest of it, so that the custom resources listed there stay in order
/// with their definition's later changes (its deletion among them).
fn definitions_first(changes: &mut [Change]) {
    let initial = changes
        .iter()
        .position(|c| c.t != 0 || c.kind != "ADDED")
        .unwrap_or(changes.len());
    changes[..initial].sort_by_key(|c| !is_definition(c));
}

/// The (apiVersion, kind) pairs the recording's CustomResourceDefinitions define.
fn defined_kinds(changes: &[Change]) -> HashSet<(String, String)> {
    changes
        .iter()
        .filter(|c| c.kind == "ADDED" && is_definition(c))
        .flat_map(|c| crate::restore::crd_kinds(&c.object))
        .collect()
}

/// The replay worker of the changes of the object at `key`.
fn worker_of(key: &str, workers: usize) -> usize {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    usize::try_from(hasher.finish() % workers as u64).unwrap_or(0)
}

/// The key of the definition of each kind a CustomResourceDefinition of
/// the recording defines, by (apiVersion, kind), with the index of the
/// definition's first change: a replay sends the later changes of such a
/// kind to its definition's worker, so that they stay in order with the
/// definition's own (a custom resource created before its definition is
/// deleted and created again is not created after).
fn definition_routes(changes: &[Change]) -> HashMap<(String, String), (String, usize)> {
    let mut routes = HashMap::new();
    for (index, change) in changes.iter().enumerate() {
        if !is_definition(change) {
            continue;
        }
        let object = &change.object;
        let definition = key(object);
        for kind in crate::restore::crd_kinds(object) {
            routes
                .entry(kind)
                .or_insert_with(|| (definition.clone(), index));
        }
    }
    routes
}

/// The changes of kinds `target` does not serve (and no definition in the
/// recording defines): the index of the first one, its `apiVersion kind`,
/// and how many there are; `None` if every kind is served.
pub async fn first_unserved(
    target: &Target,
    changes: &[Change],
) -> Result<Option<(usize, String, usize)>, Error> {
    let resources = target.resources().await?;
    let defined = defined_kinds(changes);
    let mut first = None;
    let mut count = 0;
    for (index, change) in changes.iter().enumerate() {
        let api_version = change.object["apiVersion"].as_str().unwrap_or_default();
        let kind = change.object["kind"].as_str().unwrap_or_default();
        if resources.find(api_version, kind).is_none()
            && !defined.contains(&(api_version.to_string(), kind.to_string()))
        {
            count += 1;
            first.get_or_insert((index, format!("{api_version} {kind}")));
        }
    }
    Ok(first.map(|(index, kind)| (index, kind, count)))
}

/// Waits until the namespace and in-recording owners of `object` exist.
async fn wait_for_dependencies(
    object: &Value,
    will_create: &HashSet<String>,
    namespaces: &HashSet<String>,
    created: &Created,
) -> HashMap<String, String> {
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .filter(|n| namespaces.contains(*n));
    let owners: Vec<&str> = object["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str())
        .filter(|u| will_create.contains(*u))
        .collect();
    loop {
        let notified = created.changed.notified();
        {
            let state = created.state.lock().unwrap_or_else(PoisonError::into_inner);
            let ready = namespace.is_none_or(|n| state.1.contains(n))
                && owners.iter().all(|u| state.0.contains_key(*u));
            if ready {
                return owners
                    .iter()
                    .filter_map(|u| state.0.get(*u).map(|n| ((*u).to_string(), n.clone())))
                    .collect();
            }
        }
        // Bounded, in case the owner's creation failed.
        if tokio::time::timeout(Duration::from_secs(5), notified) // wall-clock: bounds a remote create
            .await
            .is_err()
        {
            let state = created.state.lock().unwrap_or_else(PoisonError::into_inner);
            return owners
                .iter()
                .filter_map(|u| state.0.get(*u).map(|n| ((*u).to_string(), n.clone())))
                .collect();
        }
    }
}

/// Creates `body` (object `name`); if an object of its name exists, that
/// one, unless it is still being deleted (a definition or namespace whose
/// deletion waits on finalizers, as one deleted just before in the
/// recording may be on a real server): then it is waited for (up to 30 s)
/// and `body` created once it is gone.
async fn create_after_predecessor(
    target: &Target,
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
    body: &Value,
) -> Result<Value, kube::Error> {
    let mut attempts = 0;
    loop {
        match target.create(resource, body).await {
            Err(e) if Error::is_already_exists(&e) => {
                let existing = target.get(resource, namespace, name).await?;
                if existing["metadata"]["deletionTimestamp"].is_null() {
                    return Ok(existing);
                }
                if attempts >= 150 {
                    tracing::warn!(kind = %resource.group_kind(), name, "still being deleted after 30 s: taken as it is");
                    return Ok(existing);
                }
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(200)).await; // wall-clock: polls a remote server
            }
            result => return result,
        }
    }
}

/// Applies one change.
async fn apply_change(
    target: &Target,
    resource: &Resource,
    change: &Change,
    last: &mut HashMap<String, Value>,
    will_create: &HashSet<String>,
    namespaces: &HashSet<String>,
    created: &Created,
) -> Result<(), Error> {
    let object = &change.object;
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .filter(|_| resource.namespaced);
    let id = key(object);
    let fail = |e: kube::Error| {
        // Nothing served at the path (no object named), or a definition
        // being deleted: the kind is not served (yet).
        let not_served = matches!(&e, kube::Error::Api(status)
            if (status.code == 404 && status.details.as_ref().is_none_or(|d| d.name.is_empty()))
                || status.code == 405);
        let message = format!(
            "{} {} {}{name}: {}",
            change.kind,
            resource.group_kind(),
            namespace.map(|n| format!("{n}/")).unwrap_or_default(),
            Error::from_kube(e)
        );
        if not_served {
            Error::NotServed(message)
        } else {
            Error::Restore(message)
        }
    };
    if change.kind == "DELETED" {
        last.remove(&id);
        return target.delete(resource, namespace, name).await.map_err(fail);
    }
    let uids = wait_for_dependencies(object, will_create, namespaces, created).await;
    let body = comparable(object, &uids);
    let previous = last.get(&id).cloned();
    match previous {
        None => {
            let stored = create_after_predecessor(target, resource, namespace, name, &body)
                .await
                .map_err(fail)?;
            let skip_status = matches!(
                (resource.group.as_str(), resource.kind.as_str()),
                ("", "Namespace" | "Node") | ("apiextensions.k8s.io", "CustomResourceDefinition")
            );
            if resource.has_status
                && !skip_status
                && body
                    .get("status")
                    .is_some_and(|s| s.as_object().is_some_and(|m| !m.is_empty()))
            {
                let stored_status = stored.get("status").cloned().unwrap_or(json!({}));
                if let Some(patch) = merge_diff(&stored_status, &body["status"]) {
                    target
                        .merge_patch(
                            resource,
                            namespace,
                            name,
                            Some("status"),
                            &json!({"status": patch}),
                        )
                        .await
                        .map_err(fail)?;
                }
            }
            let mut state = created.state.lock().unwrap_or_else(PoisonError::into_inner);
            if let (Some(old), Some(new)) = (
                object["metadata"]["uid"].as_str(),
                stored["metadata"]["uid"].as_str(),
            ) {
                state.0.insert(old.to_string(), new.to_string());
            }
            if resource.kind == "Namespace" && resource.group.is_empty() {
                state.1.insert(name.to_string());
            }
            drop(state);
            created.changed.notify_waiters();
        }
        Some(previous) => {
            let mut old_main = previous.clone();
            let mut new_main = body.clone();
            let old_status = old_main.as_object_mut().and_then(|m| m.remove("status"));
            let new_status = new_main.as_object_mut().and_then(|m| m.remove("status"));
            // A pod is bound through its binding subresource, not an update.
            if resource.group.is_empty()
                && resource.kind == "Pod"
                && old_main["spec"]["nodeName"].is_null()
                && let Some(node) = new_main["spec"]["nodeName"].as_str()
            {
                target.bind(namespace, name, node).await.map_err(fail)?;
                old_main["spec"]["nodeName"] = json!(node);
            }
            if let Some(patch) = merge_diff(&old_main, &new_main) {
                target
                    .merge_patch(resource, namespace, name, None, &patch)
                    .await
                    .map_err(fail)?;
            }
            if resource.has_status {
                let old_status = old_status.unwrap_or(json!({}));
                let new_status = new_status.unwrap_or(json!({}));
                if let Some(patch) = merge_diff(&old_status, &new_status) {
                    target
                        .merge_patch(
                            resource,
                            namespace,
                            name,
                            Some("status"),
                            &json!({"status": patch}),
                        )
                        .await
                        .map_err(fail)?;
                }
            }
        }
    }
    last.insert(id, body);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_names_its_kind_at_its_served_storage_version() {
        let definition = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Cluster",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [
                    {"name": "v1beta1", "served": true, "storage": false},
                    {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
                ]},
            "status": {"conditions": [{"type": "NamesAccepted", "status": "True"}]},
        });
        assert!(!established(&definition));
        let resource = defined_resource(&definition).expect("a resource");
        assert_eq!(resource.api_version, "example.com/v1");
        assert!(!resource.namespaced && resource.has_status);
        assert_eq!(resource_key(&resource), "widgets.example.com");
        let mut unserved = definition.clone();
        unserved["spec"]["versions"][1]["served"] = json!(false);
        unserved["status"]["conditions"][0] = json!({"type": "Established", "status": "True"});
        assert!(established(&unserved));
        let resource = defined_resource(&unserved).expect("a resource");
        assert_eq!(resource.api_version, "example.com/v1beta1");
        assert!(!resource.has_status);
    }
    use crate::api::Resources;

    fn object(name: &str, uid: &str, version: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "a", "uid": uid, "resourceVersion": version}})
    }

    fn changes(found: &[(&'static str, Value)]) -> Vec<(String, String)> {
        found
            .iter()
            .map(|(change, object)| {
                let name = object["metadata"]["name"].as_str().unwrap_or_default();
                ((*change).to_string(), name.to_string())
            })
            .collect()
    }

    #[test]
    fn a_list_after_an_expired_watch_tells_what_changed_meanwhile() {
        let resources = Resources::for_tests(&[("", "v1", "ConfigMap", "configmaps", true)]);
        let mut known = Known::new(&resources.preferred[0]);
        known.note_all(&[
            object("kept", "u1", "1"),
            object("changed", "u2", "2"),
            object("gone", "u3", "3"),
            object("again", "u4", "4"),
        ]);
        known.note("ADDED", &object("seen", "u5", "5"));
        known.note("DELETED", &object("seen", "u5", "6"));
        let found = known.relist(vec![
            object("kept", "u1", "1"),
            object("changed", "u2", "7"),
            object("again", "u8", "8"),
            object("new", "u9", "9"),
        ]);
        let as_pairs = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(c, n)| ((*c).to_string(), (*n).to_string()))
                .collect()
        };
        assert_eq!(
            changes(&found),
            as_pairs(&[
                ("DELETED", "again"),
                ("DELETED", "gone"),
                ("MODIFIED", "changed"),
                ("ADDED", "again"),
                ("ADDED", "new"),
            ])
        );
        // A deletion not seen carries the object's identity as last seen.
        assert_eq!(
            found[1].1,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "gone", "namespace": "a", "uid": "u3", "resourceVersion": "3"}})
        );
        assert!(
            known
                .relist(vec![
                    object("kept", "u1", "1"),
                    object("changed", "u2", "7"),
                    object("again", "u8", "8"),
                    object("new", "u9", "9"),
                ])
                .is_empty()
        );
        let closed = known.close();
        assert_eq!(closed.len(), 4);
        assert!(known.closed && known.objects.is_empty());
    }

    #[test]
    fn the_initial_state_replays_definitions_first() {
        let change = |t: i64, kind: &str, api_version: &str, object_kind: &str| Change {
            t,
            kind: kind.into(),
            object: json!({"apiVersion": api_version, "kind": object_kind, "metadata": {"name": "x"}}),
        };
        let mut changes = vec![
            change(0, "ADDED", "example.com/v1", "Widget"),
            change(0, "ADDED", "v1", "ConfigMap"),
            change(
                0,
                "ADDED",
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
            ),
            change(5, "ADDED", "example.com/v1", "Widget"),
            change(
                6,
                "ADDED",
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
            ),
        ];
        definitions_first(&mut changes);
        let kinds: Vec<(i64, &str)> = changes
            .iter()
            .map(|c| (c.t, c.object["kind"].as_str().unwrap_or_default()))
            .collect();
        assert_eq!(
            kinds,
            [
                (0, "CustomResourceDefinition"),
                (0, "Widget"),
                (0, "ConfigMap"),
                (5, "Widget"),
                (6, "CustomResourceDefinition"),
            ]
        );
    }

    #[test]
    fn a_recording_reads_back_up_to_its_last_complete_line() {
        let start = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .expect("valid")
            .with_timezone(&Utc);
        let change = Change {
            t: 1_500,
            kind: "ADDED".into(),
            object: json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
        };
        let text = format!("{}\n{}\n{{\"t\": 3, \"ty", header(start), line(&change));
        assert_eq!(parse(&text).expect("valid"), vec![change]);
    }

    #[test]
    fn a_broken_line_in_the_middle_is_reported_with_its_number() {
        let text = "{\"ksimRecording\": \"v1\"}\n{\"t\": 0}\n{}\n";
        let error = parse(text).expect_err("broken");
        assert_eq!(error.to_string(), "line 2: no type");
        let error = parse("{\"ksimRecording\": \"v9\"}\n").expect_err("version");
        assert!(error.to_string().contains("\"v9\" is not supported"));
    }

    #[test]
    fn the_merge_diff_sets_changes_and_nulls_removals() {
        let old = json!({"a": 1, "b": {"c": 2, "d": 3}, "l": [1]});
        let new = json!({"a": 1, "b": {"c": 5}, "l": [1, 2], "e": true});
        assert_eq!(
            merge_diff(&old, &new),
            Some(json!({"b": {"c": 5, "d": null}, "l": [1, 2], "e": true}))
        );
        assert_eq!(merge_diff(&old, &old), None);
    }

    #[test]
    fn events_are_recorded_only_when_named() {
        let resources = Resources::for_tests(&[
            ("", "v1", "Event", "events", true),
            ("apps", "v1", "Deployment", "deployments", true),
        ]);
        let event = &resources.preferred[0];
        let deployment = &resources.preferred[1];
        assert!(!recorded(event, &[]));
        assert!(recorded(deployment, &[]));
        assert!(recorded(event, &["events".into()]));
        assert!(recorded(deployment, &["deployments.apps".into()]));
        assert!(!recorded(deployment, &["pods".into()]));
    }
}
