//! What several controllers share: pod availability as `podutil` defines
//! it (readiness, activity, phase and controller references are
//! ksim-core's, re-exported here), label selectors (matching and their query-string
//! form), controller references, intOrString scaling, status updates
//! with optimistic concurrency, and creating or deleting a controller's pods
//! with upstream's events (`RealPodControl`).

use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use ksim_core::selector::LabelSelectorRequirements;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Error;
use crate::events::Events;

pub(crate) use ksim_core::status::{controller_of, is_pod_active, is_pod_ready, pod_phase};

/// When the pod's Ready condition last became True, if it is True (the Unix
/// epoch when the time is missing).
pub(crate) fn ready_since(pod: &Pod) -> Option<Timestamp> {
    ksim_core::status::pod_ready_condition(pod)
        .filter(|c| c.status == "True")
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or(Timestamp::UNIX_EPOCH, |t| t.0)
        })
}

/// Ready for at least `min_ready_seconds` at `now` (`podutil.IsPodAvailable`).
pub(crate) fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    match ready_since(pod) {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(since) => since
            .checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds)))
            .is_ok_and(|t| t < now),
    }
}

/// A controller reference to `owner` (controller and blockOwnerDeletion set).
pub(crate) fn controller_reference(
    api_version: &str,
    kind: &str,
    owner: &ObjectMeta,
) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A parsed structured selector; an invalid one is an error.
pub(crate) fn parse_selector(selector: &LabelSelector) -> Result<LabelSelectorRequirements, Error> {
    LabelSelectorRequirements::from_label_selector(selector)
        .map_err(|e| Error::Invalid(format!("invalid label selector: {e}")))
}

/// Whether `labels` match `selector`.
pub(crate) fn selector_matches(
    selector: &LabelSelectorRequirements,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    match labels {
        Some(labels) => selector.matches(labels),
        None => selector.matches(&ksim_core::selector::NoLabels),
    }
}

/// The `?labelSelector=` form of a structured selector. Callers have
/// validated it with [`parse_selector`] first; an invalid one gives "".
pub(crate) fn selector_query(selector: &LabelSelector) -> String {
    ksim_core::selector::label_selector_string(selector).unwrap_or_default()
}

/// `intstr.GetScaledValueFromIntOrPercent`: an int as is, or a percentage of
/// `total` rounded up or down.
pub(crate) fn scaled_value(value: &IntOrString, total: i32, round_up: bool) -> Result<i32, Error> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let Some(number) = s.strip_suffix('%') else {
                return Err(Error::Invalid(format!(
                    "invalid value for IntOrString: invalid type: string is not a percentage: {s:?}"
                )));
            };
            let percent: i64 = number.parse().map_err(|e| {
                Error::Invalid(format!(
                    "invalid value for IntOrString: invalid value {s:?}: {e}"
                ))
            })?;
            let product = percent.saturating_mul(i64::from(total));
            let scaled = if round_up {
                product.div_euclid(100) + i64::from(product.rem_euclid(100) != 0)
            } else {
                product.div_euclid(100)
            };
            Ok(i32::try_from(scaled).unwrap_or(if scaled < 0 { i32::MIN } else { i32::MAX }))
        }
    }
}

/// Reads the object afresh, lets `change` edit it, and writes it back through
/// the status subresource; retried a few times on conflicts.
pub(crate) async fn update_status<K>(
    api: &Api<K>,
    name: &str,
    change: impl Fn(&mut K),
) -> Result<K, Error>
where
    K: kube::Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    update_status_from(api, name, None, change).await
}

/// [`update_status`] that first writes `current` (the object as the sync
/// read it, resourceVersion included) without reading it again, as
/// upstream's status updates do; the object is read afresh only after a
/// conflict.
pub(crate) async fn update_status_from<K>(
    api: &Api<K>,
    name: &str,
    current: Option<K>,
    change: impl Fn(&mut K),
) -> Result<K, Error>
where
    K: kube::Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    let mut last = None;
    let mut current = current;
    for _ in 0..4 {
        let mut object = match current.take() {
            Some(object) => object,
            None => api.get(name).await?,
        };
        change(&mut object);
        match api
            .replace_status(name, &PostParams::default(), &object)
            .await
        {
            Ok(updated) => return Ok(updated),
            Err(e) => {
                let e = Error::from(e);
                if !e.is_conflict() {
                    return Err(e);
                }
                last = Some(e);
            }
        }
    }
    Err(last.unwrap_or_else(|| Error::Invalid("status update retries exhausted".into())))
}

