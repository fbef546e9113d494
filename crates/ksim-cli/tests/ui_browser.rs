//! The web view in a real browser: headless Chromium driven through
//! WebDriver against a cluster made by `ksim create cluster`, with the
//! cluster changed through kubectl while the page is open (no reload).
//! Screenshots go to `target/ui-screenshots/`.

use std::path::PathBuf;
use std::time::Duration;

use ksim_testutils::TestCluster;
use ksim_testutils::component::TAINTS_POLICY;
use ksim_testutils::webdriver::Browser;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

fn ksim() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_ksim"))
}

fn screenshot_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/ui-screenshots")
        .join(name)
}

/// Four Ready nodes: zone-a holds node-000000 and -01, zone-b -02 and -03;
/// label `number` is 1 for the even ones and 2 for the odd ones.
fn cluster_with_zones() -> TestCluster {
    let cluster = TestCluster::start(ksim());
    cluster.scale_nodes(4);
    for (node, zone, number) in [
        ("node-000000", "zone-a", "1"),
        ("node-000001", "zone-a", "2"),
        ("node-000002", "zone-b", "1"),
        ("node-000003", "zone-b", "2"),
    ] {
        cluster
            .kubectl(&[
                "label",
                "node",
                node,
                &format!("topology.kubernetes.io/zone={zone}"),
                &format!("number={number}"),
            ])
            .success();
    }
    cluster
}

/// The URL `ksim ui` prints.
fn ui_url(cluster: &TestCluster) -> String {
    let output = cluster.ksim(&["ui", "--no-open"]);
    assert!(output.status.success(), "{output:?}");
    let url = String::from_utf8_lossy(&output.stdout).trim().to_string();
    assert_eq!(url, format!("{}/ui/", cluster.server()));
    url
}

fn open(cluster: &TestCluster) -> Browser {
    let browser = Browser::start(1600, 1000);
    browser.goto(&ui_url(cluster));
    browser.wait_for(
        "the first render",
        WAIT,
        "document.body.dataset.ready === 'true'",
    );
    browser
}

fn select_key(browser: &Browser, key: &str) {
    browser.execute(
        "const s = document.getElementById('topology-key'); s.value = arguments[0]; s.dispatchEvent(new Event('change'));",
        &[Value::from(key)],
    );
}

/// Pod key → (node box, domain section) as the page shows them.
fn placement(browser: &Browser) -> Vec<(String, String, String)> {
    let value = browser.execute(
        "return [...document.querySelectorAll('#placement [data-pod]')].map(e => [e.dataset.pod, e.closest('[data-node]').dataset.node, e.closest('[data-domain]').dataset.domain]);",
        &[],
    );
    serde_json::from_value(value).expect("triples")
}

/// The nodes of the pods matching `selector`, from kubectl.
fn nodes_of(cluster: &TestCluster, selector: &str) -> Vec<(String, String)> {
    let out = cluster
        .kubectl(&[
            "get",
            "pods",
            "-l",
            selector,
            "-o",
            "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.spec.nodeName}{\"\\n\"}{end}",
        ])
        .success()
        .stdout
        .clone();
    out.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(p, n)| (p.to_string(), n.to_string()))
        .collect()
}

fn zone_of(node: &str) -> &'static str {
    match node {
        "node-000000" | "node-000001" => "zone-a",
        _ => "zone-b",
    }
}

fn number_of(node: &str) -> &'static str {
    match node {
        "node-000000" | "node-000002" => "1",
        _ => "2",
    }
}

