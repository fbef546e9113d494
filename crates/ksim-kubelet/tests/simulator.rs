//! The kubelet simulator against an in-process ksim API server: nodes become
//! Ready and hold renewed leases, bound pods run with IPs from their node's
//! CIDR and are removed when deleted, and Stages (custom, late) take effect.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use ksim_kubelet::simulator::{create_stage, ensure_stage_crd};
use ksim_kubelet::stages::{StageSet, parse_stage};
use ksim_kubelet::{KubeletOptions, KubeletSimulator, NodeSelection};
use ksim_testutils::builders;
use ksim_testutils::in_process::{InProcessCluster, eventually};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// ksim-testutils' in-process cluster, with the simulator spawned on it.
type Cluster = InProcessCluster;

fn options() -> KubeletOptions {
    KubeletOptions {
        lease_duration_seconds: 2,
        ..Default::default()
    }
}

/// Runs the simulator on `cluster` with `client` until the cluster is dropped.
fn spawn_simulator(cluster: &mut Cluster, client: kube::Client, options: KubeletOptions) {
    let simulator = KubeletSimulator::new(client, options);
    cluster.spawn(async move {
        if let Err(error) = simulator.run().await {
            panic!("simulator failed: {error}");
        }
    });
}

/// Starts a server and the simulator; `stages`, when given, are created before the
/// simulator starts (so the default stages are not installed).
async fn start(stages: Option<Vec<&str>>) -> Cluster {
    let mut cluster = InProcessCluster::new();
    let client = cluster.client.clone();
    if let Some(stages) = stages {
        ensure_stage_crd(&client).await.expect("CRD installed");
        for text in stages {
            let stage = parse_stage(text).expect("stage parses");
            assert!(create_stage(&client, &stage).await.expect("stage created"));
        }
    }
    spawn_simulator(&mut cluster, client, options());
    cluster
}

fn default_stage(name: &str) -> &'static str {
    StageSet::Default
        .files()
        .iter()
        .find(|(file, _)| file.strip_suffix(".yaml") == Some(name))
        .map(|(_, text)| *text)
        .expect("shipped stage")
}

async fn create_node(cluster: &Cluster, name: &str, cidr: &str, ip: &str) -> Node {
    let created = submit_node(cluster, name, "fake", cidr, ip).await;
    let nodes = Api::<Node>::all(cluster.client.clone());
    eventually("node Ready with its address", || async {
        let node = nodes.get(name).await.ok().filter(is_ready)?;
        let addresses = node.status?.addresses?;
        addresses
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == ip)
            .then_some(())
    })
    .await;
    created
}

/// Creates a node with annotation `kwok.x-k8s.io/node: <fake>` and the given CIDR and address.
async fn submit_node(cluster: &Cluster, name: &str, fake: &str, cidr: &str, ip: &str) -> Node {
    let node = builders::node(name)
        .annotation("kwok.x-k8s.io/node", fake)
        .pod_cidr(cidr)
        .address("InternalIP", ip);
    cluster.create_node(&node.obj()).await
}

