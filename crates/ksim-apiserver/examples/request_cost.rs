//! The API server's cost per request of the writes and reads the cluster's
//! components make right after a snapshot restore, in process (no sockets):
//! pods created in bulk as a restore creates them, lease renewals (merge
//! PATCH), lease creates answered 409, events.k8s.io
//! Event creates, paged lists of pods and nodes (limit=500) and node status
//! heartbeats (strategic merge PATCH of nodes/X/status).
//!
//! Each phase runs in its own never-inlined function `phase_<name>`, whose
//! inclusive instruction count callgrind gives (only the phases are
//! counted, not the setup):
//!
//! ```text
//! CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
//!     cargo build --release -p ksim-apiserver --example request_cost
//! valgrind --tool=callgrind --collect-atstart=no \
//!     --toggle-collect='*request_cost::phase_*' --callgrind-out-file=rc.cg \
//!     target/release/examples/request_cost answers.txt
//! callgrind_annotate --threshold=100 --inclusive=yes rc.cg | grep 'request_cost::phase_'
//! ```
//!
//! Divide by the phase's requests: 2,000 for `bulk_create` ([`PODS`]), 200
//! for each other write phase ([`NODES`]),
//! 20 for `list_pods` (pages of 500 of [`PODS`], [`LIST_RUNS`] times), 5 for
//! `list_nodes` (one page, [`LIST_RUNS`] times). The counts include the
//! in-process client's side (building the request, reading the body).
//!
//! Every response (status and body) is written to the file named by the
//! first argument, if any, so that two builds' answers can be compared
//! byte for byte. Wall times per request are printed too (noisy; the
//! instruction counts are the figures).

use std::io::Write;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use http::Request;
use http_body_util::BodyExt;
use ksim_apiserver::{ApiServer, BulkItem};
use ksim_clock::{Clock, Random};
use serde_json::{Value, json};
use tower::ServiceExt;

/// Nodes (and leases, events, status patches: one each per node).
const NODES: usize = 200;
/// Pods, spread over the nodes.
const PODS: usize = 2_000;
/// Times each list of all pods / all nodes is paged through.
const LIST_RUNS: usize = 5;
const USER_AGENT: &str = "ksim-bench/v0.0.0 (linux/amd64) kubernetes/v1.33.0";

fn node_name(i: usize) -> String {
    format!("node-{i:06}")
}

fn node(i: usize) -> Value {
    let name = node_name(i);
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name,
            "labels": {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux", "kubernetes.io/role": "agent",
                "node-role.kubernetes.io/agent": "", "type": "kwok",
                "kwok.x-k8s.io/kwokctl-scale": "true"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"}},
        "spec": {"podCIDR": format!("10.{}.{}.0/24", i / 256, i % 256),
            "podCIDRs": [format!("10.{}.{}.0/24", i / 256, i % 256)]},
        "status": {
            "addresses": [{"address": format!("10.128.{}.{}", (i + 2) / 256, (i + 2) % 256), "type": "InternalIP"}],
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "conditions": conditions("2026-01-01T00:00:00Z"),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"architecture": "amd64", "bootID": "", "containerRuntimeVersion": "kwok-v0.7.0",
                "kernelVersion": "", "kubeProxyVersion": "", "kubeletVersion": "kwok-v0.7.0",
                "machineID": "", "operatingSystem": "linux", "osImage": "", "systemUUID": ""},
            "phase": "Running"}
    })
}

fn conditions(heartbeat: &str) -> Value {
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"lastHeartbeatTime": heartbeat, "lastTransitionTime": "2026-01-01T00:00:00Z",
            "message": message, "reason": reason, "status": status, "type": type_})
    };
    json!([
        condition(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status"
        ),
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available"
        ),
        condition(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure"
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available"
        ),
        condition(
            "NetworkUnavailable",
            "False",
            "RouteCreated",
            "RouteController created a route"
        ),
    ])
}

fn pod(index: usize) -> BulkItem {
    let node = index % NODES;
    let ip = format!(
        "10.{}.{}.{}",
        64 + index / 65_536,
        (index / 256) % 256,
        index % 256
    );
    BulkItem {
        object: json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("app-{:03}-{index:06}", index / 1000), "namespace": "default",
                "labels": {"app": "app"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "app",
                    "uid": "6c1f4b47-4a45-4c1f-9d6b-0f3b1c1e0a01", "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"nodeName": node_name(node),
                "containers": [{"name": "app", "image": "busybox",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]},
        }),
        status: Some(
            json!({"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "hostIP": format!("10.128.{}.{}", (node + 2) / 256, (node + 2) % 256),
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"},
                {"type": "Initialized", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "app", "image": "busybox", "imageID": "", "ready": true,
                "restartCount": 0, "started": true, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}),
        ),
    }
}

