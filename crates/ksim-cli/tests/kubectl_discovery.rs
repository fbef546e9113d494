//! End-to-end tests of discovery through kubectl: `kubectl api-resources`
//! (names, short names, group-versions, scope, kinds, verbs, categories),
//! `kubectl api-versions`, `kubectl version` and the `all` category.

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::{header_line, stdout_json};
use serde_json::json;

fn cluster() -> TestCluster {
    TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

/// The rows of `kubectl api-resources`, cells split on blanks, keyed by
/// (name, group-version).
fn resource_rows(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn api_resources_lists_names_short_names_scope_and_kinds() {
    let cluster = cluster();
    let out = cluster.kubectl(&["api-resources"]);
    out.success();
    assert_eq!(
        header_line(&out).split_whitespace().collect::<Vec<_>>(),
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    );
    let rows = resource_rows(&out.stdout);
    let expected: &[&[&str]] = &[
        &["configmaps", "cm", "v1", "true", "ConfigMap"],
        &["endpoints", "ep", "v1", "true", "Endpoints"],
        &["events", "ev", "v1", "true", "Event"],
        &["namespaces", "ns", "v1", "false", "Namespace"],
        &["nodes", "no", "v1", "false", "Node"],
        &["pods", "po", "v1", "true", "Pod"],
        &["secrets", "v1", "true", "Secret"],
        &["serviceaccounts", "sa", "v1", "true", "ServiceAccount"],
        &["services", "svc", "v1", "true", "Service"],
        &[
            "customresourcedefinitions",
            "crd,crds",
            "apiextensions.k8s.io/v1",
            "false",
            "CustomResourceDefinition",
        ],
        &["daemonsets", "ds", "apps/v1", "true", "DaemonSet"],
        &["deployments", "deploy", "apps/v1", "true", "Deployment"],
        &["replicasets", "rs", "apps/v1", "true", "ReplicaSet"],
        &["statefulsets", "sts", "apps/v1", "true", "StatefulSet"],
        &["jobs", "batch/v1", "true", "Job"],
        &["leases", "coordination.k8s.io/v1", "true", "Lease"],
        &["events", "ev", "events.k8s.io/v1", "true", "Event"],
        &[
            "poddisruptionbudgets",
            "pdb",
            "policy/v1",
            "true",
            "PodDisruptionBudget",
        ],
        &[
            "priorityclasses",
            "pc",
            "scheduling.k8s.io/v1",
            "false",
            "PriorityClass",
        ],
    ];
    for row in expected {
        assert!(
            rows.iter().any(|r| r == row),
            "no api-resources row {row:?} in\n{}",
            out.stdout
        );
    }
    // Subresources are not listed as resources.
    assert!(!out.stdout.contains("pods/status"), "{}", out.stdout);
}

#[test]
fn api_resources_wide_shows_verbs_and_categories() {
    let cluster = cluster();
    let out = cluster.kubectl(&["api-resources", "-o", "wide"]);
    out.success();
    let rows = resource_rows(&out.stdout);
    let row = |name: &str, group_version: &str| {
        rows.iter()
            .find(|r| r[0] == name && r.iter().any(|c| c == group_version))
            .unwrap_or_else(|| panic!("no {name} {group_version} in\n{}", out.stdout))
            .clone()
    };
    let all_verbs = "create,delete,deletecollection,get,list,patch,update,watch";
    let pods = row("pods", "v1");
    assert_eq!(pods[5..], [all_verbs, "all"]);
    let deployments = row("deployments", "apps/v1");
    assert_eq!(deployments[5..], [all_verbs, "all"]);
    let secrets = row("secrets", "v1");
    assert_eq!(secrets[4..], [all_verbs]);
}

#[test]
fn api_resources_by_scope_and_group() {
    let cluster = cluster();
    let cluster_scoped = cluster.kubectl(&["api-resources", "--namespaced=false", "-o", "name"]);
    let names: Vec<&str> = cluster_scoped.success().stdout.lines().collect();
    for expected in [
        "namespaces",
        "nodes",
        "customresourcedefinitions.apiextensions.k8s.io",
        "priorityclasses.scheduling.k8s.io",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    assert!(!names.contains(&"pods"), "{names:?}");
    let policy = cluster.kubectl(&["api-resources", "--api-group=policy"]);
    assert_eq!(
        policy.success().stdout,
        "NAME                   SHORTNAMES   APIVERSION   NAMESPACED   KIND\n\
         poddisruptionbudgets   pdb          policy/v1    true         PodDisruptionBudget\n"
    );
}

#[test]
fn api_versions_lists_the_served_group_versions() {
    let cluster = cluster();
    let out = cluster.kubectl(&["api-versions"]);
    let versions: Vec<&str> = out.success().stdout.lines().collect();
    for expected in [
        "apiextensions.k8s.io/v1",
        "apps/v1",
        "batch/v1",
        "coordination.k8s.io/v1",
        "events.k8s.io/v1",
        "policy/v1",
        "scheduling.k8s.io/v1",
        "v1",
    ] {
        assert!(versions.contains(&expected), "{expected} in {versions:?}");
    }
    let mut sorted = versions.clone();
    sorted.sort();
    assert_eq!(versions, sorted);
}

#[test]
fn version_reports_kubernetes_1_33() {
    let cluster = cluster();
    let out = cluster.kubectl(&["version"]);
    out.success();
    let server = out
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix("Server Version: "))
        .unwrap_or_else(|| panic!("no server version in\n{}", out.stdout));
    assert!(server.starts_with("v1.33."), "{server}");
    assert!(
        !out.stderr.contains("WARNING"),
        "kubectl warns about version skew: {}",
        out.stderr
    );
    let json = stdout_json(&cluster.kubectl(&["version", "-o", "json"]));
    assert_eq!(json["serverVersion"]["major"], json!("1"));
    assert_eq!(json["serverVersion"]["minor"], json!("33"));
    assert_eq!(json["serverVersion"]["platform"], json!("linux/amd64"));
    assert_eq!(json["serverVersion"]["gitVersion"], json!(server));
}

#[test]
fn get_all_lists_the_all_category() {
    let cluster = cluster();
    cluster
        .kubectl(&["create", "deployment", "web", "--image=nginx"])
        .success();
    cluster.kubectl(&["run", "solo", "--image=nginx"]).success();
    cluster
        .kubectl(&["create", "job", "once", "--image=busybox"])
        .success();
    let out = cluster.kubectl(&["get", "all", "-o", "name"]);
    let names: Vec<&str> = out.success().stdout.lines().collect();
    for expected in [
        "pod/solo",
        "service/kubernetes",
        "deployment.apps/web",
        "job.batch/once",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    assert!(
        !names.iter().any(|n| n.starts_with("configmap/")),
        "{names:?}"
    );
}
