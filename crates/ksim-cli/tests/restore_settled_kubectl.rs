//! End to end, through `ksim create cluster --snapshot` and the real
//! kubectl: the controllers adopt a restored, settled cluster without
//! writing it. A Deployment (and its ReplicaSet), a bare ReplicaSet, a
//! StatefulSet, a DaemonSet and a completed Job are saved settled, at a
//! second generation (scaled or edited once: a restore starts them again
//! at generation 1, with their observedGeneration to match), and
//! restored; the controllers then show they watch each of them (they react
//! to a scale, or to a new node for the DaemonSet), and the API's watch
//! history of each object, from its restore on, holds no write before the
//! one that change caused (the Job: none at all): the status each
//! controller computes for a restored object is the one it carries.

use std::path::Path;

use ksim_testutils::{KsimEnv, TestCluster};
use serde_json::Value;

fn ksim_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

const WORKLOADS: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: bare
spec:
  replicas: 1
  selector:
    matchLabels:
      app: bare
  template:
    metadata:
      labels:
        app: bare
    spec:
      containers:
      - name: c
        image: busybox
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  replicas: 1
  serviceName: db
  selector:
    matchLabels:
      app: db
  template:
    metadata:
      labels:
        app: db
    spec:
      containers:
      - name: c
        image: busybox
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels:
      app: agent
  template:
    metadata:
      labels:
        app: agent
    spec:
      containers:
      - name: c
        image: busybox
---
apiVersion: batch/v1
kind: Job
metadata:
  name: once
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
";

/// Waits until `kubectl get <object> -o jsonpath=<path>` in `cluster`
/// prints `want`.
fn wait_for_field(env: &KsimEnv, cluster: &str, object: &str, path: &str, want: &str) {
    let jsonpath = format!("jsonpath={path}");
    env.wait_for_in(cluster, &["get", object, "-o", &jsonpath], |out| {
        out == want
    });
}

/// Every workload settled at generation `generation`: each of its pods
/// Running and Ready, the Job complete.
fn wait_for_settled(env: &KsimEnv, cluster: &str, generation: u32, nodes: u32) {
    let ready = "{.metadata.generation} {.status.observedGeneration} {.status.readyReplicas}";
    let settled = format!("{generation} {generation} 2");
    wait_for_field(env, cluster, "deploy/web", ready, &settled);
    wait_for_field(env, cluster, "rs/bare", ready, &settled);
    wait_for_field(env, cluster, "sts/db", ready, &settled);
    wait_for_field(
        env,
        cluster,
        "ds/agent",
        "{.metadata.generation} {.status.observedGeneration} {.status.desiredNumberScheduled} {.status.numberReady}",
        &format!("{generation} {generation} {nodes} {nodes}"),
    );
    wait_for_field(env, cluster, "job/once", "{.status.succeeded}", "1");
}

/// The watch history of `resource` (an API path) in `cluster` from its
/// beginning: (event type, object) in order. The watch is closed by the
/// server after a second (`timeoutSeconds`), once the history is sent.
fn history(env: &KsimEnv, cluster: &str, resource: &str) -> Vec<(String, Value)> {
    let path = format!("{resource}?watch=1&resourceVersion=1&timeoutSeconds=1");
    env.kubectl_ok_in(cluster, &["get", "--raw", &path])
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let event: Value = serde_json::from_str(line).expect("a watch event");
            let kind = event["type"].as_str().expect("an event type").to_string();
            (kind, event["object"].clone())
        })
        .collect()
}

/// The events of object `name` in `history`.
fn events_of<'a>(history: &'a [(String, Value)], name: &str) -> Vec<&'a (String, Value)> {
    history
        .iter()
        .filter(|(_, object)| object["metadata"]["name"] == name)
        .collect()
}

/// Asserts that `name`'s history starts with its restore (ADDED) and that
/// its first write after it is the one `caused_by` recognises.
fn first_write_is(
    history: &[(String, Value)],
    name: &str,
    what: &str,
    caused_by: impl Fn(&Value) -> bool,
) {
    let events = events_of(history, name);
    let brief: Vec<String> = events
        .iter()
        .map(|(kind, object)| {
            format!(
                "{kind} rv={} generation={} status={}",
                object["metadata"]["resourceVersion"],
                object["metadata"]["generation"],
                object["status"]
            )
        })
        .collect();
    assert!(
        events.len() >= 2 && events[0].0 == "ADDED" && events[1].0 == "MODIFIED",
        "{name}: restored, then written after {what}: {brief:#?}"
    );
    assert!(
        caused_by(&events[1].1),
        "{name}: the first write after the restore is the one {what} caused, \
         nothing before it: {brief:#?}"
    );
}