#[test]
fn placement_groups_by_the_chosen_key_updates_live_and_regroups() {
    let cluster = cluster_with_zones();
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=4",
        ])
        .success();
    cluster.wait_for(
        &[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].spec.nodeName}",
        ],
        |out| out.split_whitespace().count() == 4,
    );
    let browser = open(&cluster);
    select_key(&browser, "topology.kubernetes.io/zone");
    browser.wait_for(
        "the four web pods",
        WAIT,
        "document.querySelectorAll('#placement [data-pod^=\"default/web-\"]').length === 4 && document.querySelectorAll('#placement [data-domain]').length === 2",
    );
    let shown = placement(&browser);
    for (pod, node) in nodes_of(&cluster, "app=web") {
        let (_, shown_node, domain) = shown
            .iter()
            .find(|(p, _, _)| *p == pod)
            .unwrap_or_else(|| panic!("{pod} is not shown: {shown:?}"));
        assert_eq!(*shown_node, node, "{pod}");
        assert_eq!(domain, zone_of(&node), "{pod}");
    }
    // The spread of the selected pods: 4 pods over two zones.
    let counts = browser.execute(
        "return [...document.querySelectorAll('[data-domain-count]')].map(r => r.dataset.domainCount + '=' + r.cells[1].textContent);",
        &[],
    );
    let total: u32 = serde_json::from_value::<Vec<String>>(counts)
        .expect("counts")
        .iter()
        .map(|c| {
            c.rsplit('=')
                .next()
                .and_then(|n| n.parse::<u32>().ok())
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(total, 4);

    // A pod created with kubectl appears without a reload.
    browser.execute("window.notReloaded = true;", &[]);
    cluster
        .kubectl(&["run", "solo", "--image=nginx", "--labels=app=solo"])
        .success();
    browser.wait_for(
        "the new pod on its node",
        WAIT,
        "document.querySelector('#placement [data-pod=\"default/solo\"]') !== null",
    );
    assert_eq!(
        browser.execute("return window.notReloaded === true;", &[]),
        true
    );
    let solo_node = nodes_of(&cluster, "app=solo")[0].1.clone();
    let shown = placement(&browser);
    let solo = shown
        .iter()
        .find(|(p, _, _)| p == "default/solo")
        .expect("solo shown");
    assert_eq!(
        (solo.1.as_str(), solo.2.as_str()),
        (solo_node.as_str(), zone_of(&solo_node))
    );

    // A filter by label selector: the API server selects, the page dims the rest.
    browser.execute(
        "document.getElementById('selector').value = 'app=web'; document.getElementById('filter').requestSubmit();",
        &[],
    );
    browser.wait_for(
        "only the web pods selected",
        WAIT,
        "document.querySelectorAll('#placement [data-pod]:not(.dim)').length === 4 && document.querySelector('#placement [data-pod=\"default/solo\"]').classList.contains('dim')",
    );
    browser.screenshot(&screenshot_path("placement-zone.png"));

    // Switching the key regroups the same pods.
    select_key(&browser, "number");
    browser.wait_for(
        "groups by number",
        WAIT,
        "[...document.querySelectorAll('#placement [data-domain]')].map(s => s.dataset.domain).join(',') === '1,2'",
    );
    for (pod, node, domain) in placement(&browser) {
        assert_eq!(domain, number_of(&node), "{pod} on {node}");
    }
    // A cordoned node is marked.
    cluster.kubectl(&["cordon", "node-000003"]).success();
    browser.wait_for(
        "the cordoned mark",
        WAIT,
        "document.querySelector('[data-node=\"node-000003\"] .mark.cordoned') !== null",
    );
    browser.screenshot(&screenshot_path("placement-number.png"));
}

const WORKLOADS: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: a, image: agent, resources: {requests: {cpu: 100m, memory: 64Mi}}}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: store}
spec:
  replicas: 2
  serviceName: store
  selector: {matchLabels: {app: store}}
  template:
    metadata: {labels: {app: store}}
    spec: {containers: [{name: s, image: store, resources: {requests: {cpu: "4", memory: 8Gi}}}]}
---
apiVersion: v1
kind: Pod
metadata:
  name: big
  annotations: {ksim.io/record-decisions: "true"}
spec:
  containers: [{name: big, image: big, resources: {requests: {cpu: "1000"}}}]
"#;

fn db_pod(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: db}}}}\nspec:\n  nodeName: {node}\n  containers: [{{name: db, image: db, resources: {{requests: {{cpu: '2', memory: 4Gi}}}}}}]\n---\n"
    )
}