fn lease(i: usize, uid: &str, now: &str) -> Value {
    let name = node_name(i);
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-node-lease",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now},
    })
}

fn renew_patch(i: usize, now: &str) -> Vec<u8> {
    format!(
        r#"{{"spec":{{"holderIdentity":"{}","leaseDurationSeconds":40,"renewTime":"{now}"}}}}"#,
        node_name(i)
    )
    .into_bytes()
}

fn event(i: usize, uid: &str) -> Vec<u8> {
    let name = node_name(i);
    serde_json::to_vec(&json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "action": "RegisteredNode", "eventTime": "2026-01-01T00:00:05.000000Z",
        "metadata": {"name": format!("{name}.{:016x}", i * 7919), "namespace": "default"},
        "note": format!("Registered Node {name} in Controller"), "reason": "RegisteredNode",
        "regarding": {"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid},
        "reportingController": "node-controller", "reportingInstance": "node-controller",
        "type": "Normal",
    }))
    .expect("an event serializes")
}

fn node_status_patch(i: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({"status": {
        "addresses": [{"address": format!("10.128.{}.{}", (i + 2) / 256, (i + 2) % 256), "type": "InternalIP"}],
        "conditions": conditions("2026-01-01T00:01:00Z"),
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}))
    .expect("a patch serializes")
}

/// Sends one request and returns its status and body.
async fn send(
    router: &Router,
    method: &str,
    uri: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, bytes::Bytes) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("accept", "application/json")
        .header("content-type", content_type)
        .header("user-agent", USER_AGENT)
        .body(Body::from(body))
        .expect("a valid request");
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    (status, body)
}

struct Bench {
    runtime: tokio::runtime::Runtime,
    router: Router,
    out: Option<std::fs::File>,
}

impl Bench {
    fn record(&mut self, phase: &str, answers: &[(u16, bytes::Bytes)]) {
        if let Some(out) = self.out.as_mut() {
            for (status, body) in answers {
                writeln!(out, "{phase} {status} {}", body.len()).expect("write");
                out.write_all(body).expect("write");
                out.write_all(b"\n").expect("write");
            }
        }
    }

    fn run<F: FnOnce(&Self) -> Vec<(u16, bytes::Bytes)>>(
        &mut self,
        phase: &str,
        requests: usize,
        f: F,
    ) {
        let start = Instant::now(); // wall-clock: a benchmark's timing
        let answers = f(self);
        let elapsed = start.elapsed();
        let statuses: std::collections::BTreeMap<u16, usize> =
            answers.iter().fold(Default::default(), |mut m, (s, _)| {
                *m.entry(*s).or_default() += 1;
                m
            });
        println!(
            "{phase}: {requests} requests, {:.1} us/request, statuses {statuses:?}",
            elapsed.as_secs_f64() * 1e6 / requests as f64
        );
        self.record(phase, &answers);
    }
}

/// The pods created as a restore creates them (the API server's bulk
/// creation, in process), one at a time: a bulk create's revisions
/// interleave across threads, and two runs' answers must be comparable
/// byte for byte (the pods are answered in full by `list_pods`).
#[inline(never)]
fn phase_bulk_create(server: &ApiServer) -> Vec<(u16, bytes::Bytes)> {
    (0..PODS)
        .map(|index| {
            let created = server.create_objects(vec![pod(index)], "ksim");
            assert!(created.iter().all(Result::is_ok), "every pod is created");
            (201, bytes::Bytes::new())
        })
        .collect()
}

#[inline(never)]
fn phase_lease_create_conflict(b: &Bench, uids: &[String]) -> Vec<(u16, bytes::Bytes)> {
    b.runtime.block_on(async {
        let mut answers = Vec::new();
        for (i, uid) in uids.iter().enumerate() {
            let body =
                serde_json::to_vec(&lease(i, uid, "2026-01-01T00:00:10.000000Z")).expect("json");
            answers.push(
                send(
                    &b.router,
                    "POST",
                    "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                    "application/json",
                    body,
                )
                .await,
            );
        }
        answers
    })
}

#[inline(never)]
fn phase_lease_patch(b: &Bench, now: &str) -> Vec<(u16, bytes::Bytes)> {
    lease_patches(b, now)
}

fn lease_patches(b: &Bench, now: &str) -> Vec<(u16, bytes::Bytes)> {
    b.runtime.block_on(async {
        let mut answers = Vec::new();
        for i in 0..NODES {
            let uri = format!(
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{}",
                node_name(i)
            );
            answers.push(
                send(
                    &b.router,
                    "PATCH",
                    &uri,
                    "application/merge-patch+json",
                    renew_patch(i, now),
                )
                .await,
            );
        }
        answers
    })
}

