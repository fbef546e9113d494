//! Admission and validation as kube-apiserver 1.33 does them, through
//! kubectl against `ksim create cluster`: the Priority plugin, gated pods,
//! pod spec validation, and empty lists and maps dropped on every write.

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::{stdout_json, table_rows};
use serde_json::json;

fn cluster() -> TestCluster {
    TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

fn pod_manifest(name: &str, spec_extra: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
{spec_extra}  containers:
  - name: app
    image: nginx
"
    )
}

#[test]
fn priority_classes_resolve_pod_priority_and_refuse_unknown_classes() {
    let cluster = cluster();
    // Without any global default, a pod gets priority 0.
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &pod_manifest("plain", ""))
        .success();
    let plain = stdout_json(&cluster.kubectl(&["get", "pod", "plain", "-o", "json"]));
    assert_eq!(plain["spec"]["priority"], json!(0));
    assert_eq!(
        plain["spec"]["preemptionPolicy"],
        json!("PreemptLowerPriority")
    );
    assert!(plain["spec"].get("priorityClassName").is_none());

    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: batch-low
value: 100
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: everyone
value: 10
globalDefault: true
",
        )
        .success();
    cluster
        .kubectl_stdin(
            &["create", "-f", "-"],
            &pod_manifest("batch", "  priorityClassName: batch-low\n"),
        )
        .success();
    let batch = stdout_json(&cluster.kubectl(&["get", "pod", "batch", "-o", "json"]));
    assert_eq!(batch["spec"]["priority"], json!(100));
    assert_eq!(batch["spec"]["preemptionPolicy"], json!("Never"));

    cluster
        .kubectl_stdin(&["create", "-f", "-"], &pod_manifest("defaulted", ""))
        .success();
    let defaulted = stdout_json(&cluster.kubectl(&["get", "pod", "defaulted", "-o", "json"]));
    assert_eq!(defaulted["spec"]["priorityClassName"], json!("everyone"));
    assert_eq!(defaulted["spec"]["priority"], json!(10));

    let critical = cluster.kubectl_stdin(
        &["create", "-f", "-"],
        &pod_manifest("critical", "  priorityClassName: system-node-critical\n"),
    );
    critical.success();
    let critical = stdout_json(&cluster.kubectl(&["get", "pod", "critical", "-o", "json"]));
    assert_eq!(critical["spec"]["priority"], json!(2_000_001_000));

    let unknown = cluster.kubectl_stdin(
        &["create", "-f", "-"],
        &pod_manifest("lost", "  priorityClassName: nope\n"),
    );
    unknown.failure();
    assert_eq!(
        unknown.stderr,
        "Error from server (Forbidden): error when creating \"STDIN\": pods \"lost\" is forbidden: no PriorityClass with name nope was found\n"
    );
    let conflicting = cluster.kubectl_stdin(
        &["create", "-f", "-"],
        &pod_manifest(
            "forged",
            "  priorityClassName: batch-low\n  priority: 1000000\n",
        ),
    );
    conflicting.failure();
    assert_eq!(
        conflicting.stderr,
        "Error from server (Forbidden): error when creating \"STDIN\": pods \"forged\" is forbidden: the integer value of priority (1000000) must not be provided in pod spec; priority admission controller computed 100 from the given PriorityClass name\n"
    );

    // A label change (an update without the priority) keeps it.
    cluster
        .kubectl(&["label", "pod", "batch", "tier=batch"])
        .success();
    let relabelled = stdout_json(&cluster.kubectl(&["get", "pod", "batch", "-o", "json"]));
    assert_eq!(relabelled["spec"]["priority"], json!(100));
}

