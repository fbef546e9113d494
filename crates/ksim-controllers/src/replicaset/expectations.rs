//! The controllers' expectations, shared by the ReplicaSet, DaemonSet and
//! Job controllers (upstream's
//! `UIDTrackingControllerExpectations`): after a sync creates or deletes
//! pods, the next syncs of that owner leave its replicas alone until
//! the pod cache has observed those creations and deletions (or the
//! expectations expire), so a lagging cache never causes extra pods.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use ksim_runtime::clock::Instant;

/// How long expectations hold before a sync acts anyway (upstream's
/// `ExpectationsTimeout`).
pub(crate) const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// A namespaced pod's key.
pub(crate) type PodKey = (String, String);

#[derive(Debug)]
struct Pending {
    adds: i64,
    deletions: HashSet<PodKey>,
    set_at: Instant,
}

/// The creations and deletions each ReplicaSet (by uid) still waits for.
#[derive(Debug, Default)]
pub(crate) struct Expectations {
    by_owner: Mutex<HashMap<String, Pending>>,
}

impl Expectations {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Pending>) -> T) -> T {
        let mut map = self
            .by_owner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut map)
    }

    /// Whether the owner's last creations and deletions were all observed
    /// (or expired), so its replicas may be managed again.
    pub(crate) fn satisfied(&self, owner_uid: &str, now: Instant) -> bool {
        self.with(|map| match map.get(owner_uid) {
            None => true,
            Some(p) => {
                (p.adds <= 0 && p.deletions.is_empty())
                    || now.saturating_duration_since(p.set_at) > EXPECTATIONS_TIMEOUT
            }
        })
    }

    /// The owner is about to create `count` pods.
    pub(crate) fn expect_creations(&self, owner_uid: &str, count: usize, now: Instant) {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        self.with(|map| {
            map.insert(
                owner_uid.to_string(),
                Pending {
                    adds: count,
                    deletions: HashSet::new(),
                    set_at: now,
                },
            );
        });
    }

    /// The owner is about to delete these pods.
    pub(crate) fn expect_deletions(&self, owner_uid: &str, pods: HashSet<PodKey>, now: Instant) {
        self.with(|map| {
            map.insert(
                owner_uid.to_string(),
                Pending {
                    adds: 0,
                    deletions: pods,
                    set_at: now,
                },
            );
        });
    }

    /// The owner is about to create `adds` pods and delete `deletions`
    /// (both at once, as upstream's `SetExpectations`).
    pub(crate) fn expect(
        &self,
        owner_uid: &str,
        adds: usize,
        deletions: HashSet<PodKey>,
        now: Instant,
    ) {
        let adds = i64::try_from(adds).unwrap_or(i64::MAX);
        self.with(|map| {
            map.insert(
                owner_uid.to_string(),
                Pending {
                    adds,
                    deletions,
                    set_at: now,
                },
            );
        });
    }

    /// A pod of the owner appeared in the cache (or a creation will never
    /// happen: `count` skipped creations).
    pub(crate) fn creations_observed(&self, owner_uid: &str, count: usize) {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        self.with(|map| {
            if let Some(p) = map.get_mut(owner_uid) {
                p.adds = p.adds.saturating_sub(count);
            }
        });
    }

    /// A pod of the owner left the cache or got a deletionTimestamp (or its
    /// deletion failed).
    pub(crate) fn deletion_observed(&self, owner_uid: &str, pod: &PodKey) {
        self.with(|map| {
            if let Some(p) = map.get_mut(owner_uid) {
                p.deletions.remove(pod);
            }
        });
    }

    /// The owner is gone: forget what it waited for.
    pub(crate) fn forget(&self, owner_uid: &str) {
        self.with(|map| {
            map.remove(owner_uid);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> PodKey {
        ("ns".to_string(), name.to_string())
    }

    #[test]
    fn creations_hold_syncs_until_every_pod_is_observed() {
        let expectations = Expectations::default();
        let now = Instant::default();
        assert!(expectations.satisfied("rs", now), "nothing expected yet");
        expectations.expect_creations("rs", 3, now);
        assert!(!expectations.satisfied("rs", now));
        expectations.creations_observed("rs", 2);
        assert!(!expectations.satisfied("rs", now));
        expectations.creations_observed("other", 1);
        assert!(
            !expectations.satisfied("rs", now),
            "other owners do not count"
        );
        expectations.creations_observed("rs", 1);
        assert!(expectations.satisfied("rs", now));
    }

    #[test]
    fn deletions_are_observed_per_pod() {
        let expectations = Expectations::default();
        let now = Instant::default();
        expectations.expect_deletions("rs", [key("a"), key("b")].into(), now);
        expectations.deletion_observed("rs", &key("a"));
        expectations.deletion_observed("rs", &key("a"));
        assert!(!expectations.satisfied("rs", now), "b is still pending");
        expectations.deletion_observed("rs", &key("b"));
        assert!(expectations.satisfied("rs", now));
    }

    #[test]
    fn expectations_expire_and_can_be_forgotten() {
        let expectations = Expectations::default();
        let now = Instant::default();
        expectations.expect_creations("rs", 5, now);
        assert!(!expectations.satisfied("rs", now + Duration::from_secs(60)));
        assert!(expectations.satisfied("rs", now + EXPECTATIONS_TIMEOUT + Duration::from_secs(1)));
        expectations.forget("rs");
        assert!(expectations.satisfied("rs", now));
    }
}
