//! End-to-end tests of CustomResourceDefinitions through kubectl: a CRD
//! applied makes its kind served (discovery, short names), its custom
//! resources are listed with the CRD's printer columns, explained from its
//! schema, scaled through the scale subresource, and their status changed
//! only through the status subresource.

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::{header_line, stdout_json, table_rows};
use serde_json::json;

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn widget(name: &str, size: &str, replicas: u32) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n  size: {size}\n  replicas: {replicas}\n"
    )
}

/// A cluster where the Widget CRD (tests/fixtures/crd-widgets.yaml) is
/// established and served, with widgets w1 (small, 1) and w2 (large, 2).
fn cluster_with_widgets() -> TestCluster {
    let cluster = TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")));
    let applied = cluster.apply_crd(
        Path::new(&fixture("crd-widgets.yaml")),
        "widgets.example.com",
    );
    assert_eq!(
        applied.stdout,
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created\n"
    );
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &widget("w1", "small", 1))
        .success();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &widget("w2", "large", 2))
        .success();
    cluster
}

#[test]
fn custom_resources_are_listed_with_printer_columns() {
    let cluster = cluster_with_widgets();
    let table = cluster.kubectl(&["get", "widgets"]);
    table.success();
    assert_eq!(header_line(&table), "NAME   SIZE    REPLICAS   AGE");
    let rows: Vec<Vec<String>> = table_rows(&table)
        .into_iter()
        .map(|row| row[..3].to_vec())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["w1".to_string(), "small".to_string(), "1".to_string()],
            vec!["w2".to_string(), "large".to_string(), "2".to_string()],
        ]
    );
    // Short name, fully qualified name and -A work too.
    let short = cluster.kubectl(&["get", "wd", "-o", "name"]);
    assert_eq!(
        short.success().stdout,
        "widget.example.com/w1\nwidget.example.com/w2\n"
    );
    let all = cluster.kubectl(&["get", "widgets.example.com", "-A"]);
    all.success();
    assert_eq!(
        header_line(&all),
        "NAMESPACE   NAME   SIZE    REPLICAS   AGE"
    );
}

#[test]
fn crd_kind_appears_in_api_resources_and_crd_table() {
    let cluster = cluster_with_widgets();
    let resources = cluster.kubectl(&["api-resources", "--api-group=example.com"]);
    assert_eq!(
        resources.success().stdout,
        "NAME      SHORTNAMES   APIVERSION       NAMESPACED   KIND\n\
         widgets   wd           example.com/v1   true         Widget\n"
    );
    let crds = cluster.kubectl(&["get", "crd"]);
    crds.success();
    // Every cluster also serves ksim's own CRDs (the DPDB).
    assert!(
        header_line(&crds).starts_with("NAME ") && header_line(&crds).ends_with("   CREATED AT"),
        "{}",
        crds.stdout
    );
    let names: Vec<String> = table_rows(&crds)
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(
        names,
        [
            "distributedpoddisruptionbudgets.policy.ksim.io",
            "widgets.example.com"
        ]
    );
    let crd = stdout_json(&cluster.kubectl(&["get", "crd", "widgets.example.com", "-o", "json"]));
    let conditions = crd["status"]["conditions"].as_array().expect("conditions");
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == json!("Established") && c["status"] == json!("True")),
        "{crd:#}"
    );
    assert_eq!(
        crd["status"]["acceptedNames"]["kind"],
        json!("Widget"),
        "{crd:#}"
    );
}

#[test]
fn custom_resources_are_explained_from_the_crd_schema() {
    let cluster = cluster_with_widgets();
    let out = cluster.kubectl(&["explain", "widget.spec"]);
    assert_eq!(
        out.success().stdout,
        "GROUP:      example.com\nKIND:       Widget\nVERSION:    v1\n\nFIELD: spec <Object>\n\n\n\
         DESCRIPTION:\n    What the widget should be.\n    \nFIELDS:\n  replicas\t<integer>\n    \
         <no description>\n\n  size\t<string>\n    How big the widget is.\n\n\n"
    );
}