const BUDGET: &str = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: db}\nspec:\n  minAvailable: 2\n  selector: {matchLabels: {app: db}}\n";

fn timeline_has(kind: &str, pod: &str, by: &str) -> String {
    format!(
        "[...document.querySelectorAll('#timeline tr[data-timeline=\"{kind}\"]')].some(r => r.cells[2].textContent === '{pod}' && r.cells[3].textContent === '{by}')"
    )
}

#[test]
fn pending_reasons_budgets_evictions_and_refusals() {
    let cluster = cluster_with_zones();
    let mut manifests = String::from(WORKLOADS);
    manifests.push_str("---\n");
    for (i, node) in ["node-000000", "node-000001", "node-000002"]
        .iter()
        .enumerate()
    {
        manifests.push_str(&db_pod(&format!("db-{i}"), node));
    }
    manifests.push_str(BUDGET);
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &manifests)
        .success();
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=6",
        ])
        .success();
    cluster.wait_for(
        &[
            "get",
            "pdb",
            "db",
            "-o",
            "jsonpath={.status.disruptionsAllowed}",
        ],
        |out| out == "1",
    );
    let browser = open(&cluster);
    select_key(&browser, "topology.kubernetes.io/zone");

    // The pending pod shows kube-scheduler's message, as kubectl shows it.
    let message = cluster.wait_for(
        &[
            "get",
            "pod",
            "big",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].message}",
        ],
        |out| !out.is_empty(),
    );
    assert!(message.contains("Insufficient cpu"), "{message}");
    let shown = browser.wait_for(
        "the pending pod's message",
        WAIT,
        "document.querySelector('[data-pending=\"default/big\"] .msg')?.textContent",
    );
    assert_eq!(shown, Value::from(message.trim()));
    // And the per-node decisions `ksim explain pod` prints.
    browser.execute(
        "document.querySelector('[data-explain=\"default/big\"]').click();",
        &[],
    );
    let rows = browser.wait_for(
        "the decision table",
        WAIT,
        "document.querySelectorAll('[data-decisions=\"default/big\"] tbody tr').length",
    );
    assert_eq!(rows, Value::from(4));
    let verdict = browser.execute(
        "return document.querySelector('[data-decisions=\"default/big\"] tbody tr').cells[1].textContent;",
        &[],
    );
    assert!(
        verdict
            .as_str()
            .is_some_and(|v| v.contains("NodeResourcesFit") && v.contains("Insufficient cpu")),
        "{verdict}"
    );

    // The budget allows one disruption; hovering it highlights its three pods.
    let budget = "[data-budget=\"PodDisruptionBudget/default/db\"]";
    browser.wait_for(
        "the budget's allowed disruptions",
        WAIT,
        &format!("document.querySelector('{budget}')?.dataset.allowed === '1'"),
    );
    browser.execute(
        &format!("document.querySelector('{budget}').dispatchEvent(new MouseEvent('mouseover', {{bubbles: true}}));"),
        &[],
    );
    let highlighted = browser.wait_for(
        "the budget's pods highlighted",
        WAIT,
        "document.querySelectorAll('#placement .p.hl').length === 3 && [...document.querySelectorAll('#placement .p.hl')].map(e => e.dataset.pod).sort().join(',')",
    );
    assert_eq!(
        highlighted,
        Value::from("default/db-0,default/db-1,default/db-2")
    );
    browser.screenshot(&screenshot_path("overview.png"));

    // kubectl drain evicts db-0: the budget drops to 0, the timeline says who.
    cluster
        .kubectl(&[
            "drain",
            "node-000000",
            "--pod-selector=app=db",
            "--force",
            "--ignore-daemonsets",
            "--timeout=30s",
        ])
        .success();
    browser.wait_for(
        "the budget after the eviction",
        WAIT,
        &format!("document.querySelector('{budget}')?.dataset.allowed === '0'"),
    );
    browser.wait_for(
        "the eviction in the timeline",
        WAIT,
        &timeline_has("evicted", "default/db-0", "kubectl drain"),
    );
    // A second drain is refused (429) until its timeout: a refusal shows.
    cluster
        .kubectl(&[
            "drain",
            "node-000001",
            "--pod-selector=app=db",
            "--force",
            "--ignore-daemonsets",
            "--timeout=3s",
        ])
        .failure();
    browser.wait_for(
        "the refusal in the timeline",
        WAIT,
        &timeline_has("refused", "default/db-1", "kubectl drain"),
    );
    let refusal = browser.execute(
        "return [...document.querySelectorAll('#timeline tr[data-timeline=\"refused\"]')][0].cells[4].textContent;",
        &[],
    );
    assert!(
        refusal.as_str().is_some_and(|m| m
            .contains("Cannot evict pod as it would violate the pod's disruption budget.")
            && m.contains("The disruption budget db needs 2 healthy pods and has 2 currently")),
        "{refusal}"
    );
    // The timeline filters by kind.
    browser.execute(
        "const s = document.getElementById('timeline-kind'); s.value = 'refused'; s.dispatchEvent(new Event('change'));",
        &[],
    );
    browser.wait_for(
        "only refusals",
        WAIT,
        "document.querySelectorAll('#timeline tr[data-timeline]').length > 0 && [...document.querySelectorAll('#timeline tr[data-timeline]')].every(r => r.dataset.timeline === 'refused')",
    );
    browser.execute(
        "const s = document.getElementById('timeline-kind'); s.value = ''; s.dispatchEvent(new Event('change'));",
        &[],
    );
    browser.wait_for(
        "all kinds again",
        WAIT,
        "[...document.querySelectorAll('#timeline tr[data-timeline]')].some(r => r.dataset.timeline === 'evicted')",
    );
    browser.resize(1600, 1250);
    browser.screenshot(&screenshot_path("after-drain.png"));
}

