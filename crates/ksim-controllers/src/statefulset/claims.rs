//! The PersistentVolumeClaims of a StatefulSet's pods, as pure functions:
//! the claims of an ordinal (`getPersistentVolumeClaims`: named
//! `<template>-<set>-<ordinal>`, labelled with the template's labels plus
//! the selector's matchLabels), the pod volumes referencing them
//! (`updateStorage`), and the owner references the
//! `persistentVolumeClaimRetentionPolicy` asks for (`isClaimOwnerUpToDate`,
//! `updateClaimOwnerRefForSetAndPod`): the set as controller when
//! `whenDeleted: Delete`, the pod as controller once it is scaled down when
//! `whenScaled: Delete`, so that the garbage collector deletes the claims.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, PodSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The `persistentVolumeClaimRetentionPolicy` (Retain/Retain when unset;
/// an unknown value counts as Retain, as upstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Retention {
    /// `whenDeleted: Delete`.
    pub(crate) delete_when_deleted: bool,
    /// `whenScaled: Delete`.
    pub(crate) delete_when_scaled: bool,
}

impl Retention {
    /// The policy of `set`.
    pub(crate) fn of(set: &StatefulSet) -> Self {
        let policy = set
            .spec
            .as_ref()
            .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
        let delete = |value: Option<&String>| value.map(String::as_str) == Some("Delete");
        let (when_deleted, when_scaled) = (
            policy.and_then(|p| p.when_deleted.as_ref()),
            policy.and_then(|p| p.when_scaled.as_ref()),
        );
        let known = |value: Option<&String>| {
            value.is_none_or(|v| matches!(v.as_str(), "Retain" | "Delete"))
        };
        if !known(when_deleted) || !known(when_scaled) {
            tracing::warn!(
                ?policy,
                "unknown claim retention policy, treating as Retain"
            );
            return Retention::default();
        }
        Retention {
            delete_when_deleted: delete(when_deleted),
            delete_when_scaled: delete(when_scaled),
        }
    }

    fn retains_all(self) -> bool {
        !self.delete_when_deleted && !self.delete_when_scaled
    }
}

/// The claim name of `template` for the pod of `ordinal`.
pub(crate) fn claim_name(template: &str, set: &str, ordinal: i32) -> String {
    format!("{template}-{set}-{ordinal}")
}

/// The claims of the pod of `ordinal`, with their template names.
pub(crate) fn claims_for(set: &StatefulSet, ordinal: i32) -> Vec<(String, PersistentVolumeClaim)> {
    let Some(spec) = set.spec.as_ref() else {
        return Vec::new();
    };
    let set_name = set.metadata.name.as_deref().unwrap_or("");
    let match_labels = spec.selector.match_labels.clone().unwrap_or_default();
    spec.volume_claim_templates
        .iter()
        .flatten()
        .map(|template| {
            let template_name = template.metadata.name.clone().unwrap_or_default();
            let mut labels: BTreeMap<String, String> =
                template.metadata.labels.clone().unwrap_or_default();
            labels.extend(match_labels.clone());
            let claim = PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(&template_name, set_name, ordinal)),
                    namespace: set.metadata.namespace.clone(),
                    labels: Some(labels),
                    annotations: template.metadata.annotations.clone(),
                    ..ObjectMeta::default()
                },
                spec: template.spec.clone(),
                status: None,
            };
            (template_name, claim)
        })
        .collect()
}

/// The pod spec with a volume per claim template referencing the pod's
/// claim (template volumes of the same name are replaced).
pub(crate) fn with_storage(set: &StatefulSet, ordinal: i32, mut spec: PodSpec) -> PodSpec {
    let claims = claims_for(set, ordinal);
    if claims.is_empty() {
        return spec;
    }
    let mut volumes: Vec<Volume> = claims
        .iter()
        .map(|(template, claim)| Volume {
            name: template.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.metadata.name.clone().unwrap_or_default(),
                read_only: Some(false),
            }),
            ..Volume::default()
        })
        .collect();
    volumes.extend(
        spec.volumes
            .take()
            .into_iter()
            .flatten()
            .filter(|v| !claims.iter().any(|(template, _)| *template == v.name)),
    );
    spec.volumes = Some(volumes);
    spec
}

