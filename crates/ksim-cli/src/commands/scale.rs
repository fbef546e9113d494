//! `ksim scale node`: declaratively makes exactly R simulated nodes
//! (`node-000000`, `node-000001`, …) exist, like `kwokctl scale node`.
//!
//! Node `i` gets podCIDR `10.<i/256>.<i%256>.0/24` (so `10.0.i.0/24` for the
//! first 256) and InternalIP `10.128.0.0 + i + 2` (10.128.0.0/9; 10.128.0.1 is
//! the simulator's address for nodes without one), which bounds R to 32,768.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use indicatif::{ProgressBar, ProgressStyle};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Map, Value, json};

use crate::cluster::KsimHome;

/// Label every node made by `scale node` carries (KWOK's, so its tooling finds them).
pub const SCALE_LABEL: &str = "kwok.x-k8s.io/kwokctl-scale";
/// Most nodes `scale node` can make (the pod CIDRs fill 10.0.0.0/9).
pub const MAX_REPLICAS: usize = 32_768;
const CONCURRENCY: usize = 64;

/// Flags of `ksim scale node`.
#[derive(Debug, Default)]
pub struct ScaleNode {
    /// Cluster name.
    pub name: String,
    /// Kubeconfig holding the cluster's context.
    pub kubeconfig: Option<PathBuf>,
    /// How many nodes must exist.
    pub replicas: usize,
    /// `.path.to.field=VALUE` overrides of the node template's values.
    pub params: Vec<String>,
}

/// The node template's values before `--param`s.
pub fn default_values() -> Value {
    json!({
        "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        "capacity": {},
        "labels": {},
        "annotations": {},
        "taints": [],
    })
}

/// Splits `.a."b.c".d` into its keys.
fn parse_path(path: &str) -> anyhow::Result<Vec<String>> {
    let Some(mut rest) = path.strip_prefix('.') else {
        bail!("invalid param path {path:?}: it must start with '.'");
    };
    let mut keys = Vec::new();
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted
                .find('"')
                .with_context(|| format!("invalid param path {path:?}: unclosed quote"))?;
            keys.push(quoted[..end].to_owned());
            rest = &quoted[end + 1..];
        } else {
            let end = rest.find('.').unwrap_or(rest.len());
            keys.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
        if keys.last().is_some_and(String::is_empty) {
            bail!("invalid param path {path:?}: empty key");
        }
        match rest.strip_prefix('.') {
            Some(next) if !next.is_empty() => rest = next,
            Some(_) => bail!("invalid param path {path:?}: empty key"),
            None if rest.is_empty() => {}
            None => bail!("invalid param path {path:?}"),
        }
    }
    if keys.is_empty() {
        bail!("invalid param path {path:?}: no key");
    }
    Ok(keys)
}

/// Applies one `--param '.path=VALUE'` (VALUE is JSON, else taken as a string).
pub fn apply_param(values: &mut Value, param: &str) -> anyhow::Result<()> {
    let (path, raw) = split_param(param)?;
    let keys = parse_path(path.trim())?;
    let raw = raw.trim();
    let value = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
    let mut target = values;
    for key in &keys {
        if !target.is_object() {
            *target = Value::Object(Map::new());
        }
        target = target
            .as_object_mut()
            .context("just made an object")?
            .entry(key.clone())
            .or_insert(Value::Null);
    }
    *target = value;
    Ok(())
}

fn split_param(param: &str) -> anyhow::Result<(&str, &str)> {
    let mut quoted = false;
    for (i, c) in param.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '=' if !quoted => return Ok((&param[..i], &param[i + 1..])),
            _ => {}
        }
    }
    bail!("invalid param {param:?}: want .path=VALUE")
}

/// The name of scaled node `index`.
pub fn node_name(index: usize) -> String {
    format!("node-{index:06}")
}

