//! Claiming a controller's objects, as upstream's `ControllerRefManager`
//! (`pkg/controller/controller_ref_manager.go`): an object matching the
//! controller's selector without a controller reference is adopted (a
//! strategic merge patch adding the controller reference, carrying the
//! object's uid as a precondition, and only after a fresh read of the owner
//! shows it is not being deleted); an owned object whose labels no longer
//! match is released (a patch deleting the reference). Used by the
//! StatefulSet, DaemonSet and Job controllers for pods, and for
//! ControllerRevisions.
//!
//! Pods that stop matching are not returned by a selector list, so the pod
//! watch records them as [`ReleaseHints`] for their owner's next sync
//! ([`OwnerMapper`] maps pod events to the owners to sync, orphans included).

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use ksim_core::selector::LabelSelectorRequirements;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::Error;
use crate::common::{controller_of, parse_selector, selector_matches};

/// What claiming does with one object (`ClaimObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Ours and matching: keep it.
    Keep,
    /// An orphan that matches: adopt it.
    Adopt,
    /// Ours but no longer matching: release it.
    Release,
    /// Someone else's, or not to be touched now.
    Ignore,
}

/// The owner the objects are claimed for.
#[derive(Debug, Clone)]
pub(crate) struct Owner<'a> {
    /// Its controller reference (what adoption adds).
    pub(crate) reference: &'a OwnerReference,
    /// Its namespace.
    pub(crate) namespace: &'a str,
    /// Whether it is being deleted.
    pub(crate) deleting: bool,
}

/// Upstream's `ClaimObject` decision for an object with `meta` whose labels
/// (and the caller's filter) give `matches`.
pub(crate) fn decide(meta: &ObjectMeta, owner: &Owner<'_>, matches: bool) -> Claim {
    match controller_of(meta) {
        Some(reference) if reference.uid != owner.reference.uid => Claim::Ignore,
        Some(_) if matches => Claim::Keep,
        // Releasing while the owner is being deleted would race the
        // garbage collector.
        Some(_) if owner.deleting => Claim::Ignore,
        Some(_) => Claim::Release,
        None if owner.deleting || !matches || meta.deletion_timestamp.is_some() => Claim::Ignore,
        None if meta.namespace.as_deref().unwrap_or("") != owner.namespace => Claim::Ignore,
        None => Claim::Adopt,
    }
}

/// The strategic merge patch adopting an object (`ownerRefControllerPatch`),
/// also adding `finalizers`.
pub(crate) fn adopt_patch(
    owner: &OwnerReference,
    uid: Option<&str>,
    finalizers: &[&str],
) -> serde_json::Value {
    let mut metadata = json!({"ownerReferences": [owner], "uid": uid.unwrap_or("")});
    if !finalizers.is_empty() {
        metadata["finalizers"] = json!(finalizers);
    }
    json!({ "metadata": metadata })
}

/// The strategic merge patch releasing an object
/// (`GenerateDeleteOwnerRefStrategicMergeBytes`), also removing `finalizers`.
pub(crate) fn release_patch(
    owner_uid: &str,
    uid: Option<&str>,
    finalizers: &[&str],
) -> serde_json::Value {
    let mut metadata = json!({
        "ownerReferences": [{"$patch": "delete", "uid": owner_uid}],
        "uid": uid.unwrap_or(""),
    });
    if !finalizers.is_empty() {
        metadata["$deleteFromPrimitiveList/finalizers"] = json!(finalizers);
    }
    json!({ "metadata": metadata })
}

/// Claims objects for one owner of type `O` during one sync.
pub(crate) struct ControllerRefManager<'a, O> {
    owner: Owner<'a>,
    /// The owner's kind, for messages.
    kind: &'a str,
    /// A fresh read of the owner, before the first adoption (`canAdopt`).
    owners: Api<O>,
    selector: &'a LabelSelectorRequirements,
    /// Finalizers added on adoption and removed on release (the Job's
    /// tracking finalizer).
    finalizers: &'a [&'a str],
    can_adopt: Option<Result<(), String>>,
}

