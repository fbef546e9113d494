//! Events the controllers record about the objects they act on (what
//! `kubectl describe` shows), through events.k8s.io with kube's recorder.
//! Recording never fails or slows a sync: it runs in its own task.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// A recorder for one controller (`replicaset-controller`, ...).
#[derive(Clone)]
pub(crate) struct Events {
    recorder: Recorder,
}

impl Events {
    pub(crate) fn new(client: Client, controller: &str) -> Self {
        Events {
            recorder: Recorder::new(
                client,
                Reporter {
                    controller: controller.to_string(),
                    instance: None,
                },
            ),
        }
    }

    fn publish(
        &self,
        type_: EventType,
        regarding: ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let recorder = self.recorder.clone();
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        tokio::spawn(async move {
            if let Err(e) = recorder.publish(&event, &regarding).await {
                tracing::debug!(error = %e, "cannot record an event");
            }
        });
    }

    /// A Normal event.
    pub(crate) fn normal(
        &self,
        regarding: ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.publish(EventType::Normal, regarding, reason, action, note);
    }

    /// A Warning event.
    pub(crate) fn warning(
        &self,
        regarding: ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.publish(EventType::Warning, regarding, reason, action, note);
    }
}
