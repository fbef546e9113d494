//! Node leases: every managed node holds a Lease named after it in
//! `kube-node-lease`, owned by the Node, renewed at a quarter of its duration
//! with a little jitter (as the kubelet's lease controller does). Renewals are
//! deadlines on the cluster's clock and the jitter comes from its seeded random
//! source. A stopped node's lease is not renewed (see
//! [`super::KUBELET_ANNOTATION`]). A node's first renewal is a create when
//! the node is new (added while the simulator watches), but a patch when
//! the node was listed: over a restored or running cluster its lease most
//! likely exists, and creating each first would cost a refused create per
//! node; the lease is created only if the patch finds none.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use serde_json::{Value, json};

use super::api;
use super::engine::{Engine, LeaseStart};
use super::rng::ClockRng;
use crate::error::KubeletError;
use crate::stage::PatchType;

/// Namespace of node leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// Maximum extra fraction added to the renew interval.
const JITTER_FACTOR: f64 = 0.04;
/// Retry delay after a failed renewal.
const RETRY: Duration = Duration::from_secs(1);
/// Renewals fall due on multiples of this tick (counted from the clock's start), so the
/// leases due in one tick are renewed in one batch, not one timer wake-up each.
const RENEW_TICK: Duration = Duration::from_millis(100);
/// The tick on a virtual clock: every distinct deadline is a step the clock settles
/// after, so renewals are batched by the second. There the jitter is left out (10 to
/// 10.4 s would always round up to 11 s): a renewal comes on the first whole second
/// at least a quarter of the lease's duration after the last one, so every 10 s once
/// on whole seconds, as upstream's renewals without their jitter.
const VIRTUAL_RENEW_TICK: Duration = Duration::from_secs(1);

/// `delay` stretched (by less than one `tick`) so that it ends on a tick of a clock
/// whose origin is `elapsed` ago.
pub fn on_tick(delay: Duration, elapsed: Duration, tick: Duration) -> Duration {
    let tick = tick.as_nanos().max(1);
    let end = (elapsed + delay).as_nanos().div_ceil(tick) * tick;
    let stretched = end.saturating_sub(elapsed.as_nanos());
    Duration::from_nanos(u64::try_from(stretched).unwrap_or(u64::MAX))
}

/// The renew interval of a lease of `duration_seconds`: a quarter of it, plus up to 4 %.
pub fn renew_interval(duration_seconds: i32, rng: &mut impl Rng) -> Duration {
    base_renew_interval(duration_seconds).mul_f64(1.0 + rng.random_range(0.0..JITTER_FACTOR))
}

/// A quarter of a lease's duration (upstream's renew interval before jitter).
fn base_renew_interval(duration_seconds: i32) -> Duration {
    Duration::from_secs_f64(f64::from(duration_seconds.max(1)) / 4.0)
}

/// When a lease renewed `elapsed` after the clock's start is renewed next: on the
/// real clock after the jittered interval, stretched to the next 100 ms tick; on a
/// virtual clock on the first whole second a quarter of the duration later (see
/// [`VIRTUAL_RENEW_TICK`]).
fn next_renewal(
    duration_seconds: i32,
    elapsed: Duration,
    virtual_clock: bool,
    rng: &mut impl Rng,
) -> Duration {
    if virtual_clock {
        on_tick(
            base_renew_interval(duration_seconds),
            elapsed,
            VIRTUAL_RENEW_TICK,
        )
    } else {
        on_tick(renew_interval(duration_seconds, rng), elapsed, RENEW_TICK)
    }
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

/// The merge patch that renews node `name`'s lease at `now`, as bytes (no JSON tree:
/// this is the simulator's most frequent request).
pub fn renew_patch(name: &str, duration_seconds: i32, now: &str) -> Vec<u8> {
    let holder = serde_json::to_string(name).unwrap_or_else(|_| "\"\"".to_owned());
    let now = serde_json::to_string(now).unwrap_or_else(|_| "\"\"".to_owned());
    format!(
        r#"{{"spec":{{"holderIdentity":{holder},"leaseDurationSeconds":{duration_seconds},"renewTime":{now}}}}}"#
    )
    .into_bytes()
}

/// Whether the simulator still manages node `name` with UID `uid`.
fn still_managed(engine: &Engine, name: &str, uid: &str) -> bool {
    engine
        .network
        .nodes
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(name)
        .is_some_and(|facts| facts.uid == uid)
}

/// Whether node `name` with UID `uid` still exists on the server: the watch may not
/// have told the simulator yet that it is gone (and its lease with it).
async fn node_exists(engine: &Engine, name: &str, uid: &str) -> Result<bool, KubeletError> {
    match api::get(&engine.client, &format!("/api/v1/nodes/{name}")).await {
        Ok(node) => Ok(node.pointer("/metadata/uid").and_then(Value::as_str) == Some(uid)),
        Err(e) if api::is_not_found(&e) => Ok(false),
        Err(e) => Err(KubeletError::api(format!("get node {name}"), e)),
    }
}

/// Renews (or creates) node `name`'s lease once, as it starts (see [`LeaseStart`]):
/// the lease of a node new to the simulator is created (and renewed if it exists
/// already); that of a node seen in a list (the simulator started over a running
/// or restored cluster) is renewed, and created if missing; later, a missing lease
/// is created again only while the node is still managed and still exists with
/// the same UID: the lease of a deleted node (removed by the garbage collector
/// through its ownerReference) is never recreated.
pub async fn renew(engine: &Engine, name: &str, uid: &str) -> Result<(), KubeletError> {
    let duration = engine.options.lease_duration_seconds;
    let now = micro_time(engine.options.clock.now());
    let start = engine
        .lease_starts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(name)
        .copied();
    let renewed = match start {
        Some(LeaseStart::Held) => renew_existing(engine, name, uid, duration, &now, true).await?,
        // The node was just listed: it exists (no need to ask the server).
        Some(LeaseStart::Listed) => {
            renew_existing(engine, name, uid, duration, &now, false).await?
        }
        None => match create(engine, name, uid, duration, &now).await {
            Ok(()) => true,
            Err(e) if api::is_conflict(&e) => {
                renew_existing(engine, name, uid, duration, &now, true).await?
            }
            Err(e) => return Err(KubeletError::api(format!("create lease of node {name}"), e)),
        },
    };
    if renewed && engine.network.manages(name) {
        engine
            .lease_starts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned(), LeaseStart::Held);
    }
    Ok(())
}

