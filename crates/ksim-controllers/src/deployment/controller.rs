//! The Deployment controller's sync: claim ReplicaSets, find or create the
//! one matching the template (`<deployment>-<pod-template-hash>`), sync
//! revisions, then scale (resize or pause), roll (RollingUpdate or
//! Recreate), clean up history and write the status.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::workloop::{Action, Queued};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::hash::{POD_TEMPLATE_HASH_LABEL, compute_hash};
use super::rolling::{
    ReplicaCounts, ScalingReplicaSet, new_replica_set_replicas, proportional_sizes,
    resolve_fenceposts, scale_down_old,
};
use super::status::{
    FOUND_NEW_RS, NEW_RS_CREATED, calculate_status, condition, deadline, is_complete,
    rollout_status, set_condition,
};
use crate::Error;
use crate::common::{
    controller_of, controller_reference, key_of, parse_selector, selector_matches, update_status,
    watch_all,
};
use crate::controller_ref::{ControllerRefManager, Owner};
use crate::events::Events;
use crate::informer::SharedInformers;
use ksim_runtime::clock::Clock;

/// The revision of a ReplicaSet (and of its Deployment).
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// The Deployment's replicas when the ReplicaSet was last scaled.
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// The Deployment's replicas + maxSurge when the ReplicaSet was last scaled.
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";

/// Deployment annotations not copied onto its ReplicaSets.
const NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION_ANNOTATION,
    "deployment.kubernetes.io/revision-history",
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    "deprecated.deployment.rollback.to",
];

const RETRY: Duration = Duration::from_millis(500);

struct Context {
    client: Client,
    events: Events,
    clock: Clock,
}

/// Runs the Deployment controller until the watch streams end.
pub async fn run(client: Client, informers: SharedInformers) {
    let clock = informers.clock().clone();
    let controller = Queued::<Deployment>::new(client.clone(), &clock);
    let store = controller.store();
    controller
        .watches(watch_all::<ReplicaSet>(client.clone(), &clock), move |rs| {
            deployments_of_replica_set(&store, &rs)
        })
        .run(
            "deployment",
            |d, context| Box::pin(reconcile(d, context)),
            error_policy,
            Arc::new(Context {
                events: Events::new(client.clone(), "deployment-controller", &clock),
                client,
                clock,
            }),
        )
        .await;
}

fn deployments_of_replica_set(
    store: &Store<Deployment>,
    rs: &ReplicaSet,
) -> Vec<ObjectRef<Deployment>> {
    let namespace = rs.namespace().unwrap_or_default();
    if let Some(owner) = controller_of(&rs.metadata) {
        if owner.kind == "Deployment" && owner.api_version.starts_with("apps/") {
            return vec![ObjectRef::new(&owner.name).within(&namespace)];
        }
        return Vec::new();
    }
    let refs = store
        .state()
        .iter()
        .filter(|d| d.namespace().as_deref() == Some(namespace.as_str()))
        .filter(|d| {
            d.spec
                .as_ref()
                .and_then(|s| parse_selector(&s.selector).ok())
                .is_some_and(|s| !s.is_empty() && selector_matches(&s, rs.metadata.labels.as_ref()))
        })
        .map(|d| ObjectRef::from_obj(d.as_ref()))
        .collect();
    crate::workloop::in_order(refs)
}

fn error_policy(_d: Arc<Deployment>, error: &Error, _context: Arc<Context>) -> Action {
    tracing::debug!(%error, "deployment sync will be retried");
    Action::requeue(RETRY)
}

