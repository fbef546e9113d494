//! End-to-end tests of `kubectl get` in every output form: the server's
//! Table columns (header lines compared with what kube-apiserver 1.33 and
//! kubectl 1.33 print), `-o wide|json|yaml|jsonpath|custom-columns|name`,
//! `--show-labels`, label and field selectors, `-A` and paging.

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::{header_line, stdout_json, table_rows};
use serde_json::json;

fn cluster() -> TestCluster {
    TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

/// A cluster with five pods p1..p5, labelled app=odd or app=even.
fn cluster_with_pods() -> TestCluster {
    let cluster = cluster();
    for i in 1..=5 {
        let label = if i % 2 == 1 { "app=odd" } else { "app=even" };
        cluster
            .kubectl(&["run", &format!("p{i}"), "--image=nginx", "--labels", label])
            .success();
    }
    cluster
}

const NODE: &str = "apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels:
    node-role.kubernetes.io/control-plane: \"\"
";

const NODE_STATUS: &str = r#"{"status":{
  "conditions":[{"type":"Ready","status":"True"}],
  "nodeInfo":{"kubeletVersion":"v1.33.0","osImage":"Ubuntu 24.04","kernelVersion":"6.8.0",
              "containerRuntimeVersion":"containerd://1.7.0"},
  "addresses":[{"type":"InternalIP","address":"10.0.0.1"}]}}"#;

#[test]
fn pods_table_has_kube_columns() {
    let cluster = cluster_with_pods();
    let table = cluster.kubectl(&["get", "pods"]);
    table.success();
    assert_eq!(
        header_line(&table),
        "NAME   READY   STATUS    RESTARTS   AGE"
    );
    let rows = table_rows(&table);
    assert_eq!(rows.len(), 5);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(
            row[..4],
            [
                format!("p{}", i + 1),
                "0/1".into(),
                "Pending".into(),
                "0".into()
            ]
        );
    }
}

#[test]
fn pods_wide_table_adds_ip_node_nominated_node_readiness_gates() {
    let cluster = cluster_with_pods();
    let table = cluster.kubectl(&["get", "pods", "-o", "wide"]);
    table.success();
    assert_eq!(
        header_line(&table),
        "NAME   READY   STATUS    RESTARTS   AGE   IP       NODE     NOMINATED NODE   READINESS GATES"
    );
    let row = &table_rows(&table)[0];
    assert_eq!(row[5..], ["<none>", "<none>", "<none>", "<none>"]);
}

#[test]
fn nodes_table_shows_status_roles_version_and_wide_node_info() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(&["create", "-f", "-"], NODE)
        .success();
    cluster
        .kubectl(&[
            "patch",
            "node",
            "node-a",
            "--subresource=status",
            "--type=merge",
            "-p",
            NODE_STATUS,
        ])
        .success();
    let table = cluster.kubectl(&["get", "nodes"]);
    table.success();
    assert_eq!(
        header_line(&table),
        "NAME     STATUS   ROLES           AGE   VERSION"
    );
    let row = &table_rows(&table)[0];
    assert_eq!(row[..3], ["node-a", "Ready", "control-plane"]);
    assert_eq!(row[4], "v1.33.0");

    let wide = cluster.kubectl(&["get", "nodes", "-o", "wide"]);
    wide.success();
    assert_eq!(
        header_line(&wide),
        "NAME     STATUS   ROLES           AGE   VERSION   INTERNAL-IP   EXTERNAL-IP   OS-IMAGE       KERNEL-VERSION   CONTAINER-RUNTIME"
    );
    let wide_row = wide.stdout.lines().nth(1).expect("a node row");
    assert!(
        wide_row.ends_with(
            "v1.33.0   10.0.0.1      <none>        Ubuntu 24.04   6.8.0            containerd://1.7.0"
        ),
        "{wide_row}"
    );
}