/// The timeline rows as (kind, pod, who).
fn timeline_rows(browser: &Browser) -> Vec<(String, String, String)> {
    let value = browser.execute(
        "return [...document.querySelectorAll('#timeline tr[data-timeline]')].map(r => [r.dataset.timeline, r.cells[2].textContent, r.cells[3].textContent]);",
        &[],
    );
    serde_json::from_value(value).expect("triples")
}

/// Picks `by` in the timeline's who filter (it offers whoever it has named).
fn filter_who(browser: &Browser, by: &str) {
    browser.wait_for(
        "the who filter to offer it",
        WAIT,
        &format!(
            "[...document.getElementById('timeline-by').options].some(o => o.value === '{by}')"
        ),
    );
    browser.execute(
        "const s = document.getElementById('timeline-by'); s.value = arguments[0]; s.dispatchEvent(new Event('change'));",
        &[Value::from(by)],
    );
}

/// The one pod matching `selector` once it runs: (name, node).
fn running_pod(cluster: &TestCluster, selector: &str) -> (String, String) {
    let out = cluster.wait_for(
        &[
            "get",
            "pods",
            "-l",
            selector,
            "-o",
            "jsonpath={range .items[?(@.status.phase==\"Running\")]}{.metadata.name} {.spec.nodeName}{\"\\n\"}{end}",
        ],
        |out| out.lines().count() == 1,
    );
    let (name, node) = out.trim().split_once(' ').expect("name and node");
    (name.to_string(), node.to_string())
}

