//! The kubelet simulator's first lease renewals, counted at the HTTP layer:
//! started over a cluster whose nodes exist already (a restore, or a
//! simulator restarted against a running cluster), it renews a listed
//! node's lease with a patch (no create refused with 409) and creates it
//! only when the patch finds none; a node added later has its lease
//! created first (no patch refused with 404).

use http::{Method, StatusCode};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use ksim_kubelet::{KubeletOptions, KubeletSimulator};
use ksim_testutils::builders;
use ksim_testutils::in_process::{InProcessCluster, ObservedRequest, eventually};
use kube::api::{Api, PostParams};
use serde_json::json;

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
/// The renewTime of the lease saved before the simulator starts.
const SAVED_RENEW_TIME: &str = "2020-01-01T00:00:00.000000Z";

fn node(name: &str, cidr: &str) -> Node {
    builders::node(name)
        .annotation("kwok.x-k8s.io/node", "fake")
        .pod_cidr(cidr)
        .obj()
}

/// A Lease of `node` as a running kubelet left it (and a snapshot holds it).
fn saved_lease(node: &Node) -> Lease {
    let name = node.metadata.name.as_deref().expect("named");
    serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": "kube-node-lease",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                "uid": node.metadata.uid.as_deref().expect("stored")}],
        },
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 2,
            "renewTime": SAVED_RENEW_TIME},
    }))
    .expect("a valid Lease")
}

fn statuses(requests: &[ObservedRequest]) -> Vec<u16> {
    requests.iter().map(|r| r.status.as_u16()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_nodes_leases_are_patched_first_and_new_nodes_leases_created_first() {
    let mut cluster = InProcessCluster::new();
    let with_lease = cluster.create_node(&node("restored", "10.0.1.0/24")).await;
    cluster.create_node(&node("leaseless", "10.0.2.0/24")).await;
    let leases = Api::<Lease>::namespaced(cluster.client.clone(), "kube-node-lease");
    let saved = leases
        .create(&PostParams::default(), &saved_lease(&with_lease))
        .await
        .expect("lease created");

    let (client, log) = cluster.observed_client();
    let simulator = KubeletSimulator::new(
        client,
        KubeletOptions {
            lease_duration_seconds: 2,
            ..Default::default()
        },
    );
    cluster.spawn(async move {
        if let Err(error) = simulator.run().await {
            panic!("simulator failed: {error}");
        }
    });

    // The saved lease is renewed; the missing one of a listed node created.
    let saved_time = saved.spec.as_ref().and_then(|s| s.renew_time.clone());
    assert!(saved_time.is_some(), "{saved:?}");
    let renewed = eventually("the saved lease renewed", || async {
        let lease = leases.get("restored").await.ok()?;
        (lease.spec.as_ref()?.renew_time != saved_time).then_some(lease)
    })
    .await;
    assert_eq!(renewed.metadata.uid, saved.metadata.uid, "the same lease");
    assert_eq!(
        renewed.metadata.owner_references, saved.metadata.owner_references,
        "still owned by its node"
    );
    let created = eventually("the missing lease created", || async {
        leases.get("leaseless").await.ok()
    })
    .await;
    let owner = &created.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!(owner.kind, "Node");
    assert_eq!(owner.name, "leaseless");

    // A node added after the list.
    let added = cluster.create_node(&node("added", "10.0.3.0/24")).await;
    let lease = eventually("the added node's lease created", || async {
        leases.get("added").await.ok()
    })
    .await;
    assert_eq!(
        lease.metadata.owner_references.as_ref().expect("owned")[0].uid,
        added.metadata.uid.expect("stored")
    );

    // What the simulator asked: one create each for the two missing leases,
    // none refused; the saved lease only patched; the listed node's missing
    // lease patched first (404), without reading its node; the added node's
    // lease created before any patch.
    let creates = log.to(&Method::POST, LEASES);
    assert_eq!(statuses(&creates), [201, 201], "{creates:?}");
    let patched = |name: &str| statuses(&log.to(&Method::PATCH, &format!("{LEASES}/{name}")));
    let restored = patched("restored");
    assert!(
        !restored.is_empty() && restored.iter().all(|s| *s == 200),
        "{restored:?}"
    );
    assert_eq!(patched("leaseless").first(), Some(&404));
    assert!(
        patched("added").iter().all(|s| *s == 200),
        "{:?}",
        patched("added")
    );
    assert!(
        log.to(&Method::GET, "/api/v1/nodes/leaseless").is_empty(),
        "a listed node's existence is not asked"
    );
    assert!(
        log.requests()
            .iter()
            .all(|r| r.status != StatusCode::CONFLICT),
        "{:?}",
        log.requests()
    );
}