#[test]
fn unready_node_without_roles_prints_unknown_and_none() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(
            &["create", "-f", "-"],
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: bare\n",
        )
        .success();
    cluster.kubectl(&["cordon", "bare"]).success();
    let table = cluster.kubectl(&["get", "nodes"]);
    let row = &table_rows(table.success())[0];
    assert_eq!(row[..3], ["bare", "Unknown,SchedulingDisabled", "<none>"]);
}

#[test]
fn deployments_table_and_wide_columns() {
    let cluster = cluster();
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=3",
        ])
        .success();
    let table = cluster.kubectl(&["get", "deployments"]);
    table.success();
    assert_eq!(
        header_line(&table),
        "NAME   READY   UP-TO-DATE   AVAILABLE   AGE"
    );
    assert_eq!(table_rows(&table)[0][..4], ["web", "0/3", "0", "0"]);
    let wide = cluster.kubectl(&["get", "deployments", "-o", "wide"]);
    wide.success();
    assert_eq!(
        header_line(&wide),
        "NAME   READY   UP-TO-DATE   AVAILABLE   AGE   CONTAINERS   IMAGES       SELECTOR"
    );
    assert_eq!(
        table_rows(&wide)[0][5..],
        ["nginx", "nginx:1.27", "app=web"]
    );
}

#[test]
fn poddisruptionbudgets_table_columns() {
    let cluster = cluster();
    cluster
        .kubectl(&[
            "create",
            "pdb",
            "web",
            "--selector=app=web",
            "--min-available=2",
        ])
        .success();
    cluster
        .kubectl(&[
            "create",
            "pdb",
            "api",
            "--selector=app=api",
            "--max-unavailable=30%",
        ])
        .success();
    let table = cluster.kubectl(&["get", "pdb"]);
    table.success();
    assert_eq!(
        header_line(&table),
        "NAME   MIN AVAILABLE   MAX UNAVAILABLE   ALLOWED DISRUPTIONS   AGE"
    );
    let rows = table_rows(&table);
    assert_eq!(rows[0][..4], ["api", "N/A", "30%", "0"]);
    assert_eq!(rows[1][..4], ["web", "2", "N/A", "0"]);
}

#[test]
fn services_configmaps_namespaces_table_columns() {
    let cluster = cluster();
    cluster
        .kubectl(&[
            "create",
            "configmap",
            "c",
            "--from-literal=a=1",
            "--from-literal=b=2",
        ])
        .success();
    let cms = cluster.kubectl(&["get", "configmaps", "c"]);
    assert_eq!(header_line(cms.success()), "NAME   DATA   AGE");
    assert_eq!(table_rows(&cms)[0][..2], ["c", "2"]);

    let services = cluster.kubectl(&["get", "services", "kubernetes"]);
    services.success();
    assert_eq!(
        header_line(&services),
        "NAME         TYPE        CLUSTER-IP   EXTERNAL-IP   PORT(S)   AGE"
    );
    assert_eq!(
        table_rows(&services)[0][..5],
        ["kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"]
    );

    let namespaces = cluster.kubectl(&["get", "namespaces"]);
    namespaces.success();
    assert_eq!(header_line(&namespaces), "NAME              STATUS   AGE");
    let names: Vec<String> = table_rows(&namespaces)
        .into_iter()
        .map(|row| row[0].clone())
        .collect();
    assert_eq!(
        names,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );
}

#[test]
fn json_output_of_a_list_is_a_v1_list_of_typed_items() {
    let cluster = cluster_with_pods();
    let list = stdout_json(&cluster.kubectl(&["get", "pods", "-o", "json"]));
    assert_eq!(list["kind"], json!("List"));
    assert_eq!(list["apiVersion"], json!("v1"));
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 5);
    for item in items {
        assert_eq!(item["kind"], json!("Pod"));
        assert_eq!(item["apiVersion"], json!("v1"));
        assert_eq!(item["status"]["phase"], json!("Pending"));
    }
    let one = stdout_json(&cluster.kubectl(&["get", "pod", "p1", "-o", "json"]));
    assert_eq!(one["kind"], json!("Pod"));
    assert_eq!(one["metadata"]["labels"], json!({"app": "odd"}));
    assert_eq!(one["spec"]["containers"][0]["name"], json!("p1"));
}