#[inline(never)]
fn phase_event_create(b: &Bench, uids: &[String]) -> Vec<(u16, bytes::Bytes)> {
    b.runtime.block_on(async {
        let mut answers = Vec::new();
        for (i, uid) in uids.iter().enumerate() {
            answers.push(
                send(
                    &b.router,
                    "POST",
                    "/apis/events.k8s.io/v1/namespaces/default/events",
                    "application/json",
                    event(i, uid),
                )
                .await,
            );
        }
        answers
    })
}

fn continue_token(body: &[u8]) -> Option<String> {
    // The list's metadata comes first: its head is enough.
    let head = &body[..body.len().min(512)];
    let key = b"\"continue\":\"";
    let at = head.windows(key.len()).position(|w| w == key)? + key.len();
    let end = body[at..].iter().position(|&b| b == b'"')?;
    let token = std::str::from_utf8(&body[at..at + end]).ok()?;
    (!token.is_empty()).then(|| token.to_string())
}

async fn list_all(router: &Router, path: &str, answers: &mut Vec<(u16, bytes::Bytes)>) {
    let mut next: Option<String> = None;
    loop {
        let uri = match &next {
            Some(token) => format!("{path}?limit=500&continue={token}"),
            None => format!("{path}?limit=500"),
        };
        let (status, body) = send(router, "GET", &uri, "application/json", Vec::new()).await;
        // The token without parsing the page (the client's cost is not counted).
        let token = continue_token(&body);
        answers.push((status, body));
        match token {
            Some(token) => next = Some(token),
            None => break,
        }
    }
}

#[inline(never)]
fn phase_list_pods(b: &Bench) -> Vec<(u16, bytes::Bytes)> {
    b.runtime.block_on(async {
        let mut answers = Vec::new();
        for _ in 0..LIST_RUNS {
            list_all(&b.router, "/api/v1/pods", &mut answers).await;
        }
        answers
    })
}

#[inline(never)]
fn phase_list_nodes(b: &Bench) -> Vec<(u16, bytes::Bytes)> {
    b.runtime.block_on(async {
        let mut answers = Vec::new();
        for _ in 0..LIST_RUNS {
            list_all(&b.router, "/api/v1/nodes", &mut answers).await;
        }
        answers
    })
}

#[inline(never)]
fn phase_node_status_patch(b: &Bench) -> Vec<(u16, bytes::Bytes)> {
    b.runtime.block_on(async {
        let mut answers = Vec::new();
        for i in 0..NODES {
            let uri = format!("/api/v1/nodes/{}/status", node_name(i));
            answers.push(
                send(
                    &b.router,
                    "PATCH",
                    &uri,
                    "application/strategic-merge-patch+json",
                    node_status_patch(i),
                )
                .await,
            );
        }
        answers
    })
}

fn main() {
    let start = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("a time")
        .to_utc();
    let server = ApiServer::with_clock(Clock::virtual_with(start, Random::seeded(7)));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let out = std::env::args()
        .nth(1)
        .map(|path| std::fs::File::create(path).expect("an output file"));
    let mut bench = Bench {
        runtime,
        router: server.router(),
        out,
    };

    // The restored state: nodes, pods (bulk, as a restore creates them) and
    // leases written by their kubelet (created, then renewed once).
    let created = server.create_objects(
        (0..NODES)
            .map(|i| BulkItem {
                object: node(i),
                status: None,
            })
            .collect(),
        "ksim",
    );
    let uids: Vec<String> = created
        .into_iter()
        .map(|c| c.expect("a node").uid)
        .collect();
    bench.run("bulk_create", PODS, |_| phase_bulk_create(&server));
    let setup = bench.runtime.block_on(async {
        let mut answers = Vec::new();
        for (i, uid) in uids.iter().enumerate() {
            let body =
                serde_json::to_vec(&lease(i, uid, "2026-01-01T00:00:00.000000Z")).expect("json");
            answers.push(
                send(
                    &bench.router,
                    "POST",
                    "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                    "application/json",
                    body,
                )
                .await,
            );
        }
        answers
    });
    bench.record("setup", &setup);
    bench.run("setup_lease_patch", NODES, |b| {
        lease_patches(b, "2026-01-01T00:00:01.000000Z")
    });

    bench.run("lease_create_conflict", NODES, |b| {
        phase_lease_create_conflict(b, &uids)
    });
    bench.run("lease_patch", NODES, |b| {
        phase_lease_patch(b, "2026-01-01T00:00:10.000000Z")
    });
    bench.run("event_create", NODES, |b| phase_event_create(b, &uids));
    bench.run("list_pods", LIST_RUNS * PODS.div_ceil(500), phase_list_pods);
    bench.run(
        "list_nodes",
        LIST_RUNS * NODES.div_ceil(500),
        phase_list_nodes,
    );
    bench.run("node_status_patch", NODES, phase_node_status_patch);
}