async fn create(
    engine: &Engine,
    name: &str,
    uid: &str,
    duration: i32,
    now: &str,
) -> Result<(), kube::Error> {
    let collection =
        format!("/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases");
    let body = new_lease(name, uid, duration, now);
    api::create(&engine.client, &collection, &body)
        .await
        .map(drop)
}

/// Patches the lease's renewTime; on 404 creates it (again) if the node is still
/// managed and, when `verify_node`, still exists on the server. Whether the node
/// holds its lease afterwards.
async fn renew_existing(
    engine: &Engine,
    name: &str,
    uid: &str,
    duration: i32,
    now: &str,
    verify_node: bool,
) -> Result<bool, KubeletError> {
    let body = renew_patch(name, duration, now);
    match api::patch_discarding(&engine.client, &lease_path(name), PatchType::Merge, body).await {
        Ok(()) => Ok(true),
        Err(e) if api::is_not_found(&e) => {
            if !still_managed(engine, name, uid)
                || (verify_node && !node_exists(engine, name, uid).await?)
            {
                return Ok(false);
            }
            match create(engine, name, uid, duration, now).await {
                Ok(()) => Ok(true),
                Err(e) if api::is_conflict(&e) => Ok(true),
                Err(e) => Err(KubeletError::api(format!("create lease of node {name}"), e)),
            }
        }
        Err(e) => Err(KubeletError::api(format!("renew lease of node {name}"), e)),
    }
}

/// Renews leases of managed nodes as they fall due, until the queue shuts down.
pub async fn renew_leases(engine: Arc<Engine>) {
    let clock = engine.options.clock.clone();
    while let Some(name) = engine.leases.get().await {
        // A stopped node's lease is left to expire.
        let uid = engine
            .network
            .nodes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&name)
            .filter(|facts| !facts.stopped)
            .map(|facts| facts.uid.clone());
        let next = match uid {
            None => None,
            Some(uid) => match renew(&engine, &name, &uid).await {
                Ok(()) => Some(next_renewal(
                    engine.options.lease_duration_seconds,
                    clock
                        .instant()
                        .saturating_duration_since(ksim_runtime::clock::Instant::default()),
                    clock.is_virtual(),
                    &mut ClockRng(&clock.random().keyed(&format!("lease:{name}"))),
                )),
                Err(error) => {
                    tracing::warn!(node = %name, %error, "lease not renewed; retrying");
                    Some(RETRY)
                }
            },
        };
        engine.leases.done(&name);
        // A node deleted (or stopped) meanwhile is forgotten: its lease is renewed
        // no more.
        if let Some(next) = next
            && engine.network.runs(&name)
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
    fn renewals_are_stretched_to_the_next_tick() {
        let ms = Duration::from_millis;
        let cases = [
            (ms(10_000), ms(0), ms(10_000)),
            (ms(10_000), ms(30), ms(10_070)),
            (ms(10_250), ms(1_000), ms(10_300)),
            (ms(10_001), ms(0), ms(10_100)),
            (ms(0), ms(50), ms(50)),
        ];
        for (delay, elapsed, want) in cases {
            let got = on_tick(delay, elapsed, RENEW_TICK);
            assert_eq!(got, want, "{delay:?} after {elapsed:?}");
            assert!(got >= delay && got < delay + RENEW_TICK);
        }
        let s = Duration::from_secs;
        assert_eq!(on_tick(ms(10_200), ms(0), s(1)), s(11));
        assert_eq!(on_tick(ms(10_000), ms(3_000), s(1)), s(10));
    }

    #[test]
    fn virtual_renewals_come_every_ten_seconds_on_whole_seconds() {
        let mut rng = StdRng::seed_from_u64(7);
        let ms = Duration::from_millis;
        let s = Duration::from_secs;
        // Renewed on a whole second: exactly a quarter of 40 s later.
        for at in [0, 11, 3_600] {
            assert_eq!(next_renewal(40, s(at), true, &mut rng), s(10));
        }
        // Renewed between seconds: on the first whole second 10 s later.
        assert_eq!(next_renewal(40, ms(2_300), true, &mut rng), ms(10_700));
        // The real clock keeps the jitter.
        let real = next_renewal(40, s(0), false, &mut rng);
        assert!(real >= s(10) && real <= ms(10_400), "{real:?}");
    }

    #[test]
    fn renew_patch_sets_holder_duration_and_time() {
        let patch: Value =
            serde_json::from_slice(&renew_patch("n\"1", 40, "2024-01-02T03:04:05.000000Z"))
                .expect("valid JSON");
        assert_eq!(
            patch,
            json!({"spec": {
                "holderIdentity": "n\"1",
                "leaseDurationSeconds": 40,
                "renewTime": "2024-01-02T03:04:05.000000Z",
            }})
        );
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
