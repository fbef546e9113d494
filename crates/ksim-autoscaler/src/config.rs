//! Node groups from cluster-autoscaler's kwok provider configuration, read
//! unchanged: the ConfigMap `kwok-provider-config` (key `config`) says how
//! nodes are grouped (`nodegroups.fromNodeLabelKey` or
//! `nodegroups.fromNodeAnnotation`) and where the templates are
//! (`readNodesFrom: configmap`, `configmap: {name, key}`); the templates
//! ConfigMap (default `kwok-provider-templates`, key `templates`) holds a v1
//! List of Nodes (or several YAML documents) whose annotations
//! `cluster-autoscaler.kwok.nodegroup/{name,min-count,max-count,desired-count}`
//! give each group its name and sizes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use serde::Deserialize;

use crate::error::AutoscalerError;

/// The provider configuration ConfigMap's default name.
pub const DEFAULT_CONFIG_NAME: &str = "kwok-provider-config";
/// Its key.
pub const CONFIG_KEY: &str = "config";
/// The templates ConfigMap's default name.
pub const DEFAULT_TEMPLATES_NAME: &str = "kwok-provider-templates";
/// Its key.
pub const TEMPLATES_KEY: &str = "templates";
/// The namespace both are read from by default (cluster-autoscaler's own).
pub const DEFAULT_NAMESPACE: &str = "kube-system";

/// The annotation naming a node's group.
pub const NG_NAME_ANNOTATION: &str = "cluster-autoscaler.kwok.nodegroup/name";
/// A template's group min size.
pub const NG_MIN_ANNOTATION: &str = "cluster-autoscaler.kwok.nodegroup/min-count";
/// A template's group max size.
pub const NG_MAX_ANNOTATION: &str = "cluster-autoscaler.kwok.nodegroup/max-count";
/// A template's group desired size.
pub const NG_DESIRED_ANNOTATION: &str = "cluster-autoscaler.kwok.nodegroup/desired-count";
/// The annotation kwok manages nodes by (`fake` on nodes the provider made).
pub const KWOK_MANAGED_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// The kwok provider's configuration (`kwok-provider-config`, key `config`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct KwokProviderConfig {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub read_nodes_from: String,
    #[serde(default)]
    pub nodegroups: Option<NodegroupsConfig>,
    #[serde(default)]
    pub configmap: Option<ConfigMapRef>,
    /// `nodes` and `kwok` sections are accepted and ignored.
    #[serde(default)]
    pub nodes: Option<serde_json::Value>,
    #[serde(default)]
    pub kwok: Option<serde_json::Value>,
}

/// How nodes are grouped.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NodegroupsConfig {
    #[serde(default)]
    pub from_node_label_key: String,
    #[serde(default)]
    pub from_node_annotation: String,
}

/// Where the templates are.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct ConfigMapRef {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub key: String,
}

/// What groups nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupBy {
    Label(String),
    Annotation(String),
}

impl GroupBy {
    /// The node's grouping value, if it has one.
    pub fn value_of<'a>(&self, node: &'a Node) -> Option<&'a str> {
        let map = match self {
            GroupBy::Label(_) => node.metadata.labels.as_ref(),
            GroupBy::Annotation(_) => node.metadata.annotations.as_ref(),
        }?;
        let key = match self {
            GroupBy::Label(key) | GroupBy::Annotation(key) => key,
        };
        map.get(key).map(String::as_str).filter(|v| !v.is_empty())
    }
}

/// The checked configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    pub group_by: GroupBy,
    /// The templates ConfigMap's name and key.
    pub templates_name: String,
    pub templates_key: String,
}

impl ProviderConfig {
    /// Parses and checks the `config` text as the kwok provider does.
    pub fn parse(text: &str) -> Result<Self, AutoscalerError> {
        let config: KwokProviderConfig = serde_saphyr::from_str(text)
            .map_err(|e| AutoscalerError::Config(format!("failed to decode kwok config: {e}")))?;
        let (templates_name, templates_key) = match config.read_nodes_from.as_str() {
            "configmap" => {
                let Some(map) = &config.configmap else {
                    return Err(AutoscalerError::Config(
                        "please specify a value for 'configmap' in kwok config (currently empty or undefined)".into(),
                    ));
                };
                if map.name.trim().is_empty() {
                    return Err(AutoscalerError::Config(
                        "please specify 'configmap.name' in kwok config (currently empty or undefined)".into(),
                    ));
                }
                let key = if map.key.trim().is_empty() {
                    TEMPLATES_KEY.to_string()
                } else {
                    map.key.clone()
                };
                (map.name.clone(), key)
            }
            "cluster" => {
                return Err(AutoscalerError::Config(
                    "'readNodesFrom: cluster' is not supported by ksim (use 'configmap')".into(),
                ));
            }
            other => {
                return Err(AutoscalerError::Config(format!(
                    "'readNodesFrom' in kwok config is invalid (expected: 'configmap' or 'cluster'): {other}"
                )));
            }
        };
        let Some(groups) = &config.nodegroups else {
            return Err(AutoscalerError::Config(
                "please specify a value for 'nodegroups' in kwok config (currently empty or undefined)".into(),
            ));
        };
        let label = groups.from_node_label_key.trim();
        let annotation = groups.from_node_annotation.trim();
        let group_by = match (label.is_empty(), annotation.is_empty()) {
            (true, true) => {
                return Err(AutoscalerError::Config(
                    "please specify either 'nodegroups.fromNodeLabelKey' or 'nodegroups.fromNodeAnnotation' in kwok provider config (currently empty or undefined)".into(),
                ));
            }
            (false, false) => {
                return Err(AutoscalerError::Config(
                    "please specify either 'nodegroups.fromNodeLabelKey' or 'nodegroups.fromNodeAnnotation' in kwok provider config (you can't use both)".into(),
                ));
            }
            (false, true) => GroupBy::Label(label.to_string()),
            (true, false) => GroupBy::Annotation(annotation.to_string()),
        };
        Ok(ProviderConfig {
            group_by,
            templates_name,
            templates_key,
        })
    }
}