#[test]
fn custom_resources_scale_through_the_scale_subresource() {
    let cluster = cluster_with_widgets();
    let scaled = cluster.kubectl(&["scale", "widget", "w1", "--replicas=4"]);
    assert_eq!(scaled.success().stdout, "widget.example.com/w1 scaled\n");
    let object = stdout_json(&cluster.kubectl(&["get", "widget", "w1", "-o", "json"]));
    assert_eq!(object["spec"]["replicas"], json!(4));
    assert_eq!(object["metadata"]["generation"], json!(2));
    let scale = stdout_json(&cluster.kubectl(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/default/widgets/w1/scale",
    ]));
    assert_eq!(scale["kind"], json!("Scale"));
    assert_eq!(scale["apiVersion"], json!("autoscaling/v1"));
    assert_eq!(scale["spec"], json!({"replicas": 4}));
    let table = cluster.kubectl(&["get", "widget", "w1"]);
    assert_eq!(table_rows(table.success())[0][2], "4");
}

#[test]
fn status_changes_only_through_the_status_subresource() {
    let cluster = cluster_with_widgets();
    let patched = cluster.kubectl(&[
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Ready","replicas":1}}"#,
    ]);
    assert_eq!(patched.success().stdout, "widget.example.com/w1 patched\n");
    let object = stdout_json(&cluster.kubectl(&["get", "widget", "w1", "-o", "json"]));
    assert_eq!(object["status"], json!({"phase": "Ready", "replicas": 1}));
    // A status update does not bump the generation.
    assert_eq!(object["metadata"]["generation"], json!(1));

    // The main resource ignores status.
    let ignored = cluster.kubectl(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Broken"}}"#,
    ]);
    assert_eq!(
        ignored.success().stdout,
        "widget.example.com/w1 patched (no change)\n"
    );
    let object = stdout_json(&cluster.kubectl(&["get", "widget", "w1", "-o", "json"]));
    assert_eq!(object["status"]["phase"], json!("Ready"));

    // And the status subresource ignores spec.
    cluster
        .kubectl(&[
            "patch",
            "widget",
            "w1",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":"huge"},"status":{"phase":"Done"}}"#,
        ])
        .success();
    let object = stdout_json(&cluster.kubectl(&["get", "widget", "w1", "-o", "json"]));
    assert_eq!(object["spec"]["size"], json!("small"));
    assert_eq!(object["status"]["phase"], json!("Done"));
}

#[test]
fn deleting_the_crd_removes_its_resources_and_kind() {
    let cluster = cluster_with_widgets();
    cluster
        .kubectl(&["delete", "crd", "widgets.example.com"])
        .success();
    let gone = cluster.kubectl(&["get", "crd", "widgets.example.com"]);
    gone.failure();
    assert_eq!(
        gone.stderr,
        "Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io \"widgets.example.com\" not found\n"
    );
    // `api-resources` refreshes kubectl's discovery cache; the group goes
    // once the CRD is gone.
    cluster.wait_for(
        &["api-resources", "--api-group=example.com", "-o", "name"],
        str::is_empty,
    );
    let out = cluster.kubectl(&["get", "widgets"]);
    out.failure();
    assert_eq!(
        out.stderr,
        "error: the server doesn't have a resource type \"widgets\"\n"
    );
    let raw = cluster.kubectl(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/default/widgets",
    ]);
    raw.failure();
}

#[test]
fn unknown_fields_of_custom_resources_are_refused_under_strict_validation() {
    let cluster = cluster_with_widgets();
    let out = cluster.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: odd\nspec:\n  color: red\n",
    );
    out.failure();
    assert_eq!(
        out.stderr,
        "Error from server (BadRequest): error when creating \"STDIN\": Widget in version \"v1\" \
         cannot be handled as a Widget: strict decoding error: unknown field \"spec.color\"\n"
    );
    cluster.kubectl(&["get", "widget", "odd"]).failure();
}