fn pod(name: &str, node: &str, finalizers: &[&str]) -> Pod {
    let mut pod = builders::pod(name).image("nginx").node(node);
    for finalizer in finalizers {
        pod = pod.finalizer(finalizer);
    }
    pod.obj()
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

async fn running_pod(pods: &Api<Pod>, name: &str) -> Pod {
    eventually(&format!("pod {name} Running"), || async {
        pods.get(name)
            .await
            .ok()
            .filter(|p| phase(p) == Some("Running"))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_becomes_ready_and_its_lease_is_renewed() {
    let cluster = start(None).await;
    let created = create_node(&cluster, "node-a", "10.0.7.0/24", "10.128.0.17").await;
    let nodes = Api::<Node>::all(cluster.client.clone());
    let node = eventually("node Ready", || async {
        nodes.get("node-a").await.ok().filter(is_ready)
    })
    .await;
    let info = node
        .status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .expect("nodeInfo");
    assert!(
        info.kubelet_version.starts_with("ksim-v"),
        "{}",
        info.kubelet_version
    );

    let leases = Api::<Lease>::namespaced(cluster.client.clone(), "kube-node-lease");
    let lease = eventually("lease created", || async {
        leases.get("node-a").await.ok()
    })
    .await;
    let owner = &lease.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!(owner.kind, "Node");
    assert_eq!(Some(&owner.uid), created.metadata.uid.as_ref());
    let spec = lease.spec.expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("node-a"));
    assert_eq!(spec.lease_duration_seconds, Some(2));
    let first = spec.renew_time.expect("renewed");
    eventually("lease renewed", || async {
        let renewed = leases.get("node-a").await.ok()?.spec?.renew_time?;
        (renewed != first).then_some(())
    })
    .await;
}

/// Waits until `name`'s lease has been renewed `times` more times (each a new renewTime).
async fn lease_renewals(leases: &Api<Lease>, name: &str, times: usize) {
    let renew_time = || async { leases.get(name).await.ok().and_then(|l| l.spec?.renew_time) };
    let mut last = eventually("lease exists", || async { renew_time().await }).await;
    for _ in 0..times {
        last = eventually("lease renewed", || async {
            renew_time().await.filter(|t| *t != last)
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_nodes_lease_is_neither_renewed_nor_recreated() {
    let cluster = start(None).await;
    create_node(&cluster, "node-gone", "10.0.11.0/24", "10.128.0.21").await;
    create_node(&cluster, "node-kept", "10.0.12.0/24", "10.128.0.22").await;
    let leases = Api::<Lease>::namespaced(cluster.client.clone(), "kube-node-lease");
    lease_renewals(&leases, "node-gone", 1).await;

    let nodes = Api::<Node>::all(cluster.client.clone());
    nodes
        .delete("node-gone", &DeleteParams::default())
        .await
        .expect("node deleted");
    // What the garbage collector does in a full cluster (the Lease is owned by the Node).
    leases
        .delete("node-gone", &DeleteParams::default())
        .await
        .expect("lease deleted");
    // Several renewal rounds of the other node later, the lease is still gone.
    lease_renewals(&leases, "node-kept", 3).await;
    assert!(
        leases.get_opt("node-gone").await.expect("get").is_none(),
        "the lease of a deleted node was recreated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_pod_runs_with_an_ip_from_its_nodes_cidr_and_is_removed_when_deleted() {
    let cluster = start(None).await;
    create_node(&cluster, "node-b", "10.0.9.0/24", "10.128.0.19").await;
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    pods.create(&PostParams::default(), &pod("web", "node-b", &[]))
        .await
        .expect("pod created");
    let running = running_pod(&pods, "web").await;
    let status = running.status.expect("status");
    let ip = status.pod_ip.expect("pod IP");
    assert!(ip.starts_with("10.0.9."), "{ip}");
    assert_eq!(status.host_ip.as_deref(), Some("10.128.0.19"));
    assert!(status.start_time.is_some());
    let containers = status.container_statuses.expect("container statuses");
    assert!(containers[0].ready);

    pods.delete("web", &DeleteParams::default())
        .await
        .expect("deleted");
    eventually("pod gone", || async {
        pods.get("web").await.err().map(|_| ())
    })
    .await;

    // The address goes back to the pool and the next pod may get it.
    pods.create(&PostParams::default(), &pod("next", "node-b", &[]))
        .await
        .expect("pod created");
    let next = running_pod(&pods, "next").await;
    assert_eq!(next.status.and_then(|s| s.pod_ip), Some(ip));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_runs_once_it_is_bound_and_not_before() {
    // The simulator watches bound pods only: a pod entering that selection
    // through its binding must still be seen and run.
    let cluster = start(None).await;
    create_node(&cluster, "node-late", "10.0.8.0/24", "10.128.0.18").await;
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    pods.create(&PostParams::default(), &pod("unbound", "", &[]))
        .await
        .expect("pod created");
    // A bound pod created after it runs first, so the unbound one was seen
    // by then and left alone.
    pods.create(&PostParams::default(), &pod("marker", "node-late", &[]))
        .await
        .expect("pod created");
    running_pod(&pods, "marker").await;
    let unbound = pods.get("unbound").await.expect("pod");
    assert_eq!(phase(&unbound), Some("Pending"));
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "unbound"},
        "target": {"kind": "Node", "name": "node-late"},
    });
    pods.create_subresource::<_, serde_json::Value>(
        "binding",
        "unbound",
        &PostParams::default(),
        &binding,
    )
    .await
    .expect("bound");
    let running = running_pod(&pods, "unbound").await;
    let ip = running.status.and_then(|s| s.pod_ip).expect("pod IP");
    assert!(ip.starts_with("10.0.8."), "{ip}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminating_pod_waits_for_a_foreign_finalizer() {
    let cluster = start(None).await;
    create_node(&cluster, "node-c", "10.0.10.0/24", "10.128.0.20").await;
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &pod("kept", "node-c", &["example.com/keep"]),
    )
    .await
    .expect("pod created");
    running_pod(&pods, "kept").await;
    pods.delete("kept", &DeleteParams::default())
        .await
        .expect("deleted");
    // A pod created after the deletion runs: the simulator has seen the
    // deletion too (one pod watch, in order).
    pods.create(&PostParams::default(), &pod("later", "node-c", &[]))
        .await
        .expect("pod created");
    running_pod(&pods, "later").await;
    let terminating = pods.get("kept").await.expect("still there");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(
        terminating.metadata.finalizers.as_deref(),
        Some(&["example.com/keep".to_owned()][..])
    );
    pods.patch(
        "kept",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("finalizer removed");
    eventually("pod gone", || async {
        pods.get("kept").await.err().map(|_| ())
    })
    .await;
}

/// The shipped pod-ready stage restricted to pods labelled `marker=yes`: a
/// pod the simulator must have looked at, to tell when it has seen the
/// pods created before it.
fn marker_runs() -> String {
    let mut stage = parse_stage(default_stage("pod-ready")).expect("parses");
    stage.metadata.name = "pod-marker-ready".to_string();
    stage
        .spec
        .selector
        .get_or_insert_with(Default::default)
        .match_labels = Some([("marker".to_string(), "yes".to_string())].into());
    serde_json::to_string(&stage).expect("a stage serializes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_applied_after_pods_exist_takes_effect_at_once() {
    let marker_runs = marker_runs();
    let cluster = start(Some(vec![default_stage("node-initialize"), &marker_runs])).await;
    create_node(&cluster, "node-e", "10.0.12.0/24", "10.128.0.22").await;
    let nodes = Api::<Node>::all(cluster.client.clone());
    eventually("node Ready", || async {
        nodes.get("node-e").await.ok().filter(is_ready)
    })
    .await;
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    pods.create(&PostParams::default(), &pod("waiting", "node-e", &[]))
        .await
        .expect("pod created");
    // A later pod on the same node that a stage does run: once it runs,
    // the simulator has seen "waiting" too and left it alone.
    let marker = builders::pod("marker")
        .image("nginx")
        .node("node-e")
        .label("marker", "yes");
    pods.create(&PostParams::default(), &marker.obj())
        .await
        .expect("pod created");
    running_pod(&pods, "marker").await;
    let pending = pods.get("waiting").await.expect("pod exists");
    assert_eq!(phase(&pending), Some("Pending"), "no pod stage yet");
    let stage = parse_stage(default_stage("pod-ready")).expect("parses");
    assert!(
        create_stage(&cluster.client, &stage)
            .await
            .expect("created")
    );
    let running = running_pod(&pods, "waiting").await;
    assert!(running.status.and_then(|s| s.pod_ip).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stand_alone_over_http_manages_only_selected_nodes() {
    // A client over HTTP on a loopback port, as the stand-alone simulator
    // talks to any cluster.
    let mut cluster = InProcessCluster::new();
    let client = cluster.http_client().await;
    let options = KubeletOptions {
        manage: NodeSelection::annotation("kwok.x-k8s.io/node=fake").expect("valid"),
        ..options()
    };
    spawn_simulator(&mut cluster, client.clone(), options);
    // The CRD and default stages are installed by the simulator; wait for them.
    eventually("default stages", || async {
        let list = client
            .request::<serde_json::Value>(
                http::Request::get("/apis/kwok.x-k8s.io/v1alpha1/stages")
                    .body(Vec::new())
                    .expect("request"),
            )
            .await
            .ok()?;
        (list["items"].as_array()?.len() == 5).then_some(())
    })
    .await;
    submit_node(&cluster, "other", "real", "10.0.2.0/24", "10.128.0.4").await;
    create_node(&cluster, "fake-0", "10.0.1.0/24", "10.128.0.3").await;
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("on-fake", "fake-0", &[]))
        .await
        .expect("pod created");
    pods.create(&PostParams::default(), &pod("on-other", "other", &[]))
        .await
        .expect("pod created");
    running_pod(&pods, "on-fake").await;
    // A pod created after on-other runs: the simulator has seen on-other too
    // (one pod watch, in order).
    pods.create(&PostParams::default(), &pod("later", "fake-0", &[]))
        .await
        .expect("pod created");
    running_pod(&pods, "later").await;
    let other = Api::<Node>::all(client.clone())
        .get("other")
        .await
        .expect("node");
    assert!(!is_ready(&other), "an unselected node is left alone");
    let pod = pods.get("on-other").await.expect("pod");
    assert_eq!(
        phase(&pod),
        Some("Pending"),
        "pods of unselected nodes are left alone"
    );
    let leases = Api::<Lease>::namespaced(client.clone(), "kube-node-lease");
    assert!(leases.get("fake-0").await.is_ok());
    assert!(leases.get("other").await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_pods_succeed_and_host_network_pods_get_the_node_ip() {
    let cluster = start(None).await;
    create_node(&cluster, "node-f", "10.0.13.0/24", "10.128.0.23").await;
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    let job_pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "job-pod", "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "job-uid",
        }]},
        "spec": {"nodeName": "node-f", "restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .expect("valid pod");
    pods.create(&PostParams::default(), &job_pod)
        .await
        .expect("pod created");
    let done = eventually("job pod Succeeded", || async {
        pods.get("job-pod")
            .await
            .ok()
            .filter(|p| phase(p) == Some("Succeeded"))
    })
    .await;
    let terminated = done
        .status
        .and_then(|s| s.container_statuses)
        .expect("statuses")[0]
        .state
        .clone()
        .and_then(|s| s.terminated)
        .expect("terminated");
    assert_eq!(terminated.exit_code, 0);
    assert_eq!(terminated.reason.as_deref(), Some("Completed"));

    let mut host = pod("host", "node-f", &[]);
    host.spec.as_mut().expect("spec").host_network = Some(true);
    pods.create(&PostParams::default(), &host)
        .await
        .expect("pod created");
    let running = running_pod(&pods, "host").await;
    assert_eq!(
        running.status.and_then(|s| s.pod_ip).as_deref(),
        Some("10.128.0.23")
    );
}

const EVENT_STAGE: &str = r#"
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready-with-event
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.status.phase'
      operator: In
      values: [Pending]
  next:
    event:
      type: Normal
      reason: Started
      message: Started by ksim
    finalizers:
      add:
      - value: ksim.test/added
    statusTemplate: |
      phase: Running
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_records_its_event_and_adds_finalizers() {
    let cluster = start(Some(vec![default_stage("node-initialize"), EVENT_STAGE])).await;
    create_node(&cluster, "node-g", "10.0.14.0/24", "10.128.0.24").await;
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    pods.create(&PostParams::default(), &pod("evented", "node-g", &[]))
        .await
        .expect("pod created");
    let running = running_pod(&pods, "evented").await;
    assert_eq!(
        running.metadata.finalizers.as_deref(),
        Some(&["ksim.test/added".to_owned()][..])
    );
    let events =
        Api::<k8s_openapi::api::core::v1::Event>::namespaced(cluster.client.clone(), "default");
    let event = eventually("event recorded", || async {
        events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.involved_object.name.as_deref() == Some("evented"))
    })
    .await;
    assert_eq!(event.reason.as_deref(), Some("Started"));
    assert_eq!(event.message.as_deref(), Some("Started by ksim"));
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(event.involved_object.kind.as_deref(), Some("Pod"));
}

/// Stages created after pods were cached read fields the simulator did not
/// keep of them until then (its cache holds only the fields it and the
/// Stages read): a plain path into the spec, and a jq expression that is not
/// a plain path (it may read anything).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_stage_reading_other_fields_selects_pods_cached_before_it() {
    let marker_runs = marker_runs();
    let cluster = start(Some(vec![default_stage("node-initialize"), &marker_runs])).await;
    create_node(&cluster, "node-f", "10.0.13.0/24", "10.128.0.23").await;
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    let mut picky = pod("picky", "node-f", &[]);
    let spec = picky.spec.as_mut().expect("a spec");
    spec.scheduler_name = Some("picky-scheduler".to_string());
    let second = spec.containers[0].clone();
    spec.containers.push(k8s_openapi::api::core::v1::Container {
        name: "second".to_string(),
        ..second
    });
    pods.create(&PostParams::default(), &picky)
        .await
        .expect("pod created");
    let marker = builders::pod("marker")
        .image("nginx")
        .node("node-f")
        .label("marker", "yes");
    pods.create(&PostParams::default(), &marker.obj())
        .await
        .expect("pod created");
    running_pod(&pods, "marker").await;
    let pending = pods.get("picky").await.expect("pod exists");
    assert_eq!(phase(&pending), Some("Pending"), "no stage for it yet");
    let mut stage = serde_json::to_value(parse_stage(default_stage("pod-ready")).expect("parses"))
        .expect("a stage as JSON");
    stage["metadata"]["name"] = json!("pod-picky-ready");
    let expressions = stage["spec"]["selector"]["matchExpressions"]
        .as_array_mut()
        .expect("pod-ready has match expressions");
    expressions.push(json!({"key": ".spec.schedulerName", "operator": "In",
        "values": ["picky-scheduler"]}));
    expressions.push(json!({"key": ".spec.containers | length", "operator": "In",
        "values": ["2"]}));
    let stage = parse_stage(&stage.to_string()).expect("parses");
    assert!(
        create_stage(&cluster.client, &stage)
            .await
            .expect("created")
    );
    let running = running_pod(&pods, "picky").await;
    assert!(running.status.and_then(|s| s.pod_ip).is_some());
}