/// The index of a scaled node's name.
fn node_index(name: &str) -> Option<usize> {
    let digits = name.strip_prefix("node-")?;
    (digits.len() == 6 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Pod CIDR of scaled node `index`.
pub fn pod_cidr(index: usize) -> String {
    format!("10.{}.{}.0/24", index / 256, index % 256)
}

/// InternalIP of scaled node `index`.
pub fn internal_ip(index: usize) -> String {
    let n = (10u32 << 24) | (128 << 16);
    let address = n + u32::try_from(index).unwrap_or(u32::MAX).saturating_add(2);
    std::net::Ipv4Addr::from(address).to_string()
}

/// Scaled node `index` from the template `values`.
pub fn node(index: usize, values: &Value) -> Value {
    let name = node_name(index);
    let mut labels = json!({
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/role": "agent",
        "node-role.kubernetes.io/agent": "",
        "type": "kwok",
        SCALE_LABEL: "node",
    });
    let mut annotations = json!({
        "kwok.x-k8s.io/node": "fake",
        "node.alpha.kubernetes.io/ttl": "0",
    });
    for (target, field) in [(&mut labels, "labels"), (&mut annotations, "annotations")] {
        if let (Some(target), Some(extra)) = (target.as_object_mut(), values[field].as_object()) {
            for (k, v) in extra {
                let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                target.insert(k.clone(), Value::String(v));
            }
        }
    }
    let allocatable = values["allocatable"].clone();
    let mut capacity = allocatable.clone();
    if let (Some(capacity), Some(given)) =
        (capacity.as_object_mut(), values["capacity"].as_object())
    {
        for (k, v) in given {
            capacity.insert(k.clone(), v.clone());
        }
    }
    let mut spec = json!({"podCIDR": pod_cidr(index), "podCIDRs": [pod_cidr(index)]});
    if let Some(taints) = values["taints"].as_array().filter(|t| !t.is_empty()) {
        spec["taints"] = Value::Array(taints.clone());
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "capacity": capacity,
            "addresses": [{"type": "InternalIP", "address": internal_ip(index)}],
        },
    })
}

/// What to do to reach `replicas` nodes given the indexes of the scaled nodes that exist.
pub fn plan(existing: &[usize], replicas: usize) -> (Vec<usize>, Vec<usize>) {
    let present: std::collections::HashSet<usize> = existing.iter().copied().collect();
    let create = (0..replicas).filter(|i| !present.contains(i)).collect();
    let mut delete: Vec<usize> = existing
        .iter()
        .copied()
        .filter(|i| *i >= replicas)
        .collect();
    delete.sort_unstable_by(|a, b| b.cmp(a));
    (create, delete)
}

