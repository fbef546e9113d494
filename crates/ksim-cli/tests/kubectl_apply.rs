//! End-to-end tests of `kubectl apply`: client-side (create, then an edited
//! manifest whose three-way strategic merge patch changes an image, drops a
//! container port and a label) and server-side (field managers, conflicts as
//! kubectl prints them, `--force-conflicts`).

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::stdout_json;
use serde_json::{Value, json};

fn cluster() -> TestCluster {
    TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn get_json(cluster: &TestCluster, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend(["-o", "json", "--show-managed-fields"]);
    stdout_json(&cluster.kubectl(&all))
}

const CONFIGMAP: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: shared
data:
  color: blue
  size: small
";

const CONFIGMAP_OTHER_COLOR: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: shared
data:
  color: red
";

#[test]
fn client_side_apply_twice_with_an_edit_stores_exactly_the_edited_object() {
    let cluster = cluster();
    let first = cluster.kubectl(&["apply", "-f", &fixture("deployment.yaml")]);
    assert_eq!(first.success().stdout, "deployment.apps/app created\n");
    let created = get_json(&cluster, &["deployment", "app"]);
    assert_eq!(
        created["metadata"]["labels"],
        json!({"app": "app", "tier": "web"})
    );
    assert_eq!(created["metadata"]["generation"], json!(1));

    let second = cluster.kubectl(&["apply", "-f", &fixture("deployment-edited.yaml")]);
    assert_eq!(second.success().stdout, "deployment.apps/app configured\n");
    let applied = get_json(&cluster, &["deployment", "app"]);
    assert_eq!(applied["metadata"]["labels"], json!({"app": "app"}));
    assert_eq!(applied["metadata"]["generation"], json!(2));
    assert_eq!(
        applied["spec"]["template"]["spec"]["containers"],
        json!([{
            "name": "c",
            "image": "nginx:1.27",
            "imagePullPolicy": "IfNotPresent",
            "ports": [{"containerPort": 80, "protocol": "TCP"}],
            "resources": {},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }])
    );
    // The last applied configuration is the edited manifest.
    let annotations = applied["metadata"]["annotations"]
        .as_object()
        .expect("annotations");
    assert_eq!(
        annotations.keys().collect::<Vec<_>>(),
        vec!["kubectl.kubernetes.io/last-applied-configuration"]
    );
    let last: Value = serde_json::from_str(
        annotations["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .expect("a string"),
    )
    .expect("last-applied-configuration is JSON");
    assert_eq!(last["metadata"]["labels"], json!({"app": "app"}));
    assert_eq!(
        last["spec"]["template"]["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 80}])
    );
    // The resourceVersion moved on; the uid did not.
    assert_eq!(applied["metadata"]["uid"], created["metadata"]["uid"]);
    assert_ne!(
        applied["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );

    let third = cluster.kubectl(&["apply", "-f", &fixture("deployment-edited.yaml")]);
    assert_eq!(third.success().stdout, "deployment.apps/app unchanged\n");
    let unchanged = get_json(&cluster, &["deployment", "app"]);
    assert_eq!(
        unchanged["metadata"]["resourceVersion"],
        applied["metadata"]["resourceVersion"]
    );
}

#[test]
fn client_side_apply_keeps_fields_set_by_others() {
    let cluster = cluster();
    cluster
        .kubectl(&["apply", "-f", &fixture("deployment.yaml")])
        .success();
    // Someone else adds a label that no manifest names...
    cluster
        .kubectl(&["label", "deployment", "app", "owner=someone"])
        .success();
    cluster
        .kubectl(&["apply", "-f", &fixture("deployment-edited.yaml")])
        .success();
    let applied = get_json(&cluster, &["deployment", "app"]);
    // ...while a label apply never knew about survives.
    assert_eq!(
        applied["metadata"]["labels"],
        json!({"app": "app", "owner": "someone"})
    );
}

#[test]
fn server_side_apply_creates_then_reports_conflicts_like_kube_apiserver() {
    let cluster = cluster();
    let created = cluster.kubectl_stdin(&["apply", "--server-side", "-f", "-"], CONFIGMAP);
    assert_eq!(
        created.success().stdout,
        "configmap/shared serverside-applied\n"
    );
    let again = cluster.kubectl_stdin(&["apply", "--server-side", "-f", "-"], CONFIGMAP);
    assert_eq!(
        again.success().stdout,
        "configmap/shared serverside-applied\n"
    );

    let object = get_json(&cluster, &["configmap", "shared"]);
    let managers: Vec<(&str, &str)> = object["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .map(|entry| {
            (
                entry["manager"].as_str().unwrap_or(""),
                entry["operation"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(managers, vec![("kubectl", "Apply")]);
    assert!(
        object["metadata"]["annotations"].is_null(),
        "server-side apply writes no last-applied annotation: {object:#}"
    );

    let conflict = cluster.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=other", "-f", "-"],
        CONFIGMAP_OTHER_COLOR,
    );
    conflict.failure();
    assert!(
        conflict.stderr.starts_with(
            "error: Apply failed with 1 conflict: conflict with \"kubectl\": .data.color\n"
        ),
        "{}",
        conflict.stderr
    );
    assert!(
        conflict.stderr.contains("--force-conflicts"),
        "{}",
        conflict.stderr
    );
    let unchanged = get_json(&cluster, &["configmap", "shared"]);
    assert_eq!(unchanged["data"]["color"], json!("blue"));
}

#[test]
fn server_side_apply_force_conflicts_takes_the_field_over() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(&["apply", "--server-side", "-f", "-"], CONFIGMAP)
        .success();
    let forced = cluster.kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager=other",
            "--force-conflicts",
            "-f",
            "-",
        ],
        CONFIGMAP_OTHER_COLOR,
    );
    assert_eq!(
        forced.success().stdout,
        "configmap/shared serverside-applied\n"
    );
    let object = get_json(&cluster, &["configmap", "shared"]);
    // `other` owns color now; kubectl still owns size, which stays.
    assert_eq!(object["data"], json!({"color": "red", "size": "small"}));
    let owners: Vec<(String, Vec<String>)> = object["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .map(|entry| {
            let data = entry["fieldsV1"]["f:data"]
                .as_object()
                .map(|m| m.keys().filter(|k| *k != ".").cloned().collect())
                .unwrap_or_default();
            (entry["manager"].as_str().unwrap_or("").to_string(), data)
        })
        .collect();
    assert_eq!(
        owners,
        vec![
            ("kubectl".to_string(), vec!["f:size".to_string()]),
            ("other".to_string(), vec!["f:color".to_string()]),
        ]
    );
}

#[test]
fn server_side_apply_by_the_same_manager_removes_fields_it_no_longer_names() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(&["apply", "--server-side", "-f", "-"], CONFIGMAP)
        .success();
    cluster
        .kubectl_stdin(
            &["apply", "--server-side", "--force-conflicts", "-f", "-"],
            CONFIGMAP_OTHER_COLOR,
        )
        .success();
    let object = get_json(&cluster, &["configmap", "shared"]);
    assert_eq!(object["data"], json!({"color": "red"}));
}

#[test]
fn server_side_apply_conflict_names_the_list_item_by_merge_key() {
    let cluster = cluster();
    cluster
        .kubectl(&["apply", "--server-side", "-f", &fixture("deployment.yaml")])
        .success();
    let conflict = cluster.kubectl(&[
        "apply",
        "--server-side",
        "--field-manager=ci",
        "-f",
        &fixture("deployment-edited.yaml"),
    ]);
    conflict.failure();
    assert!(
        conflict.stderr.starts_with(
            "error: Apply failed with 1 conflict: conflict with \"kubectl\": \
             .spec.template.spec.containers[name=\"c\"].image\n"
        ),
        "{}",
        conflict.stderr
    );
    // The owner itself applies the edit: fields it no longer names go.
    cluster
        .kubectl(&[
            "apply",
            "--server-side",
            "-f",
            &fixture("deployment-edited.yaml"),
        ])
        .success();
    let object = get_json(&cluster, &["deployment", "app"]);
    assert_eq!(object["metadata"]["labels"], json!({"app": "app"}));
    assert_eq!(
        object["spec"]["template"]["spec"]["containers"][0]["image"],
        json!("nginx:1.27")
    );
    assert_eq!(
        object["spec"]["template"]["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}])
    );
}

#[test]
fn client_side_apply_merges_lists_by_their_keys_and_drops_what_was_removed() {
    let cluster = cluster();
    cluster
        .kubectl(&["apply", "-f", &fixture("deployment-rich.yaml")])
        .success();
    cluster
        .kubectl(&["label", "deployment", "rich", "extra=1"])
        .success();
    cluster
        .kubectl(&["apply", "-f", &fixture("deployment-rich-edited.yaml")])
        .success();
    let object = get_json(&cluster, &["deployment", "rich"]);
    let mut annotations = object["metadata"]["annotations"].clone();
    if let Some(map) = annotations.as_object_mut() {
        map.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    assert_eq!(annotations, json!({"team": "a"}));
    assert_eq!(object["metadata"]["labels"], json!({"extra": "1"}));
    let spec = &object["spec"]["template"]["spec"];
    assert_eq!(
        spec["tolerations"],
        json!([{"key": "k2", "operator": "Exists"}])
    );
    assert_eq!(
        spec["volumes"],
        json!([{"name": "v2", "configMap": {"name": "cfg2", "defaultMode": 420}}])
    );
    let containers = spec["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "{spec:#}");
    let main = &containers[0];
    assert_eq!(main["name"], json!("main"));
    assert_eq!(main["image"], json!("app:2"));
    assert_eq!(main["args"], json!(["--c"]));
    assert_eq!(main["env"], json!([{"name": "A", "value": "10"}]));
    assert_eq!(main["resources"], json!({"limits": {"cpu": "2"}}));
    assert_eq!(
        main["volumeMounts"],
        json!([{"name": "v2", "mountPath": "/v2"}])
    );
}

#[test]
fn apply_of_a_multi_document_manifest_creates_the_namespace_first() {
    let cluster = cluster();
    let manifest = "apiVersion: v1
kind: Namespace
metadata:
  name: stack
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: conf
  namespace: stack
data:
  k: v
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: stack
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: c, image: api:1}]}
";
    let created = cluster.kubectl_stdin(&["apply", "-f", "-"], manifest);
    assert_eq!(
        created.success().stdout,
        "namespace/stack created\nconfigmap/conf created\ndeployment.apps/api created\n"
    );
    let again = cluster.kubectl_stdin(&["apply", "-f", "-"], manifest);
    assert_eq!(
        again.success().stdout,
        "namespace/stack unchanged\nconfigmap/conf unchanged\ndeployment.apps/api unchanged\n"
    );
    let names = cluster.kubectl(&[
        "get",
        "configmap,deployment",
        "-n",
        "stack",
        "--field-selector=metadata.name!=kube-root-ca.crt",
        "-o",
        "name",
    ]);
    assert_eq!(
        names.success().stdout,
        "configmap/conf\ndeployment.apps/api\n"
    );
}

#[test]
fn client_side_apply_switches_union_fields_with_retain_keys() {
    let cluster = cluster();
    cluster
        .kubectl(&["apply", "-f", &fixture("deployment-retain-keys.yaml")])
        .success();
    let created = get_json(&cluster, &["deployment", "rk"]);
    assert_eq!(
        created["spec"]["strategy"]["rollingUpdate"],
        json!({"maxSurge": "25%", "maxUnavailable": "25%"})
    );
    // kubectl sends $retainKeys for strategy and volumes: the defaulted
    // rollingUpdate and the old emptyDir go, or validation would refuse them.
    cluster
        .kubectl(&[
            "apply",
            "-f",
            &fixture("deployment-retain-keys-edited.yaml"),
        ])
        .success();
    let applied = get_json(&cluster, &["deployment", "rk"]);
    assert_eq!(applied["spec"]["strategy"], json!({"type": "Recreate"}));
    assert_eq!(
        applied["spec"]["template"]["spec"]["volumes"],
        json!([{"name": "data", "configMap": {"name": "cfg", "defaultMode": 420}}])
    );
    // Metadata-only changes leave the generation alone.
    cluster
        .kubectl(&["label", "deployment", "rk", "x=1"])
        .success();
    let labeled = get_json(&cluster, &["deployment", "rk"]);
    assert_eq!(labeled["metadata"]["generation"], json!(2));
}

#[test]
fn server_side_apply_takes_over_a_client_side_applied_object() {
    let cluster = cluster();
    cluster
        .kubectl(&["apply", "-f", &fixture("deployment.yaml")])
        .success();
    // kubectl migrates kubectl-client-side-apply's fields to its apply
    // manager first: no conflict, and removed fields go.
    let out = cluster.kubectl(&[
        "apply",
        "--server-side",
        "-f",
        &fixture("deployment-edited.yaml"),
    ]);
    assert_eq!(
        out.success().stdout,
        "deployment.apps/app serverside-applied\n"
    );
    let object = get_json(&cluster, &["deployment", "app"]);
    assert_eq!(object["metadata"]["labels"], json!({"app": "app"}));
    let container = &object["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], json!("nginx:1.27"));
    assert_eq!(
        container["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}])
    );
    let managers: Vec<&str> = object["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .filter_map(|entry| entry["manager"].as_str())
        .collect();
    assert!(managers.contains(&"kubectl"), "{managers:?}");
    assert!(
        !managers.contains(&"kubectl-client-side-apply"),
        "{managers:?}"
    );
}

#[test]
fn client_side_apply_follows_the_manifest_order_of_merged_lists() {
    let cluster = cluster();
    cluster
        .kubectl(&["apply", "-f", &fixture("deployment-order.yaml")])
        .success();
    // kubectl sends $setElementOrder for containers and env.
    cluster
        .kubectl(&["apply", "-f", &fixture("deployment-order-edited.yaml")])
        .success();
    let object = get_json(&cluster, &["deployment", "order"]);
    let containers: Vec<(String, String, Vec<String>)> =
        object["spec"]["template"]["spec"]["containers"]
            .as_array()
            .expect("containers")
            .iter()
            .map(|c| {
                let env = c["env"]
                    .as_array()
                    .map(|env| {
                        env.iter()
                            .map(|e| e["name"].as_str().unwrap_or("").to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                (
                    c["name"].as_str().unwrap_or("").to_string(),
                    c["image"].as_str().unwrap_or("").to_string(),
                    env,
                )
            })
            .collect();
    assert_eq!(
        containers,
        [
            ("b".to_string(), "nginx".to_string(), vec![]),
            (
                "a".to_string(),
                "nginx:2".to_string(),
                vec![
                    "THIRD".to_string(),
                    "SECOND".to_string(),
                    "FIRST".to_string()
                ]
            ),
        ]
    );
}

#[test]
fn patches_move_field_ownership_to_the_patching_manager() {
    let cluster = cluster();
    cluster
        .kubectl_stdin(&["apply", "--server-side", "-f", "-"], CONFIGMAP)
        .success();
    for (kind, patch) in [
        ("merge", r#"{"data":{"color":"green"}}"#),
        ("strategic", r#"{"data":{"color":"red"}}"#),
        (
            "json",
            r#"[{"op":"replace","path":"/data/color","value":"pink"}]"#,
        ),
    ] {
        cluster
            .kubectl(&[
                "patch",
                "configmap",
                "shared",
                "--type",
                kind,
                "--field-manager=patcher",
                "-p",
                patch,
            ])
            .success();
    }
    let object = get_json(&cluster, &["configmap", "shared"]);
    assert_eq!(object["data"], json!({"color": "pink", "size": "small"}));
    let owners: Vec<(String, String, Value)> = object["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields served as a list")
        .iter()
        .map(|entry| {
            (
                entry["manager"].as_str().unwrap_or("").to_string(),
                entry["operation"].as_str().unwrap_or("").to_string(),
                entry["fieldsV1"]["f:data"].clone(),
            )
        })
        .collect();
    assert_eq!(
        owners,
        vec![
            ("kubectl".into(), "Apply".into(), json!({"f:size": {}})),
            ("patcher".into(), "Update".into(), json!({"f:color": {}})),
        ],
        "{object:#}"
    );
    // The apply manager lost color: applying it again conflicts with the patcher.
    let conflict = cluster.kubectl_stdin(&["apply", "--server-side", "-f", "-"], CONFIGMAP);
    conflict.failure();
    assert!(
        conflict
            .stderr
            .contains("conflict with \"patcher\" using v1: .data.color"),
        "{}",
        conflict.stderr
    );
}