/// `ksim deschedule` evicts a pod from a node tainted after it started:
/// the timeline names the descheduler (not the scheduler, whose Scheduled
/// rows it also shows), and the who filter keeps one or the other.
#[test]
fn the_timeline_names_the_descheduler_and_filters_by_who() {
    let cluster = cluster_with_zones();
    cluster
        .kubectl(&["create", "deployment", "moved", "--image=nginx"])
        .success();
    let (pod, node) = running_pod(&cluster, "app=moved");
    let browser = open(&cluster);
    cluster
        .kubectl(&["taint", "node", &node, "maintenance=true:NoSchedule"])
        .success();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, TAINTS_POLICY).expect("the policy");
    let run = cluster.ksim(&["deschedule", "--policy", policy.to_str().expect("UTF-8")]);
    assert!(run.status.success(), "{run:?}");
    let evicted = format!("default/{pod}");
    browser.wait_for(
        "the descheduler's eviction in the timeline",
        WAIT,
        &timeline_has("evicted", &evicted, "descheduler"),
    );
    // Its replacement is scheduled: a row by the scheduler.
    browser.wait_for(
        "the replacement's scheduling",
        WAIT,
        "[...document.querySelectorAll('#timeline tr[data-timeline=\"scheduled\"]')].some(r => r.cells[3].textContent === 'scheduler')",
    );
    filter_who(&browser, "descheduler");
    browser.wait_for(
        "only the descheduler's rows",
        WAIT,
        "[...document.querySelectorAll('#timeline tr[data-timeline]')].every(r => r.cells[3].textContent === 'descheduler')",
    );
    assert_eq!(
        timeline_rows(&browser),
        [(
            "evicted".to_string(),
            evicted.clone(),
            "descheduler".to_string()
        )]
    );
    filter_who(&browser, "scheduler");
    browser.wait_for(
        "only the scheduler's rows",
        WAIT,
        "document.querySelectorAll('#timeline tr[data-timeline]').length > 0 && [...document.querySelectorAll('#timeline tr[data-timeline]')].every(r => r.cells[3].textContent === 'scheduler' && r.dataset.timeline === 'scheduled')",
    );
    filter_who(&browser, "");
    browser.wait_for(
        "everyone again",
        WAIT,
        &timeline_has("evicted", &evicted, "descheduler"),
    );
}

/// A node that stops on a virtual clock: six minutes of cluster time later
/// the taint-eviction controller has evicted its pod (the default 300 s
/// unreachable toleration), and the timeline names the node lifecycle.
#[test]
fn the_timeline_names_the_node_lifecycle_for_a_stopped_node() {
    let cluster = TestCluster::start_with(
        ksim(),
        "ksim",
        &[
            "--clock",
            "virtual",
            "--clock-start",
            "2030-01-01T00:00:00Z",
        ],
    );
    let scaled = cluster.ksim(&["scale", "node", "--replicas", "2"]);
    assert!(scaled.status.success(), "{scaled:?}");
    cluster.wait_for(
        &[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
        ],
        |out| out.lines().filter(|l| *l == "True").count() == 2,
    );
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: v1\nkind: Pod\nmetadata: {name: stranded}\nspec:\n  nodeName: node-000000\n  containers: [{name: c, image: nginx}]\n",
        )
        .success();
    let browser = open(&cluster);
    browser.wait_for(
        "the pod on its node",
        WAIT,
        "document.querySelector('[data-node=\"node-000000\"] [data-pod=\"default/stranded\"]') !== null",
    );
    let stopped = cluster.ksim(&["node", "stop", "node-000000"]);
    assert!(stopped.status.success(), "{stopped:?}");
    let advanced = cluster.ksim(&["clock", "advance", "6m"]);
    assert!(advanced.status.success(), "{advanced:?}");
    browser.wait_for(
        "the taint eviction in the timeline",
        WAIT,
        &timeline_has("evicted", "default/stranded", "node lifecycle"),
    );
    let message = browser.execute(
        "return [...document.querySelectorAll('#timeline tr[data-timeline=\"evicted\"]')].find(r => r.cells[2].textContent === 'default/stranded').cells[4].textContent;",
        &[],
    );
    assert_eq!(
        message,
        Value::from("Marking for deletion Pod default/stranded")
    );
    filter_who(&browser, "node lifecycle");
    browser.wait_for(
        "only the node lifecycle's rows",
        WAIT,
        "document.querySelectorAll('#timeline tr[data-timeline]').length === 1",
    );
}

const KWOK_PROVIDER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/autoscaler/kwok-provider.yaml"
);