fn progress(total: usize, verb: &str) -> ProgressBar {
    if total < 100 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(u64::try_from(total).unwrap_or(u64::MAX));
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({per_sec})") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(format!("{verb} nodes"));
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

async fn create_node(nodes: &Api<Node>, node: Value) -> anyhow::Result<()> {
    let name = node["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let typed: Node = serde_json::from_value(node).context("node template is a Node")?;
    let created = match nodes.create(&PostParams::default(), &typed).await {
        Ok(created) => created,
        Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot create node {name}")),
    };
    // The server may drop status on create (kube-apiserver keeps a Node's): set it then.
    let has_addresses = created
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .is_some_and(|a| !a.is_empty());
    if !has_addresses {
        nodes
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": typed.status})),
            )
            .await
            .with_context(|| format!("cannot set the status of node {name}"))?;
    }
    Ok(())
}

async fn run(client: kube::Client, flags: &ScaleNode, values: &Value) -> anyhow::Result<String> {
    let nodes: Api<Node> = Api::all(client);
    let listed = nodes
        .list_metadata(&ListParams::default().labels(&format!("{SCALE_LABEL}=node")))
        .await
        .context("cannot list nodes")?;
    let existing: Vec<usize> = listed
        .items
        .iter()
        .filter_map(|n| n.metadata.name.as_deref().and_then(node_index))
        .collect();
    let (create, delete) = plan(&existing, flags.replicas);
    let bar = progress(create.len(), "creating");
    futures::stream::iter(create.iter().map(|i| {
        let nodes = nodes.clone();
        let bar = bar.clone();
        let node = node(*i, values);
        async move {
            create_node(&nodes, node).await?;
            bar.inc(1);
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(CONCURRENCY)
    .try_collect::<Vec<()>>()
    .await?;
    bar.finish_and_clear();
    let bar = progress(delete.len(), "deleting");
    futures::stream::iter(delete.iter().map(|i| {
        let nodes = nodes.clone();
        let bar = bar.clone();
        let name = node_name(*i);
        async move {
            match nodes.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e).with_context(|| format!("cannot delete node {name}")),
            }
            bar.inc(1);
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(CONCURRENCY)
    .try_collect::<Vec<()>>()
    .await?;
    bar.finish_and_clear();
    Ok(format!(
        "nodes scaled to {}: {} created, {} deleted",
        flags.replicas,
        create.len(),
        delete.len()
    ))
}

/// `ksim scale node`.
pub fn scale_node(home: &KsimHome, flags: &ScaleNode) -> anyhow::Result<()> {
    if flags.replicas > MAX_REPLICAS {
        bail!(
            "--replicas {} is more than ksim can scale to ({MAX_REPLICAS})",
            flags.replicas
        );
    }
    let mut values = default_values();
    for param in &flags.params {
        apply_param(&mut values, param)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let summary = runtime.block_on(async {
        let client =
            super::connect::cluster_client(home, &flags.name, flags.kubeconfig.as_deref()).await?;
        run(client, flags, &values).await
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    super::print_line(summary?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_override_template_values() {
        let cases = [
            (".allocatable.cpu=\"4\"", "/allocatable/cpu", json!("4")),
            (".allocatable.pods=20", "/allocatable/pods", json!(20)),
            (
                ".labels.\"topology.kubernetes.io/zone\"=zone-a",
                "/labels/topology.kubernetes.io~1zone",
                json!("zone-a"),
            ),
            (
                ".taints=[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]",
                "/taints/0/effect",
                json!("NoSchedule"),
            ),
            (".new.deep.key=x=y", "/new/deep/key", json!("x=y")),
        ];
        for (param, pointer, want) in cases {
            let mut values = default_values();
            apply_param(&mut values, param).expect(param);
            assert_eq!(values.pointer(pointer), Some(&want), "{param}");
        }
    }

    #[test]
    fn malformed_params_are_errors() {
        for bad in [
            "allocatable.cpu=1",
            ".a..b=1",
            ".=1",
            ".a",
            ".\"a=1",
            ".a.=1",
        ] {
            assert!(apply_param(&mut default_values(), bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn scaled_node_follows_the_template() {
        let mut values = default_values();
        apply_param(&mut values, ".allocatable.cpu=\"4\"").expect("valid");
        apply_param(&mut values, ".capacity.cpu=\"8\"").expect("valid");
        apply_param(&mut values, ".labels.zone=a").expect("valid");
        let node = node(3, &values);
        assert_eq!(node["metadata"]["name"], "node-000003");
        assert_eq!(
            node["metadata"]["labels"]["kubernetes.io/hostname"],
            "node-000003"
        );
        assert_eq!(node["metadata"]["labels"]["kubernetes.io/role"], "agent");
        assert_eq!(
            node["metadata"]["labels"]["node-role.kubernetes.io/agent"],
            ""
        );
        assert_eq!(node["metadata"]["labels"]["zone"], "a");
        assert_eq!(node["metadata"]["labels"][SCALE_LABEL], "node");
        assert_eq!(
            node["metadata"]["annotations"]["kwok.x-k8s.io/node"],
            "fake"
        );
        assert_eq!(node["spec"]["podCIDR"], "10.0.3.0/24");
        assert_eq!(node["status"]["allocatable"]["cpu"], "4");
        assert_eq!(node["status"]["allocatable"]["memory"], "256Gi");
        assert_eq!(node["status"]["capacity"]["cpu"], "8");
        assert_eq!(node["status"]["capacity"]["pods"], "110");
        assert_eq!(node["status"]["addresses"][0]["address"], "10.128.0.5");
        assert!(node["spec"].get("taints").is_none());
        serde_json::from_value::<Node>(node).expect("a valid Node");
    }

    #[test]
    fn addresses_and_cidrs_do_not_overlap_up_to_the_limit() {
        assert_eq!(pod_cidr(0), "10.0.0.0/24");
        assert_eq!(pod_cidr(257), "10.1.1.0/24");
        assert_eq!(pod_cidr(MAX_REPLICAS - 1), "10.127.255.0/24");
        assert_eq!(internal_ip(0), "10.128.0.2");
        assert_eq!(internal_ip(MAX_REPLICAS - 1), "10.128.128.1");
    }

    #[test]
    fn plan_creates_missing_and_deletes_highest_first() {
        assert_eq!(plan(&[], 3), (vec![0, 1, 2], vec![]));
        assert_eq!(plan(&[0, 2], 3), (vec![1], vec![]));
        assert_eq!(plan(&[0, 1, 2, 3, 4], 2), (vec![], vec![4, 3, 2]));
        assert_eq!(plan(&[5], 0), (vec![], vec![5]));
        assert_eq!(node_index("node-000012"), Some(12));
        assert_eq!(node_index("node-12"), None);
        assert_eq!(node_index("other"), None);
    }
}