fn replicas_of(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

fn available_of(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

fn annotation_i32(rs: &ReplicaSet, key: &str) -> Option<i32> {
    rs.metadata.annotations.as_ref()?.get(key)?.parse().ok()
}

fn revision_of(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION_ANNOTATION))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Oldest first, by name when created at the same time.
fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let created = |rs: &ReplicaSet| rs.metadata.creation_timestamp.clone().map(|t| t.0);
    created(a)
        .cmp(&created(b))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// The template without the `pod-template-hash` label, as JSON.
fn template_without_hash(template: Option<&PodTemplateSpec>) -> serde_json::Value {
    let mut value = serde_json::to_value(template).unwrap_or_default();
    if let Some(labels) = value
        .pointer_mut("/metadata/labels")
        .and_then(serde_json::Value::as_object_mut)
    {
        labels.remove(POD_TEMPLATE_HASH_LABEL);
    }
    value
}

/// One sync's view of a Deployment and its ReplicaSets.
struct Sync<'a> {
    d: &'a Deployment,
    client: Client,
    events: Events,
    namespace: String,
    name: String,
    replica_sets: Api<ReplicaSet>,
    desired: i32,
    max_surge: i32,
    max_unavailable: i32,
    rolling: bool,
    /// The ReplicaSet matching the template, if any.
    new: Option<ReplicaSet>,
    /// The others, oldest first.
    old: Vec<ReplicaSet>,
    /// The status being built (carries conditions set on the way).
    status: DeploymentStatus,
    now: Timestamp,
    /// A Recreate rollout waits for the old pods to go (their deletion
    /// does not always change a ReplicaSet, so look again soon).
    waiting_for_old_pods: bool,
}

async fn reconcile(cached: Arc<Deployment>, context: Arc<Context>) -> Result<Action, Error> {
    let (namespace, name) = key_of(&cached.metadata);
    // The cache may lag: act on the Deployment as it is now.
    let deployments: Api<Deployment> = Api::namespaced(context.client.clone(), &namespace);
    let Some(d) = deployments.get_opt(&name).await? else {
        return Ok(Action::await_change());
    };
    if d.metadata.uid != cached.metadata.uid {
        return Ok(Action::await_change());
    }
    let spec = d
        .spec
        .as_ref()
        .ok_or_else(|| Error::Invalid(format!("deployment {namespace}/{name} has no spec")))?;
    let selector = parse_selector(&spec.selector)?;
    if selector.is_empty() {
        return Err(Error::Invalid(format!(
            "deployment {namespace}/{name} selects all pods; it is not synced"
        )));
    }
    let replica_sets: Api<ReplicaSet> = Api::namespaced(context.client.clone(), &namespace);
    let desired = spec.replicas.unwrap_or(1);
    let rolling = spec
        .strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate");
    let (max_surge, max_unavailable) = if rolling {
        let ru = spec
            .strategy
            .as_ref()
            .and_then(|s| s.rolling_update.as_ref());
        resolve_fenceposts(
            ru.and_then(|r| r.max_surge.as_ref()),
            ru.and_then(|r| r.max_unavailable.as_ref()),
            desired,
        )?
    } else {
        (0, 0)
    };

    let owned = claim_replica_sets(&replica_sets, &deployments, &d, &selector).await?;
    let template = template_without_hash(Some(&spec.template));
    let mut sorted = owned;
    sorted.sort_by(by_creation);
    let new_index = sorted.iter().position(|rs| {
        template_without_hash(rs.spec.as_ref().and_then(|s| s.template.as_ref())) == template
    });
    let new = new_index.map(|i| sorted.remove(i));
    let mut sync = Sync {
        d: &d,
        client: context.client.clone(),
        events: context.events.clone(),
        namespace,
        name,
        replica_sets,
        desired,
        max_surge,
        max_unavailable,
        rolling,
        new,
        old: sorted,
        status: d.status.clone().unwrap_or_default(),
        now: context.clock.timestamp(),
        waiting_for_old_pods: false,
    };

    if d.metadata.deletion_timestamp.is_some() {
        sync.write_status(false).await?;
        return Ok(Action::await_change());
    }
    sync.sync_revision().await?;
    sync.check_paused_conditions(spec.paused == Some(true));
    if spec.paused == Some(true) || sync.is_scaling_event() {
        sync.scale().await?;
        if spec.paused == Some(true) {
            sync.cleanup().await?;
        }
        sync.write_status(false).await?;
        return Ok(Action::await_change());
    }
    if rolling {
        sync.rollout_rolling().await?;
    } else {
        sync.rollout_recreate().await?;
    }
    Ok(sync.requeue())
}