#[test]
fn yaml_output_of_one_object() {
    let cluster = cluster();
    cluster
        .kubectl(&["create", "configmap", "c", "--from-literal=key=value"])
        .success();
    let yaml = cluster.kubectl(&["get", "configmap", "c", "-o", "yaml"]);
    yaml.success();
    assert!(
        yaml.stdout
            .starts_with("apiVersion: v1\ndata:\n  key: value\nkind: ConfigMap\nmetadata:\n"),
        "{}",
        yaml.stdout
    );
    assert!(
        yaml.stdout.contains("\n  name: c\n  namespace: default\n"),
        "{}",
        yaml.stdout
    );
}

#[test]
fn jsonpath_custom_columns_and_name_output() {
    let cluster = cluster_with_pods();
    let jsonpath = cluster.kubectl(&[
        "get",
        "pods",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.app}{\"\\n\"}{end}",
    ]);
    assert_eq!(
        jsonpath.success().stdout,
        "p1=odd\np2=even\np3=odd\np4=even\np5=odd\n"
    );
    let columns = cluster.kubectl(&[
        "get",
        "pods",
        "-o",
        "custom-columns=NAME:.metadata.name,IMAGE:.spec.containers[0].image,PHASE:.status.phase",
    ]);
    assert_eq!(
        columns.success().stdout,
        "NAME   IMAGE   PHASE\n\
         p1     nginx   Pending\n\
         p2     nginx   Pending\n\
         p3     nginx   Pending\n\
         p4     nginx   Pending\n\
         p5     nginx   Pending\n"
    );
    let names = cluster.kubectl(&["get", "pods", "-o", "name"]);
    assert_eq!(
        names.success().stdout,
        "pod/p1\npod/p2\npod/p3\npod/p4\npod/p5\n"
    );
}

#[test]
fn show_labels_adds_a_labels_column() {
    let cluster = cluster_with_pods();
    let table = cluster.kubectl(&["get", "pods", "--show-labels"]);
    table.success();
    assert_eq!(
        header_line(&table),
        "NAME   READY   STATUS    RESTARTS   AGE   LABELS"
    );
    let labels: Vec<String> = table_rows(&table)
        .into_iter()
        .map(|row| row[5].clone())
        .collect();
    assert_eq!(
        labels,
        ["app=odd", "app=even", "app=odd", "app=even", "app=odd"]
    );
}

#[test]
fn label_selectors_filter_lists() {
    let cluster = cluster_with_pods();
    cluster
        .kubectl(&["label", "pod", "p5", "tier=web"])
        .success();
    let cases: &[(&str, &str)] = &[
        ("app=odd", "pod/p1\npod/p3\npod/p5\n"),
        ("app!=odd", "pod/p2\npod/p4\n"),
        ("app in (even)", "pod/p2\npod/p4\n"),
        ("app notin (even,odd)", ""),
        ("tier", "pod/p5\n"),
        ("!tier", "pod/p1\npod/p2\npod/p3\npod/p4\n"),
        ("app=odd,tier=web", "pod/p5\n"),
    ];
    for (selector, expected) in cases {
        let out = cluster.kubectl(&["get", "pods", "-l", selector, "-o", "name"]);
        assert_eq!(out.success().stdout, *expected, "-l {selector}");
    }
}

