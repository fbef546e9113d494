//! The eviction API as the evictor calls it: a policy/v1 Eviction posted
//! to `pods/<name>/eviction` with the policy's gracePeriodSeconds, made
//! synchronously from a blocking thread (`Handle::block_on`), and the
//! events.k8s.io events upstream records on evicted pods.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use tokio::runtime::Handle;

use super::podevictor::EvictionApi;
use crate::framework::EvictionRequest;

/// Who requests the evictions and reports the events (upstream's name).
pub const DESCHEDULER_NAME: &str = "sigs.k8s.io/descheduler";

/// The eviction API of a cluster. Must be used from a thread outside the
/// runtime (`spawn_blocking`), since it blocks on the requests.
pub struct KubeEvictionApi {
    client: Client,
    handle: Handle,
    grace_period_seconds: Option<i64>,
    recorder: Recorder,
}

impl KubeEvictionApi {
    /// An API over `client`, running its requests on `handle`.
    pub fn new(client: Client, handle: Handle, grace_period_seconds: Option<i64>) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: DESCHEDULER_NAME.to_string(),
                instance: None,
            },
        );
        KubeEvictionApi {
            client,
            handle,
            grace_period_seconds,
            recorder,
        }
    }
}

impl EvictionApi for KubeEvictionApi {
    fn evict(&self, pod: &Pod, profile: &str, request: &EvictionRequest<'_>) -> Result<(), String> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let eviction = Eviction {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                annotations: Some(BTreeMap::from([
                    (
                        "reason".to_string(),
                        format!(
                            "triggered by {}/{}: {}",
                            profile, request.strategy, request.reason
                        ),
                    ),
                    ("requested-by".to_string(), DESCHEDULER_NAME.to_string()),
                ])),
                ..Default::default()
            },
            delete_options: Some(DeleteOptions {
                grace_period_seconds: self.grace_period_seconds,
                ..Default::default()
            }),
        };
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let result = self
            .handle
            .block_on(api.create_subresource::<_, serde_json::Value>(
                "eviction",
                &name,
                &PostParams::default(),
                &eviction,
            ));
        match result {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 429 => Err(format!(
                "error when evicting pod (ignoring) {name:?}: {}",
                status.message
            )),
            Err(kube::Error::Api(status)) if status.code == 404 => Err(format!(
                "pod not found when evicting {name:?}: {}",
                status.message
            )),
            Err(kube::Error::Api(status)) => Err(status.message),
            Err(error) => Err(error.to_string()),
        }
    }

    fn event(&self, pod: &Pod, warning: bool, reason: &str, note: String) {
        let reference = pod.object_ref(&());
        let recorder = self.recorder.clone();
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(note),
            action: "Descheduled".to_string(),
            secondary: None,
        };
        // Recording never slows the cycle down.
        self.handle.spawn(async move {
            if let Err(error) = recorder.publish(&event, &reference).await {
                tracing::debug!(%error, "cannot record the event");
            }
        });
    }
}