#[test]
fn priority_classes_allow_one_global_default_and_keep_the_system_ones() {
    let cluster = cluster();
    let classes = cluster
        .kubectl(&["get", "priorityclasses", "-o", "json"])
        .success()
        .clone();
    let classes = stdout_json(&classes);
    let described: Vec<(String, i64, String)> = classes["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|c| {
            (
                c["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                c["value"].as_i64().unwrap_or_default(),
                c["description"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        described,
        [
            (
                "system-cluster-critical".to_string(),
                2_000_000_000,
                "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.".to_string()
            ),
            (
                "system-node-critical".to_string(),
                2_000_001_000,
                "Used for system critical pods that must not be moved from their current node.".to_string()
            ),
        ]
    );
    let deleted = cluster.kubectl(&["delete", "priorityclass", "system-node-critical"]);
    deleted.failure();
    assert_eq!(
        deleted.stderr,
        "Error from server (Forbidden): priorityclasses.scheduling.k8s.io \"system-node-critical\" is forbidden: this is a system priority class and cannot be deleted\n"
    );
    let reserved = cluster.kubectl(&["create", "priorityclass", "system-mine", "--value=5"]);
    reserved.failure();
    assert_eq!(
        reserved.stderr,
        "error: failed to create priorityclass: PriorityClass.scheduling.k8s.io \"system-mine\" is invalid: metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class\n"
    );

    cluster
        .kubectl(&[
            "create",
            "priorityclass",
            "first",
            "--value=5",
            "--global-default",
        ])
        .success();
    let second = cluster.kubectl(&[
        "create",
        "priorityclass",
        "second",
        "--value=6",
        "--global-default",
    ]);
    second.failure();
    assert_eq!(
        second.stderr,
        "error: failed to create priorityclass: priorityclasses.scheduling.k8s.io \"second\" is forbidden: PriorityClass first is already marked as default. Only one default can exist\n"
    );
    cluster
        .kubectl(&["create", "priorityclass", "second", "--value=6"])
        .success();
    let marked = cluster.kubectl(&[
        "patch",
        "priorityclass",
        "second",
        "--type=merge",
        "-p",
        "{\"globalDefault\":true}",
    ]);
    marked.failure();
    assert_eq!(
        marked.stderr,
        "Error from server (Forbidden): priorityclasses.scheduling.k8s.io \"second\" is forbidden: PriorityClass first is already marked as default. Only one default can exist\n"
    );
    let rows = table_rows(&cluster.kubectl(&["get", "priorityclass", "first", "second"]));
    assert_eq!(rows[0][..3], ["first", "5", "true"]);
    assert_eq!(rows[1][..3], ["second", "6", "false"]);
}

/// A cluster with the scheduler (no kubelet or controllers) and one node.
fn cluster_with_scheduler_and_node() -> TestCluster {
    let cluster = TestCluster::start_with(
        Path::new(env!("CARGO_BIN_EXE_ksim")),
        ksim_testutils::KSIM_CLUSTER_NAME,
        &["--disable", "kubelet,controllers"],
    );
    cluster
        .kubectl_stdin(
            &["create", "-f", "-"],
            r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}"#,
        )
        .success();
    cluster
        .kubectl(&[
            "patch",
            "node",
            "n1",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]}}"#,
        ])
        .success();
    cluster
}

fn node_of(cluster: &TestCluster, pod: &str) -> String {
    cluster
        .kubectl(&["get", "pod", pod, "-o", "jsonpath={.spec.nodeName}"])
        .success()
        .stdout
        .clone()
}