/// The autoscaler scales down the one node allowed to go: it evicts the
/// node's pod through the eviction API, and the timeline names the
/// autoscaler.
#[test]
fn the_timeline_names_the_autoscaler_for_a_scale_down() {
    let cluster = TestCluster::start_with(
        ksim(),
        "ksim",
        &[
            "--autoscaler",
            "--scan-interval=500ms",
            "--node-boot-delay=0s",
            "--scale-down-unneeded-time=1s",
            "--scale-down-delay-after-add=0s",
        ],
    );
    // Every node of the group starts scale-down-disabled (from the template).
    let example = std::fs::read_to_string(KWOK_PROVIDER).expect("the example");
    let desired = "cluster-autoscaler.kwok.nodegroup/desired-count: \"3\"\n";
    assert!(example.contains(desired));
    let disabled = format!(
        "{desired}          cluster-autoscaler.kubernetes.io/scale-down-disabled: \"true\"\n"
    );
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &example.replace(desired, &disabled))
        .success();
    cluster.wait_for(
        &[
            "get",
            "nodes",
            "-l",
            "kwok-nodegroup=workers",
            "-o",
            "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
        ],
        |out| out.lines().filter(|l| *l == "True").count() == 3,
    );
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "api",
            "--image=registry.k8s.io/pause:3.10",
        ])
        .success();
    let (pod, node) = running_pod(&cluster, "app=api");
    let browser = open(&cluster);
    // The pod's node may go now: the pod fits on the others.
    cluster
        .kubectl(&[
            "annotate",
            "node",
            &node,
            "cluster-autoscaler.kubernetes.io/scale-down-disabled-",
        ])
        .success();
    let evicted = format!("default/{pod}");
    browser.wait_for(
        "the autoscaler's eviction in the timeline",
        WAIT,
        &timeline_has("evicted", &evicted, "autoscaler"),
    );
    cluster.wait_for(&["get", "nodes", "-o", "name"], |out| {
        !out.contains(&format!("node/{node}"))
    });
    filter_who(&browser, "autoscaler");
    browser.wait_for(
        "only the autoscaler's rows",
        WAIT,
        "document.querySelectorAll('#timeline tr[data-timeline]').length === 1",
    );
    assert_eq!(
        timeline_rows(&browser),
        [("evicted".to_string(), evicted, "autoscaler".to_string())]
    );
}

/// The API server's records of evictions and refusals, read over HTTP
/// through the kubeconfig (`kubectl get --raw`): listed, and watched from
/// the start; and no core/v1 Event for them, as on a real cluster.
#[test]
fn evictions_and_refusals_are_recorded_at_ksim_v1alpha1_evictions_not_as_events() {
    let cluster = cluster_with_zones();
    let mut manifests = String::new();
    for (i, node) in ["node-000000", "node-000001", "node-000002"]
        .iter()
        .enumerate()
    {
        manifests.push_str(&db_pod(&format!("db-{i}"), node));
    }
    manifests.push_str(BUDGET);
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &manifests)
        .success();
    cluster.wait_for(
        &[
            "get",
            "pdb",
            "db",
            "-o",
            "jsonpath={.status.disruptionsAllowed}",
        ],
        |out| out == "1",
    );
    cluster
        .kubectl(&[
            "drain",
            "node-000000",
            "--pod-selector=app=db",
            "--force",
            "--timeout=30s",
        ])
        .success();
    cluster
        .kubectl(&[
            "drain",
            "node-000001",
            "--pod-selector=app=db",
            "--force",
            "--timeout=2s",
        ])
        .failure();
    let summary = |records: &[Value]| -> Vec<String> {
        records
            .iter()
            .map(|r| {
                format!(
                    "{} {} {}",
                    r["outcome"].as_str().unwrap_or_default(),
                    r["pod"]["name"].as_str().unwrap_or_default(),
                    r["requestedBy"].as_str().unwrap_or_default()
                )
            })
            .collect()
    };
    let list = cluster
        .kubectl(&["get", "--raw", "/ksim/v1alpha1/evictions"])
        .success()
        .stdout
        .clone();
    let list: Value = serde_json::from_str(&list).expect("a JSON list");
    assert_eq!(list["kind"], "EvictionRecordList", "{list}");
    let records = list["items"].as_array().expect("items").clone();
    let listed = summary(&records);
    assert_eq!(listed[0], "Evicted db-0 kubectl drain", "{listed:?}");
    // kubectl drain retries a refused eviction every 5 s until its timeout.
    assert!(listed.len() >= 2, "{listed:?}");
    assert!(
        listed[1..]
            .iter()
            .all(|r| r == "Refused db-1 kubectl drain"),
        "{listed:?}"
    );
    assert!(
        records[1]["message"].as_str().is_some_and(
            |m| m.contains("Cannot evict pod as it would violate the pod's disruption budget.")
        ),
        "{records:?}"
    );
    // A watch from the start sends the same records, then ends at its timeout.
    let watched = cluster
        .kubectl(&[
            "get",
            "--raw",
            "/ksim/v1alpha1/evictions?watch=true&timeoutSeconds=1",
        ])
        .success()
        .stdout
        .clone();
    let events: Vec<Value> = watched
        .lines()
        .map(|l| serde_json::from_str(l).expect("a watch event"))
        .collect();
    assert!(events.iter().all(|e| e["type"] == "ADDED"), "{watched}");
    let objects: Vec<Value> = events.iter().map(|e| e["object"].clone()).collect();
    assert_eq!(summary(&objects), listed);
    // kubectl get events shows what a real cluster shows: no Event for
    // the evictions or refusals.
    let reasons = cluster
        .kubectl(&[
            "get",
            "events",
            "-o",
            "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}",
        ])
        .success()
        .stdout
        .clone();
    assert!(
        !reasons
            .lines()
            .any(|r| r == "Evicted" || r == "EvictionRefused"),
        "{reasons}"
    );
}