/// What a claim's owner references are compared with: the set's and the
/// pod's controller references, and whether the pod is scaled down (its
/// ordinal out of the set's range).
#[derive(Debug, Clone)]
pub(crate) struct ClaimOwners<'a> {
    /// A controller reference to the set.
    pub(crate) set: &'a OwnerReference,
    /// A controller reference to the pod.
    pub(crate) pod: &'a OwnerReference,
    /// The pod's ordinal is outside the set's range.
    pub(crate) scaled_down: bool,
}

fn matches_ref(reference: &OwnerReference, owner: &OwnerReference) -> bool {
    reference.api_version == owner.api_version
        && reference.kind == owner.kind
        && reference.name == owner.name
}

fn has_ref(refs: &[OwnerReference], owner: &OwnerReference) -> bool {
    refs.iter().any(|r| r.uid == owner.uid)
}

/// `hasUnexpectedController`: another controller than the set or the pod
/// (or a reference to an earlier set or pod of the same name), under a
/// policy that deletes.
pub(crate) fn has_unexpected_controller(
    refs: &[OwnerReference],
    owners: &ClaimOwners<'_>,
    retention: Retention,
) -> bool {
    if retention.retains_all() {
        return false;
    }
    refs.iter().any(|r| {
        if matches_ref(r, owners.set) {
            r.uid != owners.set.uid
        } else if matches_ref(r, owners.pod) {
            r.uid != owners.pod.uid
        } else {
            r.controller == Some(true)
        }
    })
}

/// `isClaimOwnerUpToDate`.
pub(crate) fn claim_owner_up_to_date(
    refs: &[OwnerReference],
    owners: &ClaimOwners<'_>,
    retention: Retention,
) -> bool {
    let stale = |owner: &OwnerReference| {
        refs.iter()
            .find(|r| matches_ref(r, owner))
            .is_some_and(|r| r.uid != owner.uid)
    };
    if stale(owners.set) || stale(owners.pod) {
        return true;
    }
    let (has_set, has_pod) = (has_ref(refs, owners.set), has_ref(refs, owners.pod));
    if has_unexpected_controller(refs, owners, retention) {
        return !(has_set || has_pod);
    }
    let non_controller = refs.iter().any(|r| {
        (r.uid == owners.set.uid || r.uid == owners.pod.uid) && r.controller != Some(true)
    });
    if non_controller {
        return false;
    }
    let (want_set, want_pod) = wanted(owners, retention);
    has_set == want_set && has_pod == want_pod
}

/// Which of the set and the pod should own the claim.
fn wanted(owners: &ClaimOwners<'_>, retention: Retention) -> (bool, bool) {
    match (retention.delete_when_scaled, retention.delete_when_deleted) {
        (false, false) => (false, false),
        (false, true) => (true, false),
        (true, false) => (false, owners.scaled_down),
        (true, true) => (!owners.scaled_down, owners.scaled_down),
    }
}