#[test]
fn gated_pods_are_scheduling_gated_until_their_last_gate_is_removed() {
    let cluster = cluster_with_scheduler_and_node();
    cluster
        .kubectl_stdin(
            &["create", "-f", "-"],
            &pod_manifest(
                "gated",
                "  schedulingGates:\n  - name: example.com/quota\n  - name: example.com/arch\n",
            ),
        )
        .success();
    let rows = table_rows(&cluster.kubectl(&["get", "pod", "gated"]));
    assert_eq!(rows[0][..3], ["gated", "0/1", "SchedulingGated"]);
    let pod = stdout_json(&cluster.kubectl(&["get", "pod", "gated", "-o", "json"]));
    assert_eq!(
        pod["status"]["conditions"],
        json!([{"type": "PodScheduled", "status": "False", "lastProbeTime": null, "lastTransitionTime": null,
            "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates"}])
    );

    let added = cluster.kubectl(&[
        "patch",
        "pod",
        "gated",
        "--type=json",
        "-p",
        r#"[{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "x"}}]"#,
    ]);
    added.failure();
    assert_eq!(
        added.stderr,
        "The Pod \"gated\" is invalid: spec.schedulingGates[2].name: Forbidden: only deletion is allowed, but found new scheduling gate 'x'\n"
    );

    // One gate left: a pod created afterwards is placed, the gated one waits.
    cluster
        .kubectl(&[
            "patch",
            "pod",
            "gated",
            "--type=json",
            "-p",
            r#"[{"op": "remove", "path": "/spec/schedulingGates/0"}]"#,
        ])
        .success();
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &pod_manifest("later", ""))
        .success();
    cluster.wait_for(
        &["get", "pod", "later", "-o", "jsonpath={.spec.nodeName}"],
        |node| node == "n1",
    );
    assert_eq!(node_of(&cluster, "gated"), "");
    let rows = table_rows(&cluster.kubectl(&["get", "pod", "gated"]));
    assert_eq!(rows[0][2], "SchedulingGated");

    cluster
        .kubectl(&[
            "patch",
            "pod",
            "gated",
            "--type=json",
            "-p",
            r#"[{"op": "remove", "path": "/spec/schedulingGates"}]"#,
        ])
        .success();
    cluster.wait_for(
        &["get", "pod", "gated", "-o", "jsonpath={.spec.nodeName}"],
        |node| node == "n1",
    );
    let pod = stdout_json(&cluster.kubectl(&["get", "pod", "gated", "-o", "json"]));
    let scheduled = pod["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .expect("PodScheduled");
    assert_eq!(scheduled["status"], "True");
}

#[test]
fn gated_pods_may_not_name_a_node() {
    let cluster = cluster();
    let refused = cluster.kubectl_stdin(
        &["create", "-f", "-"],
        &pod_manifest(
            "pinned",
            "  nodeName: n1\n  schedulingGates:\n  - name: example.com/quota\n",
        ),
    );
    refused.failure();
    assert_eq!(
        refused.stderr,
        "The Pod \"pinned\" is invalid: spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared\n"
    );
}

const DEPLOYMENT_WITH_SCRATCH: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: app
        image: nginx
        command: [\"nginx\"]
        volumeMounts:
        - name: scratch
          mountPath: /scratch
      volumes:
      - name: scratch
        emptyDir: {}
";

#[test]
fn a_volume_with_two_sources_is_invalid_on_patch_and_create() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT_WITH_SCRATCH)
        .success();
    let patched = cluster.kubectl(&[
        "patch",
        "deploy",
        "web",
        "--type=strategic",
        "-p",
        r#"{"spec":{"template":{"spec":{"volumes":[{"name":"scratch","configMap":{"name":"conf"}}]}}}}"#,
    ]);
    patched.failure();
    assert_eq!(
        patched.stderr,
        // An invalid volume is not one the mounts may name (as upstream).
        "The Deployment \"web\" is invalid: \n\
* spec.template.spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type\n\
* spec.template.spec.containers[0].volumeMounts[0].name: Not found: \"scratch\"\n"
    );
    let created = cluster.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1
kind: Pod
metadata:
  name: two-sources
spec:
  containers:
  - name: app
    image: nginx
  volumes:
  - name: scratch
    emptyDir: {}
    hostPath:
      path: /tmp
",
    );
    created.failure();
    assert_eq!(
        created.stderr,
        "The Pod \"two-sources\" is invalid: spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type\n"
    );
}

#[test]
fn pod_spec_validation_checks_mounts_probes_ports_and_security_context() {
    let cluster = cluster();
    let created = cluster.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1
kind: Pod
metadata:
  name: broken
spec:
  securityContext:
    runAsUser: -1
  containers:
  - name: app
    image: nginx
    ports:
    - name: http
      containerPort: 80
      hostPort: 8080
    - name: http
      containerPort: 81
    volumeMounts:
    - name: missing
      mountPath: /data
    livenessProbe:
      exec:
        command: [\"true\"]
      tcpSocket:
        port: 80
      successThreshold: 2
  - name: sidecar
    image: busybox
    ports:
    - containerPort: 90
      hostPort: 8080
",
    );
    created.failure();
    assert_eq!(
        created.stderr,
        "The Pod \"broken\" is invalid: \n\
* spec.containers[0].ports[1].name: Duplicate value: \"http\"\n\
* spec.containers[0].volumeMounts[0].name: Not found: \"missing\"\n\
* spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type\n\
* spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1\n\
* spec.containers[1].ports[0].hostPort: Duplicate value: \"TCP//8080\"\n\
* spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive\n"
    );
    // The same checks on update: a mount of a volume the pod lacks.
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT_WITH_SCRATCH)
        .success();
    let patched = cluster.kubectl(&[
        "patch",
        "deploy",
        "web",
        "--type=json",
        "-p",
        r#"[{"op": "replace", "path": "/spec/template/spec/containers/0/volumeMounts/0/name", "value": "other"}]"#,
    ]);
    patched.failure();
    assert_eq!(
        patched.stderr,
        "The Deployment \"web\" is invalid: spec.template.spec.containers[0].volumeMounts[0].name: Not found: \"other\"\n"
    );
}

