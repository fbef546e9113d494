//! End-to-end tests of `kubectl explain` over ksim's OpenAPI v3 documents:
//! the header, the field's type and description, and its sub-fields (with
//! `-required-` marks) as kubectl 1.33 prints them.

use std::path::Path;

use ksim_testutils::TestCluster;

fn cluster() -> TestCluster {
    TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

/// The field lines (`  name\t<type>[ -required-]`) of an explain output.
fn field_lines(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|line| line.starts_with("  ") && !line.starts_with("   ") && line.contains('\t'))
        .collect()
}

#[test]
fn explain_pod_spec_containers() {
    let cluster = cluster();
    let out = cluster.kubectl(&["explain", "pod.spec.containers"]);
    out.success();
    assert!(
        out.stdout.starts_with(
            "KIND:       Pod\nVERSION:    v1\n\nFIELD: containers <[]Container>\n\n\nDESCRIPTION:\n    \
             List of containers belonging to the pod. Containers cannot currently be\n    added or \
             removed. There must be at least one container in a Pod. Cannot be\n    updated.\n    \
             A single application container that you want to run within a pod.\n"
        ),
        "{}",
        out.stdout
    );
    let fields = field_lines(&out.stdout);
    for expected in [
        "  args\t<[]string>",
        "  env\t<[]EnvVar>",
        "  image\t<string>",
        "  name\t<string> -required-",
        "  ports\t<[]ContainerPort>",
        "  resources\t<ResourceRequirements>",
        "  securityContext\t<SecurityContext>",
        "  volumeMounts\t<[]VolumeMount>",
    ] {
        assert!(fields.contains(&expected), "{expected:?} in {fields:#?}");
    }
    // Fields come sorted by name.
    let mut sorted = fields.clone();
    sorted.sort();
    assert_eq!(fields, sorted);
}

#[test]
fn explain_deployment_spec_strategy() {
    let cluster = cluster();
    let out = cluster.kubectl(&["explain", "deployment.spec.strategy"]);
    out.success();
    assert!(
        out.stdout.starts_with(
            "GROUP:      apps\nKIND:       Deployment\nVERSION:    v1\n\nFIELD: strategy \
             <DeploymentStrategy>\n\n\nDESCRIPTION:\n    The deployment strategy to use to replace \
             existing pods with new ones.\n    DeploymentStrategy describes how to replace existing \
             pods with new ones.\n"
        ),
        "{}",
        out.stdout
    );
    assert_eq!(
        field_lines(&out.stdout),
        [
            "  rollingUpdate\t<RollingUpdateDeployment>",
            "  type\t<string>"
        ]
    );
    assert!(
        out.stdout
            .contains("    Rolling update config params. Present only if DeploymentStrategyType =\n    RollingUpdate.\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn explain_a_kind_and_a_short_name() {
    let cluster = cluster();
    let out = cluster.kubectl(&["explain", "pdb"]);
    out.success();
    assert!(
        out.stdout.starts_with(
            "GROUP:      policy\nKIND:       PodDisruptionBudget\nVERSION:    v1\n\nDESCRIPTION:\n"
        ),
        "{}",
        out.stdout
    );
    let fields = field_lines(&out.stdout);
    for expected in [
        "  apiVersion\t<string>",
        "  kind\t<string>",
        "  spec\t<PodDisruptionBudgetSpec>",
        "  status\t<PodDisruptionBudgetStatus>",
    ] {
        assert!(fields.contains(&expected), "{expected:?} in {fields:#?}");
    }
    assert_eq!(fields.len(), 5, "{fields:#?}");
}

#[test]
fn explain_an_unknown_field_fails_like_kubectl() {
    let cluster = cluster();
    let out = cluster.kubectl(&["explain", "pod.spec.bogus"]);
    out.failure();
    assert_eq!(out.stderr, "error: field \"bogus\" does not exist\n");
}
