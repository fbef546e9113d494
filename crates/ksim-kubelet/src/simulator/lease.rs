//! Node leases: every managed node holds a Lease named after it in
//! `kube-node-lease`, owned by the Node, renewed at a quarter of its duration
//! with a little jitter (as the kubelet's lease controller does).

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use serde_json::{Value, json};

use super::api;
use super::engine::Engine;
use crate::error::KubeletError;
use crate::stage::PatchType;

/// Namespace of node leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// Maximum extra fraction added to the renew interval.
const JITTER_FACTOR: f64 = 0.04;
/// Retry delay after a failed renewal.
const RETRY: Duration = Duration::from_secs(1);

/// The renew interval of a lease of `duration_seconds`: a quarter of it, plus up to 4 %.
pub fn renew_interval(duration_seconds: i32, rng: &mut impl Rng) -> Duration {
    let base = Duration::from_secs_f64(f64::from(duration_seconds.max(1)) / 4.0);
    base.mul_f64(1.0 + rng.random_range(0.0..JITTER_FACTOR))
}

/// The path of node `name`'s lease.
pub fn lease_path(name: &str) -> String {
    format!("/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases/{name}")
}

/// A new Lease for node `name` (UID `uid`), renewed at `now` (MicroTime).
pub fn new_lease(name: &str, uid: &str, duration_seconds: i32, now: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": NODE_LEASE_NAMESPACE,
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "Node",
                "name": name,
                "uid": uid,
            }],
        },
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": duration_seconds,
            "renewTime": now,
        },
    })
}

fn micro_time(time: chrono::DateTime<chrono::Utc>) -> String {
    time.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// Renews (or creates) node `name`'s lease once.
pub async fn renew(engine: &Engine, name: &str, uid: &str) -> Result<(), KubeletError> {
    let duration = engine.options.lease_duration_seconds;
    let now = micro_time(engine.options.clock.now());
    let path = lease_path(name);
    let body = json!({"spec": {
        "holderIdentity": name,
        "leaseDurationSeconds": duration,
        "renewTime": now,
    }});
    match api::patch(&engine.client, &path, PatchType::Merge, &body, None).await {
        Ok(_) => Ok(()),
        Err(e) if api::is_not_found(&e) => {
            let collection =
                format!("/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases");
            match api::create(
                &engine.client,
                &collection,
                &new_lease(name, uid, duration, &now),
            )
            .await
            {
                Ok(_) => Ok(()),
                Err(e) => Err(KubeletError::api(format!("create lease of node {name}"), e)),
            }
        }
        Err(e) => Err(KubeletError::api(format!("renew lease of node {name}"), e)),
    }
}

/// Renews leases of managed nodes as they fall due, until the queue shuts down.
pub async fn renew_leases(engine: Arc<Engine>) {
    while let Some(name) = engine.leases.get().await {
        let uid = engine
            .network
            .nodes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&name)
            .map(|facts| facts.uid.clone());
        let next = match uid {
            None => None,
            Some(uid) => match renew(&engine, &name, &uid).await {
                Ok(()) => Some(renew_interval(
                    engine.options.lease_duration_seconds,
                    &mut rand::rng(),
                )),
                Err(error) => {
                    tracing::warn!(node = %name, %error, "lease not renewed; retrying");
                    Some(RETRY)
                }
            },
        };
        engine.leases.done(&name);
        if let Some(next) = next
            && engine.network.manages(&name)
        {
            engine.leases.add_after(name, next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn renew_interval_is_a_quarter_of_the_duration_plus_jitter() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..100 {
            let interval = renew_interval(40, &mut rng);
            assert!(interval >= Duration::from_secs(10), "{interval:?}");
            assert!(interval < Duration::from_millis(10_400), "{interval:?}");
        }
        assert!(renew_interval(0, &mut rng) >= Duration::from_millis(250));
    }

    #[test]
    fn new_lease_is_owned_by_its_node() {
        let lease = new_lease("n1", "uid-1", 40, "2024-01-02T03:04:05.000000Z");
        assert_eq!(lease["metadata"]["namespace"], NODE_LEASE_NAMESPACE);
        assert_eq!(lease["metadata"]["ownerReferences"][0]["kind"], "Node");
        assert_eq!(lease["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(lease["spec"]["holderIdentity"], "n1");
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
        assert_eq!(
            lease_path("n1"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
        );
    }
}