/// One node group: its name, sizes and template node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeGroupSpec {
    pub name: String,
    /// The grouping label's or annotation's value on the template.
    pub group_value: String,
    pub min_size: usize,
    pub max_size: usize,
    pub desired_size: usize,
    /// The template as written (name, uid and versions cleared).
    pub template: Node,
}

#[derive(Deserialize)]
struct NodeList {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    items: Vec<serde_json::Value>,
}

/// Parses the templates text (a v1 List of Nodes, or several YAML
/// documents of Nodes) into node groups: one group per distinct grouping
/// value, named by the template's name annotation or else that value.
pub fn parse_templates(
    text: &str,
    config: &ProviderConfig,
) -> Result<Vec<NodeGroupSpec>, AutoscalerError> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(text)
        .map_err(|e| AutoscalerError::Config(format!("invalid templates: {e}")))?;
    let docs: Vec<serde_json::Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    let mut items: Vec<serde_json::Value> = Vec::new();
    if let [only] = docs.as_slice()
        && only.get("kind").and_then(|k| k.as_str()) != Some("Node")
    {
        let list: NodeList = serde_json::from_value(only.clone())
            .map_err(|e| AutoscalerError::Config(format!("invalid templates: {e}")))?;
        if list.kind != "List" && !list.kind.ends_with("List") {
            return Err(AutoscalerError::Config(
                "invalid templates file (found something other than nodes in the file)".into(),
            ));
        }
        items = list.items;
    } else {
        items.extend(docs);
    }
    let mut groups: BTreeMap<String, NodeGroupSpec> = BTreeMap::new();
    for item in items {
        if item.get("kind").and_then(|k| k.as_str()) != Some("Node") {
            continue;
        }
        let mut node: Node = serde_json::from_value(item)
            .map_err(|e| AutoscalerError::Config(format!("invalid template node: {e}")))?;
        let Some(value) = config.group_by.value_of(&node).map(str::to_string) else {
            continue;
        };
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let annotations = node.metadata.annotations.clone().unwrap_or_default();
        let name = annotations
            .get(NG_NAME_ANNOTATION)
            .filter(|n| !n.is_empty())
            .cloned()
            .unwrap_or_else(|| value.clone());
        if let Some(group) = groups.get_mut(&name) {
            // As the provider: a second template of a group counts towards
            // its target size.
            group.desired_size += 1;
            continue;
        }
        let count = |key: &str, default: usize| -> Result<usize, AutoscalerError> {
            match annotations.get(key).filter(|v| !v.is_empty()) {
                None => Ok(default),
                Some(v) => v.parse::<usize>().map_err(|_| {
                    AutoscalerError::Config(format!(
                        "invalid value for annotation key '{key}' for node '{node_name}'"
                    ))
                }),
            }
        };
        let min_size = count(NG_MIN_ANNOTATION, 0)?;
        let max_size = count(NG_MAX_ANNOTATION, 200)?;
        let desired_size = count(NG_DESIRED_ANNOTATION, min_size)?;
        if max_size < min_size {
            return Err(AutoscalerError::Config(format!(
                "min-count '{min_size}' cannot be lesser than max-count '{max_size}' for the node '{node_name}'"
            )));
        }
        if desired_size > max_size || desired_size < min_size {
            return Err(AutoscalerError::Config(format!(
                "desired-count '{desired_size}' cannot be lesser than min-count '{min_size}' or greater than max-count '{max_size}' for the node '{node_name}'"
            )));
        }
        node.metadata.resource_version = None;
        node.metadata.uid = None;
        node.metadata.generation = None;
        node.metadata.creation_timestamp = None;
        node.metadata.managed_fields = None;
        groups.insert(
            name.clone(),
            NodeGroupSpec {
                name,
                group_value: value,
                min_size,
                max_size,
                desired_size,
                template: node,
            },
        );
    }
    Ok(groups.into_values().collect())
}

/// The priority expander's configuration: ConfigMap
/// `cluster-autoscaler-priority-expander`, key `priorities`, a map of
/// priority to a list of regular expressions over node group names.
pub const PRIORITY_EXPANDER_CONFIGMAP: &str = "cluster-autoscaler-priority-expander";
/// Its key.
pub const PRIORITY_EXPANDER_KEY: &str = "priorities";