/// A DistributedPodDisruptionBudget resource, as the DPDB controller serves
/// it (group policy.ksim.io, v1alpha1), reduced to what the page reads.
const DPDB_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: distributedpoddisruptionbudgets.policy.ksim.io}
spec:
  group: policy.ksim.io
  scope: Namespaced
  names: {plural: distributedpoddisruptionbudgets, singular: distributedpoddisruptionbudget, kind: DistributedPodDisruptionBudget, shortNames: [dpdb]}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

const DPDB: &str = r#"
apiVersion: policy.ksim.io/v1alpha1
kind: DistributedPodDisruptionBudget
metadata: {name: dist}
spec:
  selector: {matchLabels: {app: db}}
  minAvailable: 4
  federation: [{cluster: ksim, namespace: default, name: dist}, {cluster: other, namespace: default, name: dist}]
status: {expectedPods: 6, currentHealthy: 6, desiredHealthy: 4, disruptionsAllowed: 2, membersObserved: "2/2"}
"#;

#[test]
fn a_distributed_budget_is_shown_when_its_resource_is_served() {
    let cluster = cluster_with_zones();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let crd = dir.path().join("dpdb-crd.yaml");
    std::fs::write(&crd, DPDB_CRD).expect("the CRD manifest");
    cluster.apply_crd(&crd, "distributedpoddisruptionbudgets.policy.ksim.io");
    let mut manifests = String::from(DPDB);
    manifests.push_str("---\n");
    for (i, node) in ["node-000000", "node-000002"].iter().enumerate() {
        manifests.push_str(&db_pod(&format!("db-{i}"), node));
    }
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &manifests)
        .success();
    let browser = open(&cluster);
    let row = "[data-budget=\"DistributedPodDisruptionBudget/default/dist\"]";
    browser.wait_for(
        "the distributed budget",
        WAIT,
        &format!("document.querySelector('{row}')?.dataset.allowed === '2'"),
    );
    browser.execute(&format!("document.querySelector('{row}').click();"), &[]);
    let highlighted = browser.wait_for(
        "its pods highlighted",
        WAIT,
        "document.querySelectorAll('#placement .p.hl').length === 2 && [...document.querySelectorAll('#placement .p.hl')].map(e => e.dataset.pod).sort().join(',')",
    );
    assert_eq!(highlighted, Value::from("default/db-0,default/db-1"));
}