#[test]
fn field_selectors_filter_lists_and_unknown_fields_are_rejected() {
    let cluster = cluster_with_pods();
    let cases: &[(&str, &str)] = &[
        ("metadata.name=p3", "pod/p3\n"),
        ("metadata.name!=p3", "pod/p1\npod/p2\npod/p4\npod/p5\n"),
        (
            "status.phase=Pending",
            "pod/p1\npod/p2\npod/p3\npod/p4\npod/p5\n",
        ),
        ("status.phase=Running", ""),
        ("spec.nodeName=", "pod/p1\npod/p2\npod/p3\npod/p4\npod/p5\n"),
        ("metadata.namespace=default,metadata.name=p1", "pod/p1\n"),
    ];
    for (selector, expected) in cases {
        let out = cluster.kubectl(&["get", "pods", "--field-selector", selector, "-o", "name"]);
        assert_eq!(
            out.success().stdout,
            *expected,
            "--field-selector {selector}"
        );
    }
    let bad = cluster.kubectl(&["get", "configmaps", "--field-selector", "data.x=1"]);
    bad.failure();
    assert_eq!(
        bad.stderr,
        "Error from server (BadRequest): Unable to find \"/v1, Resource=configmaps\" that match \
         label selector \"\", field selector \"data.x=1\": field label not supported: data.x\n"
    );
}

#[test]
fn all_namespaces_adds_a_namespace_column() {
    let cluster = cluster();
    cluster.kubectl(&["create", "namespace", "other"]).success();
    cluster
        .kubectl(&["create", "configmap", "here", "-n", "default"])
        .success();
    cluster
        .kubectl(&["create", "configmap", "there", "-n", "other"])
        .success();
    let table = cluster.kubectl(&[
        "get",
        "configmaps",
        "-A",
        "--field-selector=metadata.name!=kube-root-ca.crt",
    ]);
    table.success();
    assert_eq!(header_line(&table), "NAMESPACE   NAME    DATA   AGE");
    let rows: Vec<Vec<String>> = table_rows(&table)
        .into_iter()
        .map(|row| row[..2].to_vec())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["default".to_string(), "here".to_string()],
            vec!["other".to_string(), "there".to_string()]
        ]
    );
    let empty = cluster.kubectl(&["get", "configmaps", "-n", "other", "-l", "x=y"]);
    empty.success();
    assert_eq!(empty.stdout, "");
    assert_eq!(empty.stderr, "No resources found in other namespace.\n");
}

#[test]
fn chunked_list_pages_through_all_objects() {
    let cluster = cluster_with_pods();
    let paged = cluster.kubectl(&["get", "pods", "--chunk-size=2", "-o", "name", "-v=6"]);
    paged.success();
    assert_eq!(paged.stdout, "pod/p1\npod/p2\npod/p3\npod/p4\npod/p5\n");
    let requests: Vec<&str> = paged
        .stderr
        .lines()
        .filter(|line| line.contains("verb=\"GET\"") && line.contains("/pods?"))
        .collect();
    assert_eq!(requests.len(), 3, "{}", paged.stderr);
    assert!(requests[0].contains("limit=2"), "{}", requests[0]);
    assert!(!requests[0].contains("continue="), "{}", requests[0]);
    assert!(requests[1].contains("continue="), "{}", requests[1]);
    assert!(requests[2].contains("continue="), "{}", requests[2]);

    let table = cluster.kubectl(&["get", "pods", "--chunk-size=2"]);
    table.success();
    assert_eq!(
        header_line(&table),
        "NAME   READY   STATUS    RESTARTS   AGE"
    );
    assert_eq!(table_rows(&table).len(), 5, "{}", table.stdout);
}

#[test]
fn a_page_counts_the_items_after_it_unless_a_selector_narrows_the_list() {
    let cluster = cluster_with_pods();
    let page = |path: &str| -> serde_json::Value {
        let out = cluster.kubectl(&["get", "--raw", path]);
        out.success();
        serde_json::from_str(&out.stdout).expect("a JSON list")
    };
    let first = page("/api/v1/namespaces/default/pods?limit=2");
    assert_eq!(first["metadata"]["remainingItemCount"], 3, "{first}");
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("a continue token")
        .replace('+', "%2B")
        .replace('/', "%2F")
        .replace('=', "%3D");
    let second = page(&format!(
        "/api/v1/namespaces/default/pods?limit=2&continue={token}"
    ));
    assert_eq!(second["metadata"]["remainingItemCount"], 1, "{second}");
    let last = page(&format!(
        "/api/v1/namespaces/default/pods?limit=4&continue={token}"
    ));
    assert!(last["metadata"].get("continue").is_none(), "{last}");
    assert!(
        last["metadata"].get("remainingItemCount").is_none(),
        "{last}"
    );
    // With a selector the list pages on but says nothing of what is left.
    let odd = page("/api/v1/namespaces/default/pods?limit=1&labelSelector=app%3Dodd");
    assert_eq!(odd["items"].as_array().map(Vec::len), Some(1));
    assert!(odd["metadata"]["continue"].is_string(), "{odd}");
    assert!(odd["metadata"].get("remainingItemCount").is_none(), "{odd}");
}