#[test]
fn a_restored_settled_cluster_is_not_written_by_its_controllers() {
    let source = TestCluster::start_named(ksim_binary(), "source");
    let env = source.env();
    env.ksim_ok(&["scale", "node", "--replicas", "2", "--name", "source"]);
    source
        .kubectl_stdin(&["apply", "-f", "-"], WORKLOADS)
        .success();
    // A second generation of each (the Job's spec cannot change).
    env.kubectl_ok_in("source", &["scale", "deploy/web", "--replicas=2"]);
    env.kubectl_ok_in("source", &["scale", "rs/bare", "--replicas=2"]);
    env.kubectl_ok_in("source", &["scale", "sts/db", "--replicas=2"]);
    env.kubectl_ok_in(
        "source",
        &[
            "patch",
            "ds/agent",
            "--type=merge",
            "-p",
            r#"{"spec":{"revisionHistoryLimit":5}}"#,
        ],
    );
    wait_for_settled(env, "source", 2, 2);
    let path = env.root().join("snapshot.yaml");
    let path = path.to_str().expect("utf-8 path");
    env.ksim_ok(&["snapshot", "save", "--name", "source", "--path", path]);
    env.ksim_ok(&["delete", "cluster", "--name", "source"]);
    env.ksim_ok(&["create", "cluster", "--name", "copy", "--snapshot", path]);
    wait_for_settled(env, "copy", 1, 2);

    // Changes the controllers react to: each one's reaction is the sign it
    // has synced its restored objects.
    env.kubectl_ok_in("copy", &["scale", "deploy/web", "--replicas=3"]);
    env.kubectl_ok_in("copy", &["scale", "rs/bare", "--replicas=3"]);
    env.kubectl_ok_in("copy", &["scale", "sts/db", "--replicas=3"]);
    env.ksim_ok(&["scale", "node", "--replicas", "3", "--name", "copy"]);
    let ready = "{.metadata.generation} {.status.observedGeneration} {.status.readyReplicas}";
    wait_for_field(env, "copy", "deploy/web", ready, "2 2 3");
    wait_for_field(env, "copy", "rs/bare", ready, "2 2 3");
    wait_for_field(env, "copy", "sts/db", ready, "2 2 3");
    wait_for_field(
        env,
        "copy",
        "ds/agent",
        "{.status.desiredNumberScheduled} {.status.numberReady}",
        "3 3",
    );
    let web_rs = env.kubectl_ok_in(
        "copy",
        &[
            "get",
            "rs",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
    );
    wait_for_field(
        env,
        "copy",
        &format!("rs/{web_rs}"),
        "{.status.readyReplicas}",
        "3",
    );

    let scaled = |object: &Value| object["metadata"]["generation"] == 2;
    let replica_sets = history(env, "copy", "/apis/apps/v1/namespaces/default/replicasets");
    first_write_is(&replica_sets, "bare", "its scale", scaled);
    first_write_is(&replica_sets, &web_rs, "its Deployment's scale", scaled);
    let deployments = history(env, "copy", "/apis/apps/v1/namespaces/default/deployments");
    first_write_is(&deployments, "web", "its scale", scaled);
    let stateful_sets = history(env, "copy", "/apis/apps/v1/namespaces/default/statefulsets");
    first_write_is(&stateful_sets, "db", "its scale", scaled);
    let daemon_sets = history(env, "copy", "/apis/apps/v1/namespaces/default/daemonsets");
    first_write_is(&daemon_sets, "agent", "the new node", |object| {
        object["status"]["desiredNumberScheduled"] == 3
    });
    // The completed Job: nothing to react to; its controller has synced it
    // with the others (they all reacted above) and never wrote it.
    let jobs = history(env, "copy", "/apis/batch/v1/namespaces/default/jobs");
    let once: Vec<&str> = events_of(&jobs, "once")
        .iter()
        .map(|(kind, _)| kind.as_str())
        .collect();
    assert_eq!(once, ["ADDED"], "the completed Job is not written");
}