/// Adopts matching orphan ReplicaSets (after a fresh read shows the
/// Deployment is not being deleted), releases owned ones that stopped
/// matching, and returns those the Deployment controls (upstream's
/// `ClaimReplicaSets`, through the shared [`ControllerRefManager`]).
async fn claim_replica_sets(
    api: &Api<ReplicaSet>,
    deployments: &Api<Deployment>,
    d: &Deployment,
    selector: &ksim_core::selector::LabelSelectorRequirements,
) -> Result<Vec<ReplicaSet>, Error> {
    let owner = controller_reference("apps/v1", "Deployment", &d.metadata);
    let namespace = d.metadata.namespace.clone().unwrap_or_default();
    let mut manager = ControllerRefManager::new(
        Owner {
            reference: &owner,
            namespace: &namespace,
            deleting: d.metadata.deletion_timestamp.is_some(),
        },
        "Deployment",
        deployments.clone(),
        selector,
    );
    let replica_sets = api.list(&ListParams::default()).await?.items;
    manager.claim(api, replica_sets, |_| true).await
}

fn ignore_not_found<T>(result: Result<T, kube::Error>) -> Result<Option<T>, Error> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) => {
            let e = Error::from(e);
            if e.is_not_found() { Ok(None) } else { Err(e) }
        }
    }
}