/// `updateClaimOwnerRefForSetAndPod`: the references with ours scrubbed
/// and set again as the policy asks (none if another controller owns it).
pub(crate) fn updated_claim_owners(
    refs: &[OwnerReference],
    owners: &ClaimOwners<'_>,
    retention: Retention,
) -> Vec<OwnerReference> {
    let unexpected = has_unexpected_controller(refs, owners, retention);
    let mut updated: Vec<OwnerReference> = refs
        .iter()
        .filter(|r| !matches_ref(r, owners.set) && !matches_ref(r, owners.pod))
        .cloned()
        .collect();
    if unexpected {
        return updated;
    }
    let (want_set, want_pod) = wanted(owners, retention);
    if want_pod {
        updated.push(owners.pod.clone());
    }
    if want_set {
        updated.push(owners.set.clone());
    }
    updated
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(policy: serde_json::Value) -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "s1"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                    "containers": [{"name": "c", "image": "nginx"}],
                    "volumes": [{"name": "data", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}]
                }},
                "persistentVolumeClaimRetentionPolicy": policy,
                "volumeClaimTemplates": [{
                    "metadata": {"name": "data", "labels": {"tier": "db"}},
                    "spec": {"accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": "1Gi"}}}
                }]
            }
        }))
        .expect("statefulset")
    }

    fn reference(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    #[test]
    fn claims_are_named_per_template_and_ordinal_with_template_and_selector_labels() {
        let set = set(json!(null));
        let claims = claims_for(&set, 2);
        assert_eq!(claims.len(), 1);
        let (template, claim) = &claims[0];
        assert_eq!(template, "data");
        assert_eq!(claim.metadata.name.as_deref(), Some("data-web-2"));
        assert_eq!(claim.metadata.namespace.as_deref(), Some("default"));
        let labels = claim.metadata.labels.clone().expect("labels");
        assert_eq!(labels["tier"], "db");
        assert_eq!(labels["app"], "web");
    }

    #[test]
    fn pod_volumes_reference_the_claims_and_replace_same_named_volumes() {
        let set = set(json!(null));
        let template = set
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.clone())
            .expect("spec");
        let spec = with_storage(&set, 0, template);
        let volumes = spec.volumes.expect("volumes");
        let names: Vec<&str> = volumes.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["data", "tmp"]);
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.as_str()),
            Some("data-web-0")
        );
    }

    #[test]
    fn retention_policy_gives_the_owner_references_upstream_sets() {
        let set_ref = reference("apps/v1", "StatefulSet", "web", "s1");
        let pod_ref = reference("v1", "Pod", "web-1", "p1");
        // (whenDeleted, whenScaled, scaled down, want set ref, want pod ref)
        let cases = [
            ("Retain", "Retain", false, false, false),
            ("Retain", "Retain", true, false, false),
            ("Delete", "Retain", false, true, false),
            ("Delete", "Retain", true, true, false),
            ("Retain", "Delete", false, false, false),
            ("Retain", "Delete", true, false, true),
            ("Delete", "Delete", false, true, false),
            ("Delete", "Delete", true, false, true),
        ];
        for (when_deleted, when_scaled, scaled_down, want_set, want_pod) in cases {
            let retention = Retention::of(&set(json!({
                "whenDeleted": when_deleted, "whenScaled": when_scaled
            })));
            let owners = ClaimOwners {
                set: &set_ref,
                pod: &pod_ref,
                scaled_down,
            };
            let updated = updated_claim_owners(&[], &owners, retention);
            let what = format!("{when_deleted}/{when_scaled} scaled down {scaled_down}");
            assert_eq!(has_ref(&updated, &set_ref), want_set, "{what}");
            assert_eq!(has_ref(&updated, &pod_ref), want_pod, "{what}");
            assert!(
                claim_owner_up_to_date(&updated, &owners, retention),
                "{what}"
            );
            let up_to_date_without = !want_set && !want_pod;
            assert_eq!(
                claim_owner_up_to_date(&[], &owners, retention),
                up_to_date_without,
                "{what}"
            );
        }
    }

    #[test]
    fn claims_of_another_controller_or_an_earlier_set_are_left_alone() {
        let set_ref = reference("apps/v1", "StatefulSet", "web", "s1");
        let pod_ref = reference("v1", "Pod", "web-1", "p1");
        let retention = Retention {
            delete_when_deleted: true,
            delete_when_scaled: false,
        };
        let owners = ClaimOwners {
            set: &set_ref,
            pod: &pod_ref,
            scaled_down: false,
        };
        let earlier = reference("apps/v1", "StatefulSet", "web", "s0");
        assert!(claim_owner_up_to_date(&[earlier], &owners, retention));
        let other = reference("example.com/v1", "Thing", "x", "t1");
        assert!(claim_owner_up_to_date(
            std::slice::from_ref(&other),
            &owners,
            retention
        ));
        // Ours beside another controller: ours is scrubbed, none added.
        let both = [other.clone(), set_ref.clone()];
        assert!(!claim_owner_up_to_date(&both, &owners, retention));
        assert_eq!(updated_claim_owners(&both, &owners, retention), [other]);
        // Our reference without controller: true is fixed.
        let mut loose = set_ref.clone();
        loose.controller = None;
        assert!(!claim_owner_up_to_date(&[loose], &owners, retention));
    }

    #[test]
    fn an_unset_or_unknown_policy_retains() {
        assert_eq!(Retention::of(&set(json!(null))), Retention::default());
        assert_eq!(
            Retention::of(&set(json!({"whenDeleted": "Sometimes"}))),
            Retention::default()
        );
    }
}
