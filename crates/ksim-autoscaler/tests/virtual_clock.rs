//! The autoscaler on a virtual clock, with the kubelet simulator and an
//! in-process API server on the same clock: the nodes a group starts with
//! boot for the boot delay, and the empty ones are scaled down exactly at the
//! first scan once they have been unneeded for the unneeded time.

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use ksim_autoscaler::{Autoscaler, AutoscalerOptions};
use ksim_kubelet::{KubeletOptions, KubeletSimulator};
use ksim_runtime::clock::Random;
use ksim_testutils::in_process::{InProcessCluster, start_time};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const TEMPLATES: &str = r#"apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: workers-template
    annotations:
      cluster-autoscaler.kwok.nodegroup/name: workers
      cluster-autoscaler.kwok.nodegroup/min-count: "1"
      cluster-autoscaler.kwok.nodegroup/max-count: "5"
      cluster-autoscaler.kwok.nodegroup/desired-count: "3"
    labels:
      kwok-nodegroup: workers
  status:
    allocatable: {cpu: "2", memory: 8Gi, pods: "110"}
    capacity: {cpu: "2", memory: 8Gi, pods: "110"}
"#;

const CONFIG: &str = r#"apiVersion: v1alpha1
readNodesFrom: configmap
nodegroups:
  fromNodeLabelKey: kwok-nodegroup
configmap:
  name: kwok-provider-templates
  key: templates
"#;

async fn config_map(client: &kube::Client, name: &str, key: &str, text: &str) {
    let map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "kube-system"},
        "data": {key: text},
    }))
    .expect("valid ConfigMap");
    Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .create(&PostParams::default(), &map)
        .await
        .expect("ConfigMap created");
}

/// The group's nodes, and how many of them are Ready.
async fn workers(client: &kube::Client) -> (usize, usize) {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default().labels("kwok-nodegroup=workers"))
        .await
        .expect("nodes listed")
        .items;
    let ready = nodes
        .iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count();
    (nodes.len(), ready)
}

#[tokio::test(flavor = "current_thread")]
async fn empty_nodes_go_once_unneeded_for_the_unneeded_time() {
    let mut cluster = InProcessCluster::virtual_with(Random::seeded(11));
    let client = cluster.client.clone();
    let clock = cluster.clock.clone();
    config_map(&client, "kwok-provider-templates", "templates", TEMPLATES).await;
    config_map(&client, "kwok-provider-config", "config", CONFIG).await;
    let kubelet = KubeletSimulator::new(
        cluster.new_client(),
        KubeletOptions {
            lease_duration_seconds: 0,
            clock: clock.clone(),
            ..Default::default()
        },
    );
    cluster.spawn(async move {
        if let Err(error) = kubelet.run().await {
            panic!("the kubelet simulator stopped: {error}");
        }
    });
    cluster.settle().await;
    let options = AutoscalerOptions::default();
    let autoscaler = Autoscaler::with_clock(cluster.new_client(), options.clone(), clock.clone());
    cluster.spawn(autoscaler.run());

    // The first scan makes the desired three nodes, which boot for 5 s.
    cluster.settle().await;
    assert_eq!(workers(&client).await, (3, 0));
    clock
        .advance(options.node_boot_delay)
        .await
        .expect("advances");
    assert_eq!(workers(&client).await, (3, 3));

    // The scan at 10 s finds them empty (unneeded); the scan at 610 s, the
    // first one 600 s later, removes two (the group's minimum is 1).
    let unneeded_at = start_time() + options.scan_interval;
    let due = unneeded_at + options.scale_down_unneeded_time;
    cluster
        .advance_to(due - chrono::TimeDelta::seconds(1))
        .await;
    assert_eq!(
        workers(&client).await,
        (3, 3),
        "not before the unneeded time"
    );
    cluster.advance_to(due).await;
    assert_eq!(workers(&client).await, (1, 1), "scaled down at {due}");
}