#[test]
fn ksim_ui_names_a_missing_cluster_in_one_line() {
    let env = ksim_testutils::KsimEnv::new(ksim());
    let output = env.ksim(&["ui", "--name", "nope"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.trim(), "error: cluster \"nope\" does not exist");
    assert!(output.stdout.is_empty());
}

/// The page's pure functions (model.js), imported and run in the browser.
#[test]
fn the_page_arithmetic_quantities_selectors_skew_and_decisions() {
    let cluster = TestCluster::start_api_only(ksim());
    let browser = Browser::start(800, 600);
    browser.goto(&ui_url(&cluster));
    let results = browser.execute_async(
        r#"
        const done = arguments[arguments.length - 1];
        import('./model.js').then((m) => {
          const nodes = new Map([
            ['a', {labels: {zone: 'z1'}}], ['b', {labels: {zone: 'z1'}}],
            ['c', {labels: {zone: 'z2'}}], ['d', {labels: {zone: 'z3'}}], ['e', {labels: {}}],
          ]);
          const pods = [{node: 'a'}, {node: 'b'}, {node: 'a'}, {node: 'c'}, {node: 'e'}];
          const s = m.spread(nodes, pods, 'zone');
          const table = m.decisionTable({
            filter: JSON.stringify({n1: {F: 'passed'}, n2: {F: 'passed'}, n3: {F: 'too small'}, n4: {F: 'passed'}}),
            scores: JSON.stringify({n1: {A: '10', B: '5'}, n2: {A: '50', B: '0'}, n4: {A: '1'}}),
            selected: 'n1',
          });
          done({
            quantities: ['100m', '2', '1.5Gi', '128Mi', '1k', '2e3', 'bad', undefined].map(m.quantity),
            requests: m.podRequests({containers: [{resources: {requests: {cpu: '250m', memory: '1Gi'}}}, {}],
                                     initContainers: [{resources: {requests: {cpu: '2'}}}]}),
            selects: [
              m.selects({matchLabels: {app: 'db'}}, {app: 'db', x: '1'}),
              m.selects({matchLabels: {app: 'db'}}, {app: 'web'}),
              m.selects({matchExpressions: [{key: 'tier', operator: 'In', values: ['a', 'b']}]}, {tier: 'b'}),
              m.selects({matchExpressions: [{key: 'tier', operator: 'NotIn', values: ['a']}]}, {}),
              m.selects({matchExpressions: [{key: 'tier', operator: 'Exists'}]}, {}),
              m.selects({matchExpressions: [{key: 'tier', operator: 'DoesNotExist'}]}, {}),
              m.selects({}, {any: 'thing'}),
              m.selects(null, {any: 'thing'}),
            ],
            owners: [
              m.ownerKind({ownerReferences: [{kind: 'ReplicaSet', controller: true}], labels: {'pod-template-hash': 'x'}}),
              m.ownerKind({ownerReferences: [{kind: 'ReplicaSet', controller: true}]}),
              m.ownerKind({ownerReferences: [{kind: 'Job', controller: true}]}),
              m.ownerKind({}),
            ],
            counts: Object.fromEntries(s.counts), skew: s.skew,
            rows: table.rows.map((r) => [r.node, r.verdict, r.total]),
            plugins: table.plugins,
          });
        }, (e) => done(String(e)));
        "#,
        &[],
    );
    let expected = serde_json::json!({
        "quantities": [0.1, 2, 1610612736_u64, 134217728, 1000, 2000, 0, 0],
        "requests": {"cpu": 2, "memory": 1073741824},
        "selects": [true, false, true, true, false, true, true, false],
        "owners": ["Deployment", "ReplicaSet", "Job", "bare"],
        "counts": {"z1": 3, "z2": 1, "z3": 0},
        "skew": 3,
        "rows": [["n1", "passed", 15], ["n2", "passed", 50], ["n4", "passed", 1], ["n3", "F: too small", null]],
        "plugins": ["A", "B"],
    });
    assert_eq!(results, expected);
}
