//! Golden outputs of the default stages for given pods and nodes
//! (files under `tests/golden/`; `KSIM_UPDATE_GOLDEN=1` rewrites them).

use std::sync::Arc;

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::{Value, json};

use super::default_stages;
use crate::stage::{CompiledStage, ObjectSnapshot, compile_stages, next_action, select_stage};
use crate::template::{Renderer, StaticTemplateEnv, TemplateEnv};

fn env() -> Arc<dyn TemplateEnv> {
    Arc::new(StaticTemplateEnv {
        now: "2024-01-01T00:01:00Z".into(),
        start_time: "2024-01-01T00:00:00Z".into(),
        node_ip: "10.200.0.1".into(),
        node_name: "node-000000".into(),
        node_port: 10250,
        node_ips: [("node-000000".to_owned(), vec!["10.200.0.1".to_owned()])].into(),
        pod_ips: [("web-0".to_owned(), vec!["10.0.0.1".to_owned()])].into(),
    })
}

fn bare_node() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-000000", "creationTimestamp": "2024-01-01T00:00:00Z",
                     "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"podCIDR": "10.0.0.0/24"}
    })
}

fn described_node() -> Value {
    let mut node = bare_node();
    node["status"] = json!({
        "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        "addresses": [{"type": "InternalIP", "address": "10.200.0.1"}],
        "nodeInfo": {"architecture": "arm64", "kubeletVersion": "v1.33.0"}
    });
    node
}

fn ready_node() -> Value {
    let mut node = described_node();
    node["status"]["phase"] = json!("Running");
    node["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
    node
}

fn pending_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "default", "uid": "u-1",
                     "creationTimestamp": "2024-01-01T00:00:30Z"},
        "spec": {
            "nodeName": "node-000000",
            "initContainers": [
                {"name": "init", "image": "busybox"},
                {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}
            ],
            "containers": [{"name": "app", "image": "nginx"}],
            "readinessGates": [{"conditionType": "example.com/gate"}]
        },
        "status": {"phase": "Pending"}
    })
}

fn host_network_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "agent-0", "namespace": "kube-system", "uid": "u-2"},
        "spec": {"nodeName": "node-000000", "hostNetwork": true,
                 "containers": [{"name": "agent", "image": "agent:1"}]},
        "status": {"phase": "Pending"}
    })
}

fn running_job_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "job-0", "namespace": "default", "uid": "u-3",
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": "j"}]},
        "spec": {"nodeName": "node-000000",
                 "containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": "a"}, {"name": "b"}]}
    })
}

fn terminating_pod() -> Value {
    let mut pod = running_job_pod();
    pod["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:02:00Z");
    pod["metadata"]["finalizers"] = json!(["example.com/keep"]);
    pod
}

fn stages() -> Vec<CompiledStage> {
    let (stages, errors) = compile_stages(default_stages().expect("decodes"));
    assert!(errors.is_empty(), "{errors:?}");
    stages
}

/// The one stage that plays for `object`, and what it does, as JSON.
fn play(stages: &[CompiledStage], object: &Value) -> Value {
    let snapshot = ObjectSnapshot::new(object);
    let kind = object["kind"].as_str().unwrap_or_default();
    let candidates: Vec<CompiledStage> = stages
        .iter()
        .filter(|s| s.applies_to("", kind))
        .cloned()
        .collect();
    let matching = crate::stage::matching_stages(&candidates, &snapshot);
    assert!(
        matching.len() <= 1,
        "ambiguous: {:?}",
        matching.iter().map(|s| s.name()).collect::<Vec<_>>()
    );
    let Some(stage) = select_stage(&candidates, &snapshot, &mut StdRng::seed_from_u64(0)) else {
        return Value::Null;
    };
    let action = next_action(stage, object, &Renderer::new(), &env()).expect("renders");
    json!({
        "stage": stage.name(),
        "event": action.event.map(|e| json!({"type": e.event_type, "reason": e.reason, "message": e.message})),
        "finalizersPatch": action.finalizers_patch,
        "statusPatch": action.status_patch.map(|p| json!({
            "subresource": p.subresource,
            "contentType": p.patch_type.content_type(),
            "data": p.data,
        })),
        "delete": action.delete,
    })
}

fn check_golden(name: &str, got: &Value) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(got).expect("serializes") + "\n";
    if std::env::var_os("KSIM_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).expect("writes golden file");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with KSIM_UPDATE_GOLDEN=1)", path.display()));
    assert_eq!(text, want, "golden {name} differs");
}