fn template_container(cluster: &TestCluster) -> serde_json::Value {
    let deployment = stdout_json(&cluster.kubectl(&["get", "deploy", "web", "-o", "json"]));
    deployment["spec"]["template"]["spec"]["containers"][0].clone()
}

#[test]
fn empty_omitempty_lists_and_maps_are_dropped_on_every_write() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT_WITH_SCRATCH)
        .success();
    // Strategic merge patch: an emptied list.
    cluster
        .kubectl(&[
            "patch",
            "deploy",
            "web",
            "--type=strategic",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","command":[]}]}}}}"#,
        ])
        .success();
    let container = template_container(&cluster);
    assert!(container.get("command").is_none(), "{container}");
    // A list emptied by `$patch: replace`.
    cluster
        .kubectl(&[
            "patch",
            "deploy",
            "web",
            "--type=strategic",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","volumeMounts":[{"$patch":"replace"}]}]}}}}"#,
        ])
        .success();
    let container = template_container(&cluster);
    assert!(container.get("volumeMounts").is_none(), "{container}");
    // JSON patch and merge patch.
    cluster
        .kubectl(&[
            "patch",
            "deploy",
            "web",
            "--type=json",
            "-p",
            r#"[{"op": "add", "path": "/spec/template/spec/containers/0/args", "value": []}]"#,
        ])
        .success();
    cluster
        .kubectl(&[
            "patch",
            "deploy",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"template":{"spec":{"nodeSelector":{},"tolerations":[]}}}}"#,
        ])
        .success();
    let deployment = stdout_json(&cluster.kubectl(&["get", "deploy", "web", "-o", "json"]));
    let spec = &deployment["spec"]["template"]["spec"];
    assert!(spec["containers"][0].get("args").is_none(), "{spec}");
    assert!(spec.get("nodeSelector").is_none(), "{spec}");
    assert!(spec.get("tolerations").is_none(), "{spec}");

    // Create, update (replace) and server-side apply.
    let config_map = "apiVersion: v1
kind: ConfigMap
metadata:
  name: conf
  labels: {}
data: {}
";
    cluster
        .kubectl_stdin(&["create", "-f", "-"], config_map)
        .success();
    let created = stdout_json(&cluster.kubectl(&["get", "cm", "conf", "-o", "json"]));
    assert!(created.get("data").is_none(), "{created}");
    assert!(created["metadata"].get("labels").is_none(), "{created}");
    cluster
        .kubectl_stdin(
            &["replace", "-f", "-"],
            "apiVersion: v1
kind: ConfigMap
metadata:
  name: conf
data: {}
binaryData: {}
",
        )
        .success();
    let replaced = stdout_json(&cluster.kubectl(&["get", "cm", "conf", "-o", "json"]));
    assert!(replaced.get("binaryData").is_none(), "{replaced}");
    cluster
        .kubectl_stdin(
            &["apply", "--server-side", "-f", "-"],
            "apiVersion: v1
kind: Pod
metadata:
  name: applied
spec:
  containers:
  - name: app
    image: nginx
    command: []
    env: []
",
        )
        .success();
    let pod = stdout_json(&cluster.kubectl(&["get", "pod", "applied", "-o", "json"]));
    let container = &pod["spec"]["containers"][0];
    assert!(container.get("command").is_none(), "{container}");
    assert!(container.get("env").is_none(), "{container}");
    // Not omitempty in Go: kept.
    assert_eq!(container["resources"], json!({}));
}