impl Sync<'_> {
    fn all(&self) -> Vec<&ReplicaSet> {
        self.old.iter().chain(self.new.as_ref()).collect()
    }

    fn active(&self) -> Vec<&ReplicaSet> {
        self.all()
            .into_iter()
            .filter(|rs| replicas_of(rs) > 0)
            .collect()
    }

    /// `isScalingEvent`: an active ReplicaSet was sized for another replica count.
    fn is_scaling_event(&self) -> bool {
        self.active()
            .iter()
            .filter_map(|rs| annotation_i32(rs, DESIRED_REPLICAS_ANNOTATION))
            .any(|want| want != self.desired)
    }

    /// `checkPausedConditions`: Progressing Unknown with DeploymentPaused
    /// while paused, DeploymentResumed once resumed.
    fn check_paused_conditions(&mut self, paused: bool) {
        if !super::status::has_progress_deadline(self.d) {
            return;
        }
        let reason = self
            .status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Progressing")
            .and_then(|c| c.reason.clone());
        if reason.as_deref() == Some(super::status::TIMED_OUT) {
            return;
        }
        let paused_condition = reason.as_deref() == Some("DeploymentPaused");
        if paused && !paused_condition {
            let c = condition(
                "Progressing",
                "Unknown",
                "DeploymentPaused",
                "Deployment is paused".into(),
                self.now,
            );
            set_condition(&mut self.status, c);
        } else if !paused && paused_condition {
            let c = condition(
                "Progressing",
                "Unknown",
                "DeploymentResumed",
                "Deployment is resumed".into(),
                self.now,
            );
            set_condition(&mut self.status, c);
        }
    }

    fn next_revision(&self) -> i64 {
        self.old.iter().map(revision_of).max().unwrap_or(0) + 1
    }

    /// Gives the new ReplicaSet the next revision and the Deployment its revision.
    async fn sync_revision(&mut self) -> Result<(), Error> {
        let Some(new) = self.new.clone() else {
            return Ok(());
        };
        let next = self.next_revision();
        let mut updated = new.clone();
        let annotations = updated
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        if revision_of(&new) < next {
            annotations.insert(REVISION_ANNOTATION.into(), next.to_string());
        }
        annotations
            .entry(DESIRED_REPLICAS_ANNOTATION.into())
            .or_insert_with(|| self.desired.to_string());
        annotations
            .entry(MAX_REPLICAS_ANNOTATION.into())
            .or_insert_with(|| self.desired.saturating_add(self.max_surge).to_string());
        let min_ready = self.d.spec.as_ref().and_then(|s| s.min_ready_seconds);
        if let Some(spec) = updated.spec.as_mut() {
            spec.min_ready_seconds = min_ready;
        }
        if updated != new {
            updated = self
                .replica_sets
                .replace(&new.name_any(), &PostParams::default(), &updated)
                .await?;
        }
        self.set_deployment_revision(revision_of(&updated)).await?;
        self.new = Some(updated);
        let has_progressing = self
            .status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Progressing");
        if !has_progressing {
            let message = format!("Found new replica set {:?}", new.name_any());
            set_condition(
                &mut self.status,
                condition("Progressing", "True", FOUND_NEW_RS, message, self.now),
            );
        }
        Ok(())
    }

    async fn set_deployment_revision(&self, revision: i64) -> Result<(), Error> {
        let current = self
            .d
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REVISION_ANNOTATION))
            .cloned();
        if current.as_deref() == Some(revision.to_string().as_str()) {
            return Ok(());
        }
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), &self.namespace);
        let patch =
            json!({"metadata": {"annotations": {REVISION_ANNOTATION: revision.to_string()}}});
        ignore_not_found(
            deployments
                .patch(&self.name, &PatchParams::default(), &Patch::Merge(patch))
                .await,
        )?;
        Ok(())
    }

    /// Creates the ReplicaSet for the current template with `replicas`.
    async fn create_new(&mut self, replicas: i32) -> Result<(), Error> {
        let spec = self.d.spec.clone().unwrap_or_default();
        let collision_count = self.status.collision_count;
        let hash = compute_hash(&spec.template, collision_count);
        let mut template = spec.template.clone();
        template
            .metadata
            .get_or_insert_with(ObjectMeta::default)
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
        let mut selector: LabelSelector = spec.selector.clone();
        selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
        let revision = self.next_revision();
        let mut annotations: BTreeMap<String, String> = self
            .d
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| !NOT_COPIED.contains(&k.as_str()))
            .collect();
        annotations.insert(REVISION_ANNOTATION.into(), revision.to_string());
        annotations.insert(DESIRED_REPLICAS_ANNOTATION.into(), self.desired.to_string());
        annotations.insert(
            MAX_REPLICAS_ANNOTATION.into(),
            self.desired.saturating_add(self.max_surge).to_string(),
        );
        let rs_name = format!("{}-{hash}", self.name);
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(rs_name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                annotations: Some(annotations),
                owner_references: Some(vec![controller_reference(
                    "apps/v1",
                    "Deployment",
                    &self.d.metadata,
                )]),
                ..ObjectMeta::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                min_ready_seconds: spec.min_ready_seconds,
                selector,
                template: Some(template.clone()),
            }),
            status: None,
        };
        let created = match self.replica_sets.create(&PostParams::default(), &rs).await {
            Ok(created) => created,
            Err(e) => {
                let e = Error::from(e);
                if !e.is_conflict() {
                    return Err(e);
                }
                let existing = self.replica_sets.get(&rs_name).await?;
                let ours = controller_of(&existing.metadata)
                    .is_some_and(|r| Some(&r.uid) == self.d.metadata.uid.as_ref());
                let same =
                    template_without_hash(existing.spec.as_ref().and_then(|s| s.template.as_ref()))
                        == template_without_hash(Some(&template));
                if ours && same {
                    existing
                } else {
                    let deployments: Api<Deployment> =
                        Api::namespaced(self.client.clone(), &self.namespace);
                    update_status(&deployments, &self.name, |fresh| {
                        let status = fresh.status.get_or_insert_with(DeploymentStatus::default);
                        status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
                    })
                    .await?;
                    return Err(Error::Invalid(format!(
                        "hash collision for replica set {rs_name:?}: collisionCount bumped"
                    )));
                }
            }
        };
        self.set_deployment_revision(revision).await?;
        if replicas > 0 {
            self.events.normal(
                self.d.object_ref(&()),
                "ScalingReplicaSet",
                "Scale",
                format!("Scaled up replica set {rs_name} from 0 to {replicas}"),
            );
        }
        let message = format!("Created new replica set {rs_name:?}");
        set_condition(
            &mut self.status,
            condition("Progressing", "True", NEW_RS_CREATED, message, self.now),
        );
        self.new = Some(created);
        Ok(())
    }

    /// Sets a ReplicaSet's size (and its desired/max annotations); returns
    /// whether anything changed.
    async fn scale_replica_set(&self, rs: &mut ReplicaSet, replicas: i32) -> Result<bool, Error> {
        let desired = self.desired.to_string();
        let max = self.desired.saturating_add(self.max_surge).to_string();
        let annotations = rs.metadata.annotations.clone().unwrap_or_default();
        if replicas_of(rs) == replicas
            && annotations.get(DESIRED_REPLICAS_ANNOTATION) == Some(&desired)
            && annotations.get(MAX_REPLICAS_ANNOTATION) == Some(&max)
        {
            return Ok(false);
        }
        let from = replicas_of(rs);
        let size_changed = from != replicas;
        let mut updated = rs.clone();
        if let Some(spec) = updated.spec.as_mut() {
            spec.replicas = Some(replicas);
        }
        let annotations = updated
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        annotations.insert(DESIRED_REPLICAS_ANNOTATION.into(), desired);
        annotations.insert(MAX_REPLICAS_ANNOTATION.into(), max);
        *rs = self
            .replica_sets
            .replace(&rs.name_any(), &PostParams::default(), &updated)
            .await?;
        if size_changed {
            let direction = if replicas > from { "up" } else { "down" };
            self.events.normal(
                self.d.object_ref(&()),
                "ScalingReplicaSet",
                "Scale",
                format!(
                    "Scaled {direction} replica set {} from {from} to {replicas}",
                    rs.name_any()
                ),
            );
        }
        Ok(size_changed)
    }

    /// `DeploymentController.scale`: resizes the active ReplicaSets.
    async fn scale(&mut self) -> Result<(), Error> {
        let active_count = self.active().len();
        if active_count <= 1 {
            // The one active ReplicaSet, else the newest one.
            let target = if let Some(rs) = self.new.as_mut().filter(|rs| replicas_of(rs) > 0) {
                Some(rs)
            } else if let Some(rs) = self.old.iter_mut().find(|rs| replicas_of(rs) > 0) {
                Some(rs)
            } else if self.new.is_some() {
                self.new.as_mut()
            } else {
                self.old.last_mut()
            };
            if let Some(rs) = target {
                let mut rs_copy = rs.clone();
                self.scale_replica_set(&mut rs_copy, self.desired).await?;
                if let Some(slot) = self.find_mut(&rs_copy) {
                    *slot = rs_copy;
                }
            }
            return Ok(());
        }
        let saturated = self
            .new
            .as_ref()
            .is_some_and(|rs| replicas_of(rs) == self.desired && available_of(rs) >= self.desired);
        if saturated {
            for i in 0..self.old.len() {
                let mut rs = self.old[i].clone();
                if replicas_of(&rs) > 0 {
                    self.scale_replica_set(&mut rs, 0).await?;
                    self.old[i] = rs;
                }
            }
            return Ok(());
        }
        if !self.rolling {
            return Ok(());
        }
        let mut active: Vec<ReplicaSet> = self.active().into_iter().cloned().collect();
        let total: i32 = active.iter().map(replicas_of).fold(0, i32::saturating_add);
        let allowed = if self.desired > 0 {
            self.desired.saturating_add(self.max_surge)
        } else {
            0
        };
        let growing = allowed > total;
        active.sort_by(|a, b| {
            replicas_of(b).cmp(&replicas_of(a)).then_with(|| {
                if growing {
                    by_creation(b, a)
                } else {
                    by_creation(a, b)
                }
            })
        });
        let inputs: Vec<ScalingReplicaSet> = active
            .iter()
            .map(|rs| ScalingReplicaSet {
                replicas: replicas_of(rs),
                max_replicas: annotation_i32(rs, MAX_REPLICAS_ANNOTATION),
            })
            .collect();
        let status_replicas = self.d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let sizes = proportional_sizes(self.desired, self.max_surge, status_replicas, &inputs);
        for (mut rs, size) in active.into_iter().zip(sizes) {
            self.scale_replica_set(&mut rs, size).await?;
            if let Some(slot) = self.find_mut(&rs) {
                *slot = rs;
            }
        }
        Ok(())
    }

    fn find_mut(&mut self, rs: &ReplicaSet) -> Option<&mut ReplicaSet> {
        let uid = rs.metadata.uid.clone();
        self.new
            .iter_mut()
            .chain(self.old.iter_mut())
            .find(|r| r.metadata.uid == uid)
    }

    async fn rollout_rolling(&mut self) -> Result<(), Error> {
        if self.new.is_none() {
            let all: i32 = self
                .old
                .iter()
                .map(replicas_of)
                .fold(0, i32::saturating_add);
            let replicas = new_replica_set_replicas(self.desired, self.max_surge, all, 0);
            self.create_new(replicas).await?;
        }
        // reconcileNewReplicaSet
        if let Some(mut new) = self.new.clone() {
            let current = replicas_of(&new);
            if current != self.desired {
                let target = if current > self.desired {
                    self.desired
                } else {
                    let all: i32 = self
                        .all()
                        .iter()
                        .map(|rs| replicas_of(rs))
                        .fold(0, i32::saturating_add);
                    new_replica_set_replicas(self.desired, self.max_surge, all, current)
                };
                if self.scale_replica_set(&mut new, target).await? {
                    self.new = Some(new);
                    return self.write_status(true).await;
                }
                self.new = Some(new);
            }
        }
        // reconcileOldReplicaSets
        let new_counts = self
            .new
            .as_ref()
            .map_or(ReplicaCounts::default(), |rs| ReplicaCounts {
                replicas: replicas_of(rs),
                available: available_of(rs),
            });
        let old_counts: Vec<ReplicaCounts> = self
            .old
            .iter()
            .map(|rs| ReplicaCounts {
                replicas: replicas_of(rs),
                available: available_of(rs),
            })
            .collect();
        let sizes = scale_down_old(self.desired, self.max_unavailable, new_counts, &old_counts);
        let mut scaled = false;
        for (i, size) in sizes.into_iter().enumerate() {
            if size != replicas_of(&self.old[i]) {
                let mut rs = self.old[i].clone();
                scaled |= self.scale_replica_set(&mut rs, size).await?;
                self.old[i] = rs;
            }
        }
        if scaled {
            return self.write_status(true).await;
        }
        let status = self.progress_status();
        if is_complete(self.d, &status) {
            self.cleanup().await?;
        }
        self.write_status(true).await
    }

    async fn rollout_recreate(&mut self) -> Result<(), Error> {
        let mut scaled = false;
        for i in 0..self.old.len() {
            if replicas_of(&self.old[i]) > 0 {
                let mut rs = self.old[i].clone();
                scaled |= self.scale_replica_set(&mut rs, 0).await?;
                self.old[i] = rs;
            }
        }
        if scaled || self.old_pods_running().await? {
            self.waiting_for_old_pods = true;
            return self.write_status(true).await;
        }
        if self.new.is_none() {
            self.create_new(self.desired).await?;
        }
        if let Some(mut new) = self.new.clone() {
            self.scale_replica_set(&mut new, self.desired).await?;
            self.new = Some(new);
        }
        let status = self.progress_status();
        if is_complete(self.d, &status) {
            self.cleanup().await?;
        }
        self.write_status(true).await
    }

    /// Whether pods of the old ReplicaSets still exist and are not terminal.
    async fn old_pods_running(&self) -> Result<bool, Error> {
        if self
            .old
            .iter()
            .any(|rs| rs.status.as_ref().is_some_and(|s| s.replicas > 0))
        {
            return Ok(true);
        }
        let old_uids: Vec<&str> = self
            .old
            .iter()
            .filter_map(|rs| rs.metadata.uid.as_deref())
            .collect();
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let selector = self
            .d
            .spec
            .as_ref()
            .map(|s| crate::common::selector_query(&s.selector))
            .unwrap_or_default();
        let running = pods
            .list(&ListParams::default().labels(&selector))
            .await?
            .items
            .iter()
            .filter(|p| {
                controller_of(&p.metadata).is_some_and(|r| old_uids.contains(&r.uid.as_str()))
            })
            .any(|p| !ksim_core::status::is_pod_terminal(p));
        Ok(running)
    }

    /// Deletes the oldest ReplicaSets scaled to zero beyond revisionHistoryLimit.
    async fn cleanup(&mut self) -> Result<(), Error> {
        let Some(limit) = self.d.spec.as_ref().and_then(|s| s.revision_history_limit) else {
            return Ok(());
        };
        let limit = usize::try_from(limit.max(0)).unwrap_or(0);
        let mut cleanable: Vec<ReplicaSet> = self
            .old
            .iter()
            .filter(|rs| rs.metadata.deletion_timestamp.is_none())
            .cloned()
            .collect();
        if cleanable.len() <= limit {
            return Ok(());
        }
        let excess = cleanable.len() - limit;
        cleanable.sort_by(|a, b| {
            revision_of(a)
                .cmp(&revision_of(b))
                .then_with(|| by_creation(a, b))
        });
        for rs in cleanable.into_iter().take(excess) {
            let status = rs.status.clone().unwrap_or_default();
            let observed = status.observed_generation >= rs.metadata.generation;
            if status.replicas != 0 || replicas_of(&rs) != 0 || !observed {
                continue;
            }
            ignore_not_found(
                self.replica_sets
                    .delete(&rs.name_any(), &DeleteParams::default())
                    .await,
            )?;
            self.old.retain(|r| r.metadata.uid != rs.metadata.uid);
        }
        Ok(())
    }

    fn progress_status(&self) -> DeploymentStatus {
        let mut d = self.d.clone();
        d.status = Some(self.status.clone());
        let all = self.all();
        rollout_status(&d, &all, self.new.as_ref(), self.max_unavailable, self.now)
    }

    /// Writes the status (with rollout progress when `progress`), if it changed.
    async fn write_status(&mut self, progress: bool) -> Result<(), Error> {
        let status = if progress {
            // Progress is judged against the status as last written.
            let mut d = self.d.clone();
            let mut base = self.d.status.clone().unwrap_or_default();
            base.conditions = self.status.conditions.clone();
            base.collision_count = self.status.collision_count;
            d.status = Some(base);
            let all = self.all();
            rollout_status(&d, &all, self.new.as_ref(), self.max_unavailable, self.now)
        } else {
            let mut d = self.d.clone();
            d.status = Some(self.status.clone());
            let all = self.all();
            calculate_status(&d, &all, self.new.as_ref(), self.max_unavailable, self.now)
        };
        self.status = status.clone();
        if self.d.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), &self.namespace);
        match update_status(&deployments, &self.name, |fresh| {
            fresh.status = Some(status.clone())
        })
        .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Requeue at the progress deadline of an unfinished rollout.
    fn requeue(&self) -> Action {
        if self.waiting_for_old_pods {
            return Action::requeue(Duration::from_secs(1));
        }
        let mut d = self.d.clone();
        d.status = Some(self.status.clone());
        if is_complete(&d, &self.status) {
            return Action::await_change();
        }
        match deadline(&d, &self.status) {
            Some(at) => {
                let wait = at.duration_since(self.now).as_secs().max(1);
                Action::requeue(Duration::from_secs(u64::try_from(wait).unwrap_or(1)))
            }
            None => Action::await_change(),
        }
    }
}
