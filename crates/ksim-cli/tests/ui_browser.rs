//! The web view in a real browser: headless Chromium driven through
//! WebDriver against a cluster made by `ksim create cluster`, with the
//! cluster changed through kubectl while the page is open (no reload).
//! Screenshots go to `target/ui-screenshots/`.

use std::path::PathBuf;
use std::time::Duration;

use ksim_testutils::TestCluster;
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
    let scaled = cluster.ksim(&["scale", "node", "--replicas", "4"]);
    assert!(scaled.status.success(), "{scaled:?}");
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