/// The header and first row (cells split on blanks) of `kubectl get <args>`.
fn header_and_row(cluster: &TestCluster, args: &[&str]) -> (String, Vec<String>) {
    let out = cluster.kubectl(args);
    out.success();
    let row = table_rows(&out).into_iter().next().unwrap_or_default();
    (header_line(&out).to_string(), row)
}

#[test]
fn workload_and_other_kinds_table_columns() {
    let cluster = cluster();
    let manifest = format!(
        "{}/tests/fixtures/workloads.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    cluster.kubectl(&["apply", "-f", &manifest]).success();
    let cases: &[(&[&str], &str, &[&str])] = &[
        (
            &["get", "statefulsets"],
            "NAME   READY   AGE",
            &["db", "0/2"],
        ),
        (
            &["get", "statefulsets", "-o", "wide"],
            "NAME   READY   AGE   CONTAINERS   IMAGES",
            &["db", "0/2"],
        ),
        (
            &["get", "daemonsets"],
            "NAME    DESIRED   CURRENT   READY   UP-TO-DATE   AVAILABLE   NODE SELECTOR            AGE",
            &["agent", "0", "0", "0", "0", "0", "kubernetes.io/os=linux"],
        ),
        (
            &["get", "replicasets"],
            "NAME   DESIRED   CURRENT   READY   AGE",
            &["rs1", "2", "0", "0"],
        ),
        (
            &["get", "replicasets", "-o", "wide"],
            "NAME   DESIRED   CURRENT   READY   AGE   CONTAINERS   IMAGES   SELECTOR",
            &["rs1", "2", "0", "0"],
        ),
        (&["get", "leases"], "NAME   HOLDER   AGE", &["l1", "me"]),
        (
            &["get", "serviceaccounts", "sa1"],
            "NAME   SECRETS   AGE",
            &["sa1", "0"],
        ),
        (
            &["get", "events"],
            "LAST SEEN   TYPE     REASON      OBJECT   MESSAGE",
            &["<unknown>", "Normal", "Scheduled", "pod/p1", "hello"],
        ),
        (
            &["get", "priorityclasses"],
            "NAME                      VALUE        GLOBAL-DEFAULT   AGE   PREEMPTIONPOLICY",
            &["system-cluster-critical", "2000000000", "false"],
        ),
    ];
    for (args, header, row_start) in cases {
        let (got_header, row) = header_and_row(&cluster, args);
        assert_eq!(got_header, *header, "{args:?}");
        assert_eq!(row[..row_start.len()], **row_start, "{args:?}");
    }
}

const BOUND_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: bound
spec:
  nodeName: node-a
  containers:
  - name: c
    image: nginx
";

const RUNNING_STATUS: &str = r#"{"status":{"phase":"Running",
  "podIP":"10.244.0.5","podIPs":[{"ip":"10.244.0.5"}],
  "conditions":[{"type":"Ready","status":"True"}],
  "containerStatuses":[{"name":"c","ready":true,"restartCount":2,"image":"nginx","imageID":"",
    "started":true,"state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}},
    "lastState":{"terminated":{"exitCode":1,"startedAt":"2026-01-01T00:00:00Z",
                               "finishedAt":"2026-01-01T00:10:00Z"}}}]}}"#;

