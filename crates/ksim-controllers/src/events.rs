//! Events the controllers record about the objects they act on (what
//! `kubectl describe` shows), through events.k8s.io with kube's recorder.
//! Recording never fails or slows a sync: it runs in its own task. As
//! client-go's `EventSourceObjectSpamFilter`, each object gets a burst of
//! 25 events, then one more every 5 minutes; the rest are dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ksim_runtime::clock::{Clock, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// A recorder for one controller (`replicaset-controller`, ...).
#[derive(Clone)]
pub(crate) struct Events {
    recorder: Recorder,
    clock: Clock,
    budgets: Arc<Mutex<HashMap<String, TokenBucket>>>,
}

/// Events allowed at once per object.
const BURST: f64 = 25.0;
/// One more event allowed per this long.
const REFILL: Duration = Duration::from_secs(300);

/// A token bucket (client-go's spam filter for one object).
#[derive(Debug, Clone, Copy)]
struct TokenBucket {
    tokens: f64,
    updated: Instant,
}

impl TokenBucket {
    fn full(now: Instant) -> Self {
        TokenBucket {
            tokens: BURST,
            updated: now,
        }
    }

    /// Takes a token if there is one.
    fn take(&mut self, now: Instant) -> bool {
        let refill =
            now.saturating_duration_since(self.updated).as_secs_f64() / REFILL.as_secs_f64();
        self.tokens = (self.tokens + refill).min(BURST);
        self.updated = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl Events {
    pub(crate) fn new(client: Client, controller: &str, clock: &Clock) -> Self {
        Events {
            clock: clock.clone(),
            recorder: Recorder::new(
                client,
                Reporter {
                    controller: controller.to_string(),
                    instance: None,
                },
            ),
            budgets: Arc::default(),
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
        if !self.allowed(regarding.uid.as_deref().unwrap_or_default()) {
            return;
        }
        let recorder = self.recorder.clone();
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        // A virtual cluster is not settled while an event is on its way.
        let busy = self.clock.busy();
        tokio::spawn(async move {
            let _busy = busy;
            if let Err(e) = recorder.publish(&event, &regarding).await {
                tracing::debug!(error = %e, "cannot record an event");
            }
        });
    }

    /// Whether the spam filter lets one more event about `uid` through.
    fn allowed(&self, uid: &str) -> bool {
        let now = self.clock.instant();
        let mut budgets = self
            .budgets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if budgets.len() > 10_000 {
            budgets.retain(|_, b| now.saturating_duration_since(b.updated) < REFILL * 25);
        }
        budgets
            .entry(uid.to_string())
            .or_insert_with(|| TokenBucket::full(now))
            .take(now)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_gets_a_burst_of_25_events_then_one_per_5_minutes() {
        let start = Instant::default();
        let mut bucket = TokenBucket::full(start);
        let allowed = (0..40).filter(|_| bucket.take(start)).count();
        assert_eq!(allowed, 25);
        assert!(!bucket.take(start + Duration::from_secs(60)));
        assert!(bucket.take(start + Duration::from_secs(301)));
        assert!(!bucket.take(start + Duration::from_secs(302)));
    }
}