/// Parses the priorities: highest first.
pub fn parse_priorities(text: &str) -> Result<Vec<(i64, Vec<regex::Regex>)>, AutoscalerError> {
    let map: BTreeMap<i64, Vec<String>> = serde_saphyr::from_str(text)
        .map_err(|e| AutoscalerError::Config(format!("can't parse YAML with priorities: {e}")))?;
    let mut out = Vec::new();
    for (priority, patterns) in map.into_iter().rev() {
        let mut regexes = Vec::new();
        for pattern in patterns {
            // Unanchored, as Go's regexp.MatchString.
            let regex = regex::Regex::new(&pattern).map_err(|e| {
                AutoscalerError::Config(format!(
                    "can't compile regexp rule for priority {priority} and rule {pattern}: {e}"
                ))
            })?;
            regexes.push(regex);
        }
        out.push((priority, regexes));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
apiVersion: v1alpha1
readNodesFrom: configmap
nodegroups:
  fromNodeLabelKey: "kwok-nodegroup"
nodes:
  skipTaint: true
configmap:
  name: kwok-provider-templates
  key: templates
"#;

    const TEMPLATES: &str = r#"
apiVersion: v1
kind: List
metadata:
  resourceVersion: ""
items:
- apiVersion: v1
  kind: Node
  metadata:
    annotations:
      cluster-autoscaler.kwok.nodegroup/max-count: "10"
      cluster-autoscaler.kwok.nodegroup/min-count: "1"
      cluster-autoscaler.kwok.nodegroup/desired-count: "3"
    labels:
      kwok-nodegroup: workers
    name: workers-template
    resourceVersion: "12"
  status:
    allocatable: {cpu: "2", memory: 8Gi, pods: "110"}
    capacity: {cpu: "2", memory: 8Gi, pods: "110"}
- apiVersion: v1
  kind: Node
  metadata:
    annotations:
      cluster-autoscaler.kwok.nodegroup/name: big
    labels:
      kwok-nodegroup: big-nodes
    name: big-template
- apiVersion: v1
  kind: Node
  metadata:
    name: ungrouped
"#;

    #[test]
    fn the_upstream_sample_configuration_parses() {
        let config = ProviderConfig::parse(CONFIG).expect("valid");
        assert_eq!(config.group_by, GroupBy::Label("kwok-nodegroup".into()));
        assert_eq!(config.templates_name, "kwok-provider-templates");
        assert_eq!(config.templates_key, "templates");
    }

    #[test]
    fn templates_make_groups_with_sizes_and_names() {
        let config = ProviderConfig::parse(CONFIG).expect("valid");
        let groups = parse_templates(TEMPLATES, &config).expect("valid");
        let names: Vec<_> = groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["big", "workers"]);
        let workers = &groups[1];
        assert_eq!(
            (workers.min_size, workers.max_size, workers.desired_size),
            (1, 10, 3)
        );
        assert_eq!(workers.template.metadata.resource_version, None);
        let big = &groups[0];
        assert_eq!((big.min_size, big.max_size, big.desired_size), (0, 200, 0));
        assert_eq!(big.group_value, "big-nodes");
    }

    #[test]
    fn multiple_documents_are_nodes_too() {
        let config = ProviderConfig::parse(CONFIG).expect("valid");
        let text = "apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  labels: {kwok-nodegroup: a}\n---\napiVersion: v1\nkind: Node\nmetadata:\n  name: b\n  labels: {kwok-nodegroup: b}\n";
        let groups = parse_templates(text, &config).expect("valid");
        assert_eq!(groups.len(), 2);
    }

    #[test]
    fn bad_configurations_say_what_is_wrong() {
        let both = "readNodesFrom: configmap\nconfigmap: {name: t}\nnodegroups: {fromNodeLabelKey: a, fromNodeAnnotation: b}\n";
        let err = ProviderConfig::parse(both).expect_err("both keys");
        assert!(err.to_string().contains("you can't use both"), "{err}");
        let no_map = "readNodesFrom: configmap\nnodegroups: {fromNodeLabelKey: a}\n";
        let err = ProviderConfig::parse(no_map).expect_err("no configmap");
        assert!(err.to_string().contains("'configmap'"), "{err}");
        let config = ProviderConfig::parse(CONFIG).expect("valid");
        let bad = "apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  labels: {kwok-nodegroup: a}\n  annotations:\n    cluster-autoscaler.kwok.nodegroup/min-count: \"5\"\n    cluster-autoscaler.kwok.nodegroup/max-count: \"2\"\n";
        let err = parse_templates(bad, &config).expect_err("min > max");
        assert!(err.to_string().contains("cannot be lesser"), "{err}");
    }

    #[test]
    fn priorities_are_highest_first() {
        let p = parse_priorities("10:\n  - .*big.*\n50:\n  - ^workers$\n").expect("valid");
        assert_eq!(p[0].0, 50);
        assert!(p[0].1[0].is_match("workers"));
        assert!(!p[0].1[0].is_match("workers-2"));
        assert!(p[1].1[0].is_match("a-big-group"));
    }
}
