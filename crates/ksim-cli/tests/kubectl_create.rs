//! End-to-end tests of `kubectl create <kind>`: the generator commands send
//! their bodies as protobuf, and the stored object read back with `-o json`
//! must be the one a kube-apiserver 1.33 stores (kubectl's fields plus the
//! server's defaults).

use std::path::Path;

use ksim_testutils::TestCluster;
use ksim_testutils::kubectl::stdout_json;
use serde_json::{Value, json};

fn cluster() -> TestCluster {
    TestCluster::start_api_only(Path::new(env!("CARGO_BIN_EXE_ksim")))
}

/// One `kubectl create` generator: its arguments, what it prints, how to read
/// the object back and which fields (JSON pointers) must hold which values.
struct CreateCase {
    create: &'static [&'static str],
    printed: &'static str,
    get: &'static [&'static str],
    expected: Vec<(&'static str, Value)>,
}

fn create_cases() -> Vec<CreateCase> {
    vec![
        CreateCase {
            create: &["create", "namespace", "team-a"],
            printed: "namespace/team-a created\n",
            get: &["get", "namespace", "team-a"],
            expected: vec![
                ("/metadata/name", json!("team-a")),
                (
                    "/metadata/labels",
                    json!({"kubernetes.io/metadata.name": "team-a"}),
                ),
                ("/spec/finalizers", json!(["kubernetes"])),
                ("/status/phase", json!("Active")),
            ],
        },
        CreateCase {
            create: &[
                "create",
                "deployment",
                "web",
                "--image=nginx:1.27",
                "--replicas=2",
                "--port=8080",
            ],
            printed: "deployment.apps/web created\n",
            get: &["get", "deployment", "web"],
            expected: vec![
                ("/metadata/labels", json!({"app": "web"})),
                ("/metadata/generation", json!(1)),
                ("/spec/replicas", json!(2)),
                ("/spec/selector", json!({"matchLabels": {"app": "web"}})),
                ("/spec/template/metadata/labels", json!({"app": "web"})),
                ("/spec/template/spec/containers/0/name", json!("nginx")),
                (
                    "/spec/template/spec/containers/0/image",
                    json!("nginx:1.27"),
                ),
                (
                    "/spec/template/spec/containers/0/ports",
                    json!([{"containerPort": 8080, "protocol": "TCP"}]),
                ),
                (
                    "/spec/template/spec/containers/0/imagePullPolicy",
                    json!("IfNotPresent"),
                ),
                (
                    "/spec/strategy",
                    json!({"type": "RollingUpdate",
                           "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
                ),
                ("/spec/revisionHistoryLimit", json!(10)),
                ("/spec/progressDeadlineSeconds", json!(600)),
                ("/spec/template/spec/restartPolicy", json!("Always")),
                ("/spec/template/spec/dnsPolicy", json!("ClusterFirst")),
                (
                    "/spec/template/spec/schedulerName",
                    json!("default-scheduler"),
                ),
                (
                    "/spec/template/spec/terminationGracePeriodSeconds",
                    json!(30),
                ),
            ],
        },
        CreateCase {
            create: &[
                "create",
                "configmap",
                "settings",
                "--from-literal=mode=fast",
                "--from-literal=level=3",
            ],
            printed: "configmap/settings created\n",
            get: &["get", "configmap", "settings"],
            expected: vec![("/data", json!({"mode": "fast", "level": "3"}))],
        },
        CreateCase {
            create: &[
                "create",
                "secret",
                "generic",
                "token",
                "--from-literal=password=s3cret",
            ],
            printed: "secret/token created\n",
            get: &["get", "secret", "token"],
            expected: vec![
                ("/type", json!("Opaque")),
                ("/data", json!({"password": "czNjcmV0"})),
            ],
        },
        CreateCase {
            create: &["create", "service", "clusterip", "front", "--tcp=80:8080"],
            printed: "service/front created\n",
            get: &["get", "service", "front"],
            expected: vec![
                ("/metadata/labels", json!({"app": "front"})),
                ("/spec/type", json!("ClusterIP")),
                ("/spec/selector", json!({"app": "front"})),
                (
                    "/spec/ports",
                    json!([{"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}]),
                ),
                ("/spec/sessionAffinity", json!("None")),
                ("/spec/ipFamilies", json!(["IPv4"])),
                ("/spec/ipFamilyPolicy", json!("SingleStack")),
                ("/spec/internalTrafficPolicy", json!("Cluster")),
            ],
        },
        CreateCase {
            create: &["create", "job", "once", "--image=busybox:1.36"],
            printed: "job.batch/once created\n",
            get: &["get", "job", "once"],
            expected: vec![
                ("/spec/template/spec/containers/0/name", json!("once")),
                (
                    "/spec/template/spec/containers/0/image",
                    json!("busybox:1.36"),
                ),
                ("/spec/template/spec/restartPolicy", json!("Never")),
                ("/spec/backoffLimit", json!(6)),
                ("/spec/completions", json!(1)),
                ("/spec/parallelism", json!(1)),
                ("/spec/completionMode", json!("NonIndexed")),
                ("/spec/suspend", json!(false)),
                (
                    "/spec/template/metadata/labels/batch.kubernetes.io~1job-name",
                    json!("once"),
                ),
                ("/spec/template/metadata/labels/job-name", json!("once")),
                (
                    "/metadata/labels/batch.kubernetes.io~1job-name",
                    json!("once"),
                ),
            ],
        },
        CreateCase {
            create: &[
                "create",
                "priorityclass",
                "high",
                "--value=1000",
                "--description=important",
            ],
            printed: "priorityclass.scheduling.k8s.io/high created\n",
            get: &["get", "priorityclass", "high"],
            expected: vec![
                ("/value", json!(1000)),
                ("/description", json!("important")),
                ("/preemptionPolicy", json!("PreemptLowerPriority")),
            ],
        },
        CreateCase {
            create: &[
                "create",
                "poddisruptionbudget",
                "web-pdb",
                "--selector=app=web",
                "--min-available=1",
            ],
            printed: "poddisruptionbudget.policy/web-pdb created\n",
            get: &["get", "poddisruptionbudget", "web-pdb"],
            expected: vec![
                ("/spec/minAvailable", json!(1)),
                ("/spec/selector", json!({"matchLabels": {"app": "web"}})),
                ("/metadata/generation", json!(1)),
            ],
        },
    ]
}

#[test]
fn create_generators_store_the_object_kube_apiserver_stores() {
    let cluster = cluster();
    for case in create_cases() {
        let created = cluster.kubectl(case.create);
        created.success();
        assert_eq!(created.stdout, case.printed, "{:?}", case.create);
        let mut get: Vec<&str> = case.get.to_vec();
        get.extend(["-o", "json"]);
        let object = stdout_json(&cluster.kubectl(&get));
        for (pointer, value) in &case.expected {
            assert_eq!(
                object.pointer(pointer),
                Some(value),
                "{:?}: field {pointer} of\n{object:#}",
                case.create
            );
        }
        let metadata = &object["metadata"];
        assert!(metadata["uid"].as_str().is_some_and(|u| u.len() == 36));
        assert!(
            metadata["resourceVersion"]
                .as_str()
                .is_some_and(|rv| rv.parse::<u64>().is_ok())
        );
        assert!(metadata["creationTimestamp"].as_str().is_some());
    }
}

#[test]
fn create_twice_says_already_exists() {
    let cluster = cluster();
    cluster
        .kubectl(&["create", "configmap", "twice", "--from-literal=a=b"])
        .success();
    let again = cluster.kubectl(&["create", "configmap", "twice", "--from-literal=a=b"]);
    again.failure();
    assert_eq!(
        again.stderr,
        "error: failed to create configmap: configmaps \"twice\" already exists\n"
    );
}

#[test]
fn created_objects_appear_in_the_namespace_they_were_created_in() {
    let cluster = cluster();
    cluster
        .kubectl(&["create", "namespace", "team-b"])
        .success();
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "api",
            "--image=nginx",
            "-n",
            "team-b",
        ])
        .success();
    let names = cluster.kubectl(&["get", "deployments", "-n", "team-b", "-o", "name"]);
    assert_eq!(names.success().stdout, "deployment.apps/api\n");
    let elsewhere = cluster.kubectl(&["get", "deployments", "-n", "default", "-o", "name"]);
    assert_eq!(elsewhere.success().stdout, "");
}

#[test]
fn cluster_ip_services_get_distinct_addresses() {
    let cluster = cluster();
    for name in ["one", "two"] {
        cluster
            .kubectl(&["create", "service", "clusterip", name, "--tcp=80:80"])
            .success();
    }
    let ip = |name: &str| {
        cluster
            .kubectl(&["get", "service", name, "-o", "jsonpath={.spec.clusterIP}"])
            .success()
            .stdout
            .clone()
    };
    let (one, two) = (ip("one"), ip("two"));
    assert!(one.starts_with("10.96."), "{one}");
    assert!(two.starts_with("10.96."), "{two}");
    assert_ne!(one, two);
    assert_ne!(one, "10.96.0.1", "the kubernetes service holds 10.96.0.1");
}

#[test]
fn configmap_and_secret_from_files_keep_binary_bytes() {
    let cluster = cluster();
    let dir = cluster.env().root();
    let binary = dir.join("blob.bin");
    let text = dir.join("note.txt");
    std::fs::write(&binary, [0u8, 1, 0xff, 0xfe]).expect("write");
    std::fs::write(&text, "hello\n").expect("write");
    let from_binary = format!("--from-file={}", binary.display());
    let from_text = format!("--from-file={}", text.display());
    cluster
        .kubectl(&["create", "configmap", "files", &from_binary, &from_text])
        .success();
    let cm = stdout_json(&cluster.kubectl(&["get", "configmap", "files", "-o", "json"]));
    assert_eq!(cm["data"], json!({"note.txt": "hello\n"}));
    assert_eq!(cm["binaryData"], json!({"blob.bin": "AAH//g=="}));
    cluster
        .kubectl(&["create", "secret", "generic", "blob", &from_binary])
        .success();
    let secret = stdout_json(&cluster.kubectl(&["get", "secret", "blob", "-o", "json"]));
    assert_eq!(secret["data"], json!({"blob.bin": "AAH//g=="}));
}

#[test]
fn deployment_with_a_command_and_several_images() {
    let cluster = cluster();
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "sleeper",
            "--image=busybox",
            "--",
            "sleep",
            "3600",
        ])
        .success();
    let sleeper = stdout_json(&cluster.kubectl(&["get", "deployment", "sleeper", "-o", "json"]));
    let container = &sleeper["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["command"], json!(["sleep", "3600"]));
    assert!(container.get("args").is_none(), "{container:#}");
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "pair",
            "--image=nginx:1.27",
            "--image=redis:7",
        ])
        .success();
    let pair = stdout_json(&cluster.kubectl(&["get", "deployment", "pair", "-o", "json"]));
    let names: Vec<&str> = pair["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .map(|c| c["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["nginx", "redis"]);
}
