//! The conditions a terminating namespace reports (upstream's
//! `namespaceConditionUpdater`): one per deletion step, False with a
//! success reason when the step went well, True with what went wrong or
//! what remains otherwise.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NamespaceCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// What one deletion pass left in a namespace.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ContentTotals {
    /// Remaining objects per `<resource>.<group>`.
    pub resources: BTreeMap<String, usize>,
    /// Remaining objects per finalizer they carry.
    pub finalizers: BTreeMap<String, usize>,
    /// Errors of the pass (discovery excepted).
    pub delete_errors: Vec<String>,
    /// Why discovery failed, if it did.
    pub discovery_error: Option<String>,
}

/// One condition: (type, whether it is True, reason, message).
fn condition(type_: &str, failed: bool, reason: &str, message: String) -> NamespaceCondition {
    NamespaceCondition {
        type_: type_.to_string(),
        status: if failed { "True" } else { "False" }.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message),
        last_transition_time: None,
    }
}

/// The five deletion conditions for `totals`, merged into `previous`: a
/// condition keeps its transition time unless its status changes; other
/// condition types are kept as they are.
pub fn deletion_conditions(
    previous: &[NamespaceCondition],
    totals: &ContentTotals,
    now: Timestamp,
) -> Vec<NamespaceCondition> {
    let discovery = match &totals.discovery_error {
        Some(e) => condition(
            "NamespaceDeletionDiscoveryFailure",
            true,
            "DiscoveryFailed",
            format!("Discovery failed for some groups, 1 failing: {e}"),
        ),
        None => condition(
            "NamespaceDeletionDiscoveryFailure",
            false,
            "ResourcesDiscovered",
            "All resources successfully discovered".into(),
        ),
    };
    let parsing = condition(
        "NamespaceDeletionGroupVersionParsingFailure",
        false,
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed".into(),
    );
    let content = if totals.delete_errors.is_empty() {
        condition(
            "NamespaceDeletionContentFailure",
            false,
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization".into(),
        )
    } else {
        let mut errors = totals.delete_errors.clone();
        errors.sort();
        condition(
            "NamespaceDeletionContentFailure",
            true,
            "ContentDeletionFailed",
            format!(
                "Failed to delete all resource types, {} remaining: {}",
                errors.len(),
                errors.join(", ")
            ),
        )
    };
    let remaining: Vec<String> = totals
        .resources
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(r, n)| format!("{r} has {n} resource instances"))
        .collect();
    let remaining = if remaining.is_empty() {
        condition(
            "NamespaceContentRemaining",
            false,
            "ContentRemoved",
            "All content successfully removed".into(),
        )
    } else {
        condition(
            "NamespaceContentRemaining",
            true,
            "SomeResourcesRemain",
            format!("Some resources are remaining: {}", remaining.join(", ")),
        )
    };
    let finalizers: Vec<String> = totals
        .finalizers
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(f, n)| format!("{f} in {n} resource instances"))
        .collect();
    let finalizers = if finalizers.is_empty() {
        condition(
            "NamespaceFinalizersRemaining",
            false,
            "ContentHasNoFinalizers",
            "All content-preserving finalizers finished".into(),
        )
    } else {
        condition(
            "NamespaceFinalizersRemaining",
            true,
            "SomeFinalizersRemain",
            format!(
                "Some content in the namespace has finalizers remaining: {}",
                finalizers.join(", ")
            ),
        )
    };
    let mut merged: Vec<NamespaceCondition> = previous.to_vec();
    for mut fresh in [discovery, parsing, content, remaining, finalizers] {
        match merged.iter_mut().find(|c| c.type_ == fresh.type_) {
            Some(old) => {
                fresh.last_transition_time = if old.status == fresh.status {
                    old.last_transition_time.clone()
                } else {
                    Some(Time(now))
                };
                *old = fresh;
            }
            None => {
                fresh.last_transition_time = Some(Time(now));
                merged.push(fresh);
            }
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaining_content_and_finalizers_are_reported_as_upstream_words_them() {
        let totals = ContentTotals {
            resources: [
                ("pods.".to_string(), 2),
                ("widgets.example.com".to_string(), 1),
            ]
            .into(),
            finalizers: [("example.com/hold".to_string(), 3)].into(),
            ..ContentTotals::default()
        };
        let now = Timestamp::UNIX_EPOCH;
        let conditions = deletion_conditions(&[], &totals, now);
        let find = |t: &str| {
            conditions
                .iter()
                .find(|c| c.type_ == t)
                .expect("condition present")
        };
        let remaining = find("NamespaceContentRemaining");
        assert_eq!(remaining.status, "True");
        assert_eq!(remaining.reason.as_deref(), Some("SomeResourcesRemain"));
        assert_eq!(
            remaining.message.as_deref(),
            Some(
                "Some resources are remaining: pods. has 2 resource instances, widgets.example.com has 1 resource instances"
            )
        );
        let finalizers = find("NamespaceFinalizersRemaining");
        assert_eq!(
            finalizers.message.as_deref(),
            Some(
                "Some content in the namespace has finalizers remaining: example.com/hold in 3 resource instances"
            )
        );
        assert_eq!(find("NamespaceDeletionContentFailure").status, "False");
        assert_eq!(conditions.len(), 5);
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let earlier = Timestamp::UNIX_EPOCH;
        let later = "2026-01-01T00:00:00Z".parse().expect("time");
        let first = deletion_conditions(
            &[],
            &ContentTotals {
                resources: [("pods.".to_string(), 1)].into(),
                ..ContentTotals::default()
            },
            earlier,
        );
        let second = deletion_conditions(
            &first,
            &ContentTotals {
                resources: [("pods.".to_string(), 2)].into(),
                delete_errors: vec!["boom".into()],
                ..ContentTotals::default()
            },
            later,
        );
        let time_of = |t: &str| {
            second
                .iter()
                .find(|c| c.type_ == t)
                .and_then(|c| c.last_transition_time.clone())
                .expect("time")
                .0
        };
        assert_eq!(time_of("NamespaceContentRemaining"), earlier);
        assert_eq!(time_of("NamespaceDeletionContentFailure"), later);
        assert_eq!(second.len(), 5);
    }
}