impl<'a, O> ControllerRefManager<'a, O>
where
    O: Resource + Clone + Debug + DeserializeOwned,
{
    /// A manager for `owner`, read back through `owners` before adopting.
    pub(crate) fn new(
        owner: Owner<'a>,
        kind: &'a str,
        owners: Api<O>,
        selector: &'a LabelSelectorRequirements,
    ) -> Self {
        ControllerRefManager {
            owner,
            kind,
            owners,
            selector,
            finalizers: &[],
            can_adopt: None,
        }
    }

    /// Also adds these finalizers on adoption and removes them on release.
    pub(crate) fn with_finalizers(mut self, finalizers: &'a [&'a str]) -> Self {
        self.finalizers = finalizers;
        self
    }

    /// `RecheckDeletionTimestamp`, once per manager: the owner, read
    /// afresh, is the same object and is not being deleted.
    async fn can_adopt(&mut self) -> Result<(), String> {
        if self.can_adopt.is_none() {
            let name = &self.owner.reference.name;
            let namespace = self.owner.namespace;
            let wanted = &self.owner.reference.uid;
            let verdict = match self.owners.get_opt(name).await {
                Err(e) => Err(format!("can't recheck DeletionTimestamp: {e}")),
                Ok(None) => Err(format!(
                    "can't recheck DeletionTimestamp: original {} {namespace}/{name} is gone",
                    self.kind
                )),
                Ok(Some(fresh)) if fresh.meta().uid.as_deref() != Some(wanted.as_str()) => {
                    Err(format!(
                        "can't recheck DeletionTimestamp: original {} {namespace}/{name} is gone: got uid {}, wanted {wanted}",
                        self.kind,
                        fresh.meta().uid.as_deref().unwrap_or(""),
                    ))
                }
                Ok(Some(fresh)) => match &fresh.meta().deletion_timestamp {
                    Some(at) => Err(format!(
                        "{namespace}/{name} has just been deleted at {}",
                        at.0
                    )),
                    None => Ok(()),
                },
            };
            self.can_adopt = Some(verdict);
        }
        match &self.can_adopt {
            Some(Err(message)) => Err(message.clone()),
            _ => Ok(()),
        }
    }

    /// Claims `objects` (`ClaimPods`, `ClaimControllerRevisions`): returns
    /// those the owner keeps, adopted ones included (as patched). An object
    /// matches when its labels match the selector and `filter` accepts it.
    /// Every object is tried; the first error is returned at the end.
    pub(crate) async fn claim<K>(
        &mut self,
        api: &Api<K>,
        objects: Vec<K>,
        filter: impl Fn(&K) -> bool,
    ) -> Result<Vec<K>, Error>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
    {
        let mut claimed = Vec::with_capacity(objects.len());
        let mut failure = None;
        for object in objects {
            let matches =
                selector_matches(self.selector, object.meta().labels.as_ref()) && filter(&object);
            let result = match decide(object.meta(), &self.owner, matches) {
                Claim::Keep => {
                    claimed.push(object);
                    Ok(())
                }
                Claim::Ignore => Ok(()),
                Claim::Adopt => match self.adopt(api, &object).await {
                    Ok(Some(adopted)) => {
                        claimed.push(adopted);
                        Ok(())
                    }
                    Ok(None) => Ok(()),
                    Err(e) => Err(e),
                },
                Claim::Release => self.release(api, &object).await,
            };
            if let Err(e) = result {
                failure.get_or_insert(e);
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(claimed),
        }
    }

    /// Adopts one orphan; `None` when it is gone meanwhile.
    async fn adopt<K>(&mut self, api: &Api<K>, object: &K) -> Result<Option<K>, Error>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
    {
        if let Err(reason) = self.can_adopt().await {
            let meta = object.meta();
            return Err(Error::Invalid(format!(
                "can't adopt {} {}/{} ({}): {reason}",
                K::kind(&()),
                meta.namespace.as_deref().unwrap_or(""),
                meta.name.as_deref().unwrap_or(""),
                meta.uid.as_deref().unwrap_or(""),
            )));
        }
        let patch = adopt_patch(
            self.owner.reference,
            object.meta().uid.as_deref(),
            self.finalizers,
        );
        match api
            .patch(
                &object.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await
        {
            Ok(adopted) => {
                tracing::debug!(
                    owner = %self.owner.reference.name,
                    object = %object.name_any(),
                    "adopted an orphan"
                );
                Ok(Some(adopted))
            }
            Err(e) => {
                let e = Error::from(e);
                if e.is_not_found() { Ok(None) } else { Err(e) }
            }
        }
    }

    /// Releases one object; gone or already changed (the uid precondition
    /// fails as Invalid) is not an error.
    async fn release<K>(&self, api: &Api<K>, object: &K) -> Result<(), Error>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
    {
        let patch = release_patch(
            &self.owner.reference.uid,
            object.meta().uid.as_deref(),
            self.finalizers,
        );
        match api
            .patch(
                &object.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await
        {
            Ok(_) => {
                tracing::debug!(
                    owner = %self.owner.reference.name,
                    object = %object.name_any(),
                    "released an object that no longer matches"
                );
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 422 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Owned objects that stopped matching their owner's selector, by owner
/// (namespace, name): what the owner's next sync releases.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReleaseHints {
    hints: Arc<Mutex<HintsByOwner>>,
}

/// Object names by owner (namespace, name).
type HintsByOwner = HashMap<(String, String), HashSet<String>>;

impl ReleaseHints {
    fn record(&self, namespace: &str, owner: &str, object: String) {
        self.hints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((namespace.to_string(), owner.to_string()))
            .or_default()
            .insert(object);
    }

    /// Adds to `listed` (what a selector list returned) the objects recorded
    /// for one owner that it lacks, read afresh; the records are taken.
    pub(crate) async fn add_recorded<K>(
        &self,
        api: &Api<K>,
        namespace: &str,
        owner: &str,
        listed: &mut Vec<K>,
    ) -> Result<(), Error>
    where
        K: Resource + Clone + Debug + DeserializeOwned,
    {
        for name in self.take(namespace, owner) {
            if listed
                .iter()
                .any(|o| o.meta().name.as_deref() == Some(&name))
            {
                continue;
            }
            if let Some(object) = api.get_opt(&name).await? {
                listed.push(object);
            }
        }
        Ok(())
    }

    /// Takes the names recorded for one owner.
    pub(crate) fn take(&self, namespace: &str, owner: &str) -> Vec<String> {
        self.hints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(namespace.to_string(), owner.to_string()))
            .map(|names| names.into_iter().collect())
            .unwrap_or_default()
    }
}

/// Maps dependent events (pods) to the owners of type `K` to sync, as
/// upstream's add/update handlers: the controller when it is a `K`, else
/// (for an orphan) every `K` of its namespace whose selector matches it.
#[derive(Clone)]
pub(crate) struct OwnerMapper<K: Resource<DynamicType = ()> + Clone + 'static> {
    store: Store<K>,
    selector_of: fn(&K) -> Option<&LabelSelector>,
    hints: ReleaseHints,
}

impl<K> OwnerMapper<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// A mapper reading owners from `store` (the controller's own cache).
    pub(crate) fn new(
        store: Store<K>,
        selector_of: fn(&K) -> Option<&LabelSelector>,
        hints: ReleaseHints,
    ) -> Self {
        OwnerMapper {
            store,
            selector_of,
            hints,
        }
    }

    fn selector(&self, owner: &K) -> Option<LabelSelectorRequirements> {
        (self.selector_of)(owner).and_then(|s| parse_selector(s).ok())
    }

    /// The owners an event about `object` concerns.
    pub(crate) fn owners_of<D: Resource>(&self, object: &D) -> Vec<ObjectRef<K>> {
        let meta = object.meta();
        let namespace = meta.namespace.as_deref().unwrap_or("");
        let labels = meta.labels.as_ref();
        if let Some(reference) = controller_of(meta) {
            if reference.kind != K::kind(&()) || !same_group::<K>(&reference.api_version) {
                return Vec::new();
            }
            let owner = ObjectRef::<K>::new(&reference.name).within(namespace);
            if let Some(cached) = self.store.get(&owner)
                && cached.meta().uid.as_deref() == Some(reference.uid.as_str())
                && self
                    .selector(&cached)
                    .is_some_and(|s| !selector_matches(&s, labels))
            {
                self.hints
                    .record(namespace, &reference.name, object.name_any());
            }
            return vec![owner];
        }
        if meta.deletion_timestamp.is_some() {
            return Vec::new();
        }
        crate::workloop::in_order(
            self.store
                .state()
                .iter()
                .filter(|owner| owner.meta().namespace.as_deref() == Some(namespace))
                .filter(|owner| {
                    self.selector(owner)
                        .is_some_and(|s| !s.is_empty() && selector_matches(&s, labels))
                })
                .map(|owner| ObjectRef::from_obj(owner.as_ref()))
                .collect(),
        )
    }
}

/// Whether an ownerReference's apiVersion is of `K`'s group (any version).
fn same_group<K: Resource<DynamicType = ()>>(api_version: &str) -> bool {
    let group = api_version.split_once('/').map_or("", |(group, _)| group);
    group == K::group(&())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn reference(uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "StatefulSet".into(),
            name: "web".into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn meta(controller: Option<&str>, deleting: bool) -> ObjectMeta {
        ObjectMeta {
            namespace: Some("default".into()),
            owner_references: controller.map(|uid| vec![reference(uid)]),
            deletion_timestamp: deleting.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn claiming_adopts_orphans_keeps_ours_and_releases_what_stopped_matching() {
        let ours = reference("u1");
        let owner = |deleting| Owner {
            reference: &ours,
            namespace: "default",
            deleting,
        };
        let cases = [
            // (controller, object deleting, owner deleting, matches, want)
            (Some("u1"), false, false, true, Claim::Keep),
            (Some("u1"), false, false, false, Claim::Release),
            (Some("u1"), false, true, false, Claim::Ignore),
            (Some("u1"), false, true, true, Claim::Keep),
            (Some("u2"), false, false, true, Claim::Ignore),
            (None, false, false, true, Claim::Adopt),
            (None, false, false, false, Claim::Ignore),
            (None, true, false, true, Claim::Ignore),
            (None, false, true, true, Claim::Ignore),
        ];
        for (controller, object_deleting, owner_deleting, matches, want) in cases {
            let got = decide(
                &meta(controller, object_deleting),
                &owner(owner_deleting),
                matches,
            );
            assert_eq!(
                got, want,
                "{controller:?} deleting={object_deleting} owner deleting={owner_deleting} matches={matches}"
            );
        }
        let mut elsewhere = meta(None, false);
        elsewhere.namespace = Some("other".into());
        assert_eq!(decide(&elsewhere, &owner(false), true), Claim::Ignore);
    }

    fn set(name: &str, uid: &str, app: &str) -> k8s_openapi::api::apps::v1::StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": {"selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}}}}
        }))
        .expect("statefulset")
    }

    fn pod(
        labels: serde_json::Value,
        owner: Option<(&str, &str)>,
    ) -> k8s_openapi::api::core::v1::Pod {
        let references = owner.map(|(name, uid)| {
            json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name,
                    "uid": uid, "controller": true}])
        });
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "labels": labels,
                         "ownerReferences": references}
        }))
        .expect("pod")
    }

    #[test]
    fn pod_events_map_to_their_controller_or_every_set_matching_an_orphan() {
        use k8s_openapi::api::apps::v1::StatefulSet;
        let (store, mut writer) = kube::runtime::reflector::store::<StatefulSet>();
        for owner in [
            set("web", "u1", "web"),
            set("db", "u2", "db"),
            set("web2", "u3", "web"),
        ] {
            writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(owner));
        }
        let hints = ReleaseHints::default();
        let mapper = OwnerMapper::new(
            store,
            |s: &StatefulSet| s.spec.as_ref().map(|s| &s.selector),
            hints.clone(),
        );
        let names = |refs: Vec<ObjectRef<StatefulSet>>| {
            let mut names: Vec<String> = refs.into_iter().map(|r| r.name).collect();
            names.sort();
            names
        };
        assert_eq!(
            names(mapper.owners_of(&pod(json!({"app": "web"}), None))),
            ["web", "web2"]
        );
        assert!(
            mapper
                .owners_of(&pod(json!({"app": "other"}), None))
                .is_empty()
        );
        assert_eq!(
            names(mapper.owners_of(&pod(json!({"app": "web"}), Some(("web", "u1"))))),
            ["web"]
        );
        assert!(hints.take("default", "web").is_empty(), "still matching");
        assert_eq!(
            names(mapper.owners_of(&pod(json!({"app": "db"}), Some(("web", "u1"))))),
            ["web"]
        );
        assert_eq!(hints.take("default", "web"), ["p"], "to be released");
        assert!(hints.take("default", "web").is_empty(), "taken once");
    }

    #[test]
    fn patches_carry_the_reference_and_the_uid_precondition() {
        let owner = reference("u1");
        assert_eq!(
            adopt_patch(&owner, Some("p1"), &[]),
            json!({"metadata": {"uid": "p1", "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u1",
                "controller": true, "blockOwnerDeletion": true
            }]}})
        );
        assert_eq!(
            adopt_patch(&owner, Some("p1"), &["f"])["metadata"]["finalizers"],
            json!(["f"])
        );
        assert_eq!(
            release_patch("u1", Some("p1"), &[]),
            json!({"metadata": {"uid": "p1", "ownerReferences": [{"$patch": "delete", "uid": "u1"}]}})
        );
        assert_eq!(
            release_patch("u1", Some("p1"), &["f"])["metadata"]["$deleteFromPrimitiveList/finalizers"],
            json!(["f"])
        );
    }
}