#[test]
fn default_stages_render_golden_outputs() {
    let stages = stages();
    let cases = [
        ("node-initialize.bare-node", bare_node()),
        ("node-initialize.described-node", described_node()),
        ("node-heartbeat-with-lease.ready-node", ready_node()),
        ("pod-ready.pending-pod", pending_pod()),
        ("pod-ready.host-network-pod", host_network_pod()),
        ("pod-complete.job-pod", running_job_pod()),
        ("pod-delete.terminating-pod", terminating_pod()),
    ];
    for (name, object) in cases {
        let got = play(&stages, &object);
        let stage = name.split('.').next().unwrap_or_default();
        assert_eq!(got["stage"], json!(stage), "{name}");
        check_golden(name, &got);
    }
}

#[test]
fn steady_objects_match_no_default_stage() {
    let stages = stages();
    let mut running = pending_pod();
    running["status"] =
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
    let mut succeeded = running_job_pod();
    succeeded["status"]["phase"] = json!("Succeeded");
    for object in [running, succeeded] {
        assert_eq!(play(&stages, &object), Value::Null, "{object}");
    }
}

#[test]
fn rendered_status_feeds_the_next_stage() {
    // node-initialize's output makes the node match the heartbeat stage next.
    let stages = stages();
    let mut node = bare_node();
    let first = play(&stages, &node);
    node["status"] = first["statusPatch"]["data"]["status"].clone();
    assert_eq!(
        play(&stages, &node)["stage"],
        json!("node-heartbeat-with-lease")
    );
    // pod-ready's output leaves the pod steady (no job owner).
    let mut pod = pending_pod();
    let first = play(&stages, &pod);
    pod["status"] = first["statusPatch"]["data"]["status"].clone();
    assert_eq!(play(&stages, &pod), Value::Null);
}

#[test]
fn every_shipped_stage_renders_for_matching_kinds() {
    use super::StageSet;
    let mut chaos_pod = pending_pod();
    chaos_pod["metadata"]["annotations"] = json!({
        "pod-init-container-running-failed.stage.kwok.x-k8s.io/container-name": "init",
        "pod-init-container-running-failed.stage.kwok.x-k8s.io/exit-code": "2"
    });
    let mut chaos_node = ready_node();
    chaos_node["metadata"]["annotations"] =
        json!({"node-not-ready.stage.kwok.x-k8s.io/type": "DiskPressure"});
    let renderer = Renderer::new();
    for set in StageSet::ALL {
        for stage in set.stages().expect("decodes") {
            let compiled = CompiledStage::new(stage).expect("compiles");
            for object in [
                pending_pod(),
                running_job_pod(),
                chaos_pod.clone(),
                ready_node(),
                chaos_node.clone(),
            ] {
                if !compiled.applies_to("", object["kind"].as_str().unwrap_or_default()) {
                    continue;
                }
                next_action(&compiled, &object, &renderer, &env()).unwrap_or_else(|e| {
                    panic!("{} on {}: {e}", compiled.name(), object["metadata"]["name"])
                });
            }
        }
    }
    // Spot checks of the chaos set's annotations.
    let chaos = StageSet::Chaos.stages().expect("decodes");
    let failing = CompiledStage::new(chaos[2].clone()).expect("compiles");
    let action = next_action(&failing, &chaos_pod, &renderer, &env()).expect("renders");
    let status = &action.status_patch.expect("status").data["status"];
    assert_eq!(status["phase"], json!("Failed"));
    assert_eq!(
        status["initContainerStatuses"][0]["state"]["terminated"]["exitCode"],
        json!(2)
    );
    assert_eq!(
        status["initContainerStatuses"][1]["state"]["terminated"]["exitCode"],
        json!(0)
    );
    let not_ready = CompiledStage::new(chaos[0].clone()).expect("compiles");
    let action = next_action(&not_ready, &chaos_node, &renderer, &env()).expect("renders");
    let conditions = action.status_patch.expect("status").data["status"]["conditions"].clone();
    assert_eq!(conditions[0]["status"], json!("False"));
    assert_eq!(conditions[0]["reason"], json!("nodeFailed"));
    assert_eq!(conditions[2]["type"], json!("DiskPressure"));
    assert_eq!(conditions[2]["status"], json!("True"));
}