#[test]
fn running_bound_pod_row_and_terminating_status() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(&["create", "-f", "-"], BOUND_POD)
        .success();
    cluster
        .kubectl(&["run", "unbound", "--image=nginx"])
        .success();
    cluster
        .kubectl(&[
            "patch",
            "pod",
            "bound",
            "--subresource=status",
            "--type=merge",
            "-p",
            RUNNING_STATUS,
        ])
        .success();
    let wide = cluster.kubectl(&["get", "pod", "bound", "-o", "wide"]);
    wide.success();
    let line = wide.stdout.lines().nth(1).expect("a pod row");
    assert!(
        line.starts_with("bound   1/1     Running   2 ("),
        "{}",
        wide.stdout
    );
    assert!(
        line.ends_with("10.244.0.5   node-a   <none>           <none>"),
        "{}",
        wide.stdout
    );
    let on_node = cluster.kubectl(&[
        "get",
        "pods",
        "--field-selector=spec.nodeName=node-a",
        "-o",
        "name",
    ]);
    assert_eq!(on_node.success().stdout, "pod/bound\n");
    let running = cluster.kubectl(&[
        "get",
        "pods",
        "--field-selector=status.phase=Running",
        "-o",
        "name",
    ]);
    assert_eq!(running.success().stdout, "pod/bound\n");
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Ready",
            "pod/bound",
            "--timeout=10s",
        ])
        .success();

    // A bound pod waits for its kubelet: deleted, it shows Terminating.
    cluster
        .kubectl(&["delete", "pod", "bound", "--wait=false"])
        .success();
    let table = cluster.kubectl(&["get", "pod", "bound"]);
    assert_eq!(table_rows(table.success())[0][2], "Terminating");
    let pod = stdout_json(&cluster.kubectl(&["get", "pod", "bound", "-o", "json"]));
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], json!(30));
    // An unbound pod goes at once.
    cluster
        .kubectl(&["delete", "pod", "unbound", "--wait=false"])
        .success();
    cluster.kubectl(&["get", "pod", "unbound"]).failure();
}

/// The QoS class kubectl shows is upstream's (pkg/apis/core/helper/qos):
/// only cpu and memory count, quantities compare by value, and limits
/// without requests are defaulted to requests first.
#[test]
fn qos_class_follows_upstreams_rule() {
    let cluster = cluster();
    let pods = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: storage-only}
  spec:
    containers:
    - name: c
      image: nginx
      resources:
        requests: {ephemeral-storage: 1Gi}
        limits: {ephemeral-storage: 1Gi}
- apiVersion: v1
  kind: Pod
  metadata: {name: spelled-differently}
  spec:
    containers:
    - name: c
      image: nginx
      resources:
        requests: {cpu: 1000m, memory: 1Gi}
        limits: {cpu: "1", memory: "1073741824"}
- apiVersion: v1
  kind: Pod
  metadata: {name: limits-only}
  spec:
    containers:
    - name: c
      image: nginx
      resources:
        limits: {cpu: 500m, memory: 128Mi}
- apiVersion: v1
  kind: Pod
  metadata: {name: cpu-request}
  spec:
    containers:
    - name: c
      image: nginx
      resources:
        requests: {cpu: 100m, ephemeral-storage: 1Gi}
"#;
    cluster
        .kubectl_stdin(&["create", "-f", "-"], pods)
        .success();
    let out = cluster.kubectl(&[
        "get",
        "pods",
        "--sort-by=.metadata.name",
        "-o",
        "custom-columns=NAME:.metadata.name,QOS:.status.qosClass",
        "--no-headers",
    ]);
    out.success();
    let rows: Vec<Vec<&str>> = out
        .stdout
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        vec![
            vec!["cpu-request", "Burstable"],
            vec!["limits-only", "Guaranteed"],
            vec!["spelled-differently", "Guaranteed"],
            vec!["storage-only", "BestEffort"],
        ],
        "{}",
        out.stdout
    );
    let describe = cluster.kubectl(&["describe", "pod", "storage-only"]);
    describe.success();
    assert!(
        describe
            .stdout
            .lines()
            .any(|line| line.starts_with("QoS Class:") && line.ends_with("BestEffort")),
        "{}",
        describe.stdout
    );
}