/// The namespace and name of an object, for logs and keys.
pub(crate) fn key_of(meta: &ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// Creates one of `owner`'s pods, with upstream's `SuccessfulCreate` event,
/// or its `FailedCreate` warning and the error.
pub(crate) async fn create_pod(
    pods: &Api<Pod>,
    events: &Events,
    owner: ObjectReference,
    pod: &Pod,
) -> Result<Pod, Error> {
    match pods.create(&PostParams::default(), pod).await {
        Ok(created) => {
            let note = format!("Created pod: {}", created.name_any());
            events.normal(owner, "SuccessfulCreate", "Create", note);
            Ok(created)
        }
        Err(e) => {
            let e = Error::from(e);
            events.warning(
                owner,
                "FailedCreate",
                "Create",
                format!("Error creating: {e}"),
            );
            Err(e)
        }
    }
}

/// Deletes one of `owner`'s pods, with upstream's `SuccessfulDelete` event,
/// or (unless the pod is already gone) its `FailedDelete` warning; returns
/// the error either way.
pub(crate) async fn delete_pod(
    pods: &Api<Pod>,
    events: &Events,
    owner: ObjectReference,
    name: &str,
) -> Result<(), Error> {
    match pods.delete(name, &DeleteParams::default()).await {
        Ok(_) => {
            let note = format!("Deleted pod: {name}");
            events.normal(owner, "SuccessfulDelete", "Delete", note);
            Ok(())
        }
        Err(e) => {
            let e = Error::from(e);
            if !e.is_not_found() {
                events.warning(
                    owner,
                    "FailedDelete",
                    "Delete",
                    format!("Error deleting: {e}"),
                );
            }
            Err(e)
        }
    }
}

pub(crate) use ksim_runtime::informer::backoff_on;

/// A watch of every object of a kind (an informer's event stream),
/// restarted with back-off on `clock` after errors. Objects are decoded
/// without `metadata.managedFields`, which no controller reads
/// ([`ksim_runtime::WithoutManagedFields`]).
pub(crate) fn watch_all<K>(
    client: kube::Client,
    clock: &ksim_runtime::clock::Clock,
) -> impl futures::Stream<Item = Result<kube::runtime::watcher::Event<K>, kube::runtime::watcher::Error>>
+ Send
+ use<K>
where
    K: kube::Resource + Clone + Debug + DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    use futures::StreamExt;
    let api: Api<ksim_runtime::WithoutManagedFields<K>> = Api::all(client);
    let watch = kube::runtime::watcher::watcher(api, kube::runtime::watcher::Config::default());
    backoff_on(watch, clock).map(|event| event.map(ksim_runtime::lean::into_inner_event))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_failing_watch_is_polled_again_after_a_back_off_on_the_clock() {
        use futures::StreamExt;
        use ksim_runtime::clock::{Clock, Instant};
        use std::sync::Arc;
        use std::time::Duration;
        let start = chrono::DateTime::from_timestamp(1_800_000_000, 0).expect("time");
        let clock = Clock::virtual_at(start);
        let items = futures::stream::iter(vec![Err("a"), Err("b"), Ok(1), Err("c"), Ok(2)]);
        type Seen = Vec<(Duration, Result<u8, &'static str>)>;
        let seen: Arc<std::sync::Mutex<Seen>> = Arc::default();
        let record = Arc::clone(&seen);
        let at = clock.clone();
        tokio::spawn(backoff_on(items, &clock).for_each(move |item| {
            let when = at.elapsed_since(Instant::default());
            record.lock().expect("lock").push((when, item));
            async {}
        }));
        clock
            .advance(Duration::from_secs(10))
            .await
            .expect("advance");
        let ms = Duration::from_millis;
        assert_eq!(
            *seen.lock().expect("lock"),
            [
                (ms(0), Err("a")),
                (ms(800), Err("b")),
                (ms(2400), Ok(1)),
                // A success right after failures does not reset the delay.
                (ms(2400), Err("c")),
                (ms(5600), Ok(2)),
            ]
        );
    }

    #[test]
    fn percentages_scale_with_the_requested_rounding() {
        let cases = [
            (IntOrString::Int(3), 10, true, 3),
            (IntOrString::String("25%".into()), 10, true, 3),
            (IntOrString::String("25%".into()), 10, false, 2),
            (IntOrString::String("95%".into()), 10, true, 10),
            (IntOrString::String("0%".into()), 10, true, 0),
            (IntOrString::String("100%".into()), 7, false, 7),
        ];
        for (value, total, up, want) in cases {
            assert_eq!(
                scaled_value(&value, total, up).expect("valid"),
                want,
                "{value:?} of {total}"
            );
        }
        assert!(scaled_value(&IntOrString::String("x".into()), 1, true).is_err());
        assert!(scaled_value(&IntOrString::String("a%".into()), 1, true).is_err());
    }
}
