//! KubeSchedulerConfiguration (`kubescheduler.config.k8s.io/v1`) into
//! profiles: the default plugins merged with each profile's `plugins`
//! (multiPoint and per-extension-point `enabled`/`disabled`, `*` included),
//! score weights, `pluginConfig` arguments and `percentageOfNodesToScore`.
//! Takes the configuration as JSON (the CLI converts YAML).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use serde::Deserialize;

use crate::framework::{
    DEFAULT_PLUGINS, DEFAULT_SCHEDULER_NAME, ExtensionPoint, PluginEntry, Profile,
};
use crate::plugins::node_resources_fit::{ResourceSpec, ScoringStrategyType};
use crate::plugins::pod_topology_spread::DefaultingType;
use crate::plugins::{
    PluginArgs, default_preemption, inter_pod_affinity, node_resources_fit, pod_topology_spread,
};

/// Why a configuration is rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not a KubeSchedulerConfiguration.
    #[error("decoding KubeSchedulerConfiguration: {0}")]
    Decode(String),
    /// A value that is not allowed.
    #[error("{0}")]
    Invalid(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Configuration {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    percentage_of_nodes_to_score: Option<i32>,
    #[serde(default)]
    profiles: Vec<ProfileConfig>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProfileConfig {
    #[serde(default)]
    scheduler_name: Option<String>,
    #[serde(default)]
    percentage_of_nodes_to_score: Option<i32>,
    #[serde(default)]
    plugins: Option<BTreeMap<String, PluginSet>>,
    #[serde(default)]
    plugin_config: Vec<PluginConfig>,
}

#[derive(Debug, Default, Deserialize)]
struct PluginSet {
    #[serde(default)]
    enabled: Vec<PluginRef>,
    #[serde(default)]
    disabled: Vec<PluginRef>,
}

#[derive(Debug, Default, Deserialize)]
struct PluginRef {
    name: String,
    #[serde(default)]
    weight: Option<i64>,
}

#[derive(Debug, Deserialize)]
struct PluginConfig {
    name: String,
    #[serde(default)]
    args: serde_json::Value,
}

/// The result of reading a configuration.
#[derive(Debug)]
pub struct SchedulerConfig {
    pub profiles: Vec<Profile>,
    /// Global `percentageOfNodesToScore` (profiles without their own use it).
    pub percentage_of_nodes_to_score: Option<i32>,
}

/// Reads a KubeSchedulerConfiguration in its JSON form.
pub fn from_json(value: &serde_json::Value) -> Result<SchedulerConfig, ConfigError> {
    let config: Configuration =
        serde_json::from_value(value.clone()).map_err(|e| ConfigError::Decode(e.to_string()))?;
    if let Some(kind) = &config.kind
        && kind != "KubeSchedulerConfiguration"
    {
        return Err(ConfigError::Decode(format!("unexpected kind {kind:?}")));
    }
    if let Some(api_version) = &config.api_version
        && api_version != "kubescheduler.config.k8s.io/v1"
    {
        return Err(ConfigError::Decode(format!(
            "unsupported apiVersion {api_version:?}"
        )));
    }
    check_percentage(config.percentage_of_nodes_to_score)?;
    let profile_configs = if config.profiles.is_empty() {
        vec![ProfileConfig::default()]
    } else {
        config.profiles
    };
    let mut names = BTreeSet::new();
    let mut profiles = Vec::new();
    for profile_config in profile_configs {
        let name = profile_config
            .scheduler_name
            .clone()
            .unwrap_or_else(|| DEFAULT_SCHEDULER_NAME.to_string());
        if !names.insert(name.clone()) {
            return Err(ConfigError::Invalid(format!(
                "profiles[].schedulerName: Duplicate value: {name:?}"
            )));
        }
        check_percentage(profile_config.percentage_of_nodes_to_score)?;
        let entries = merge_plugins(profile_config.plugins.as_ref())?;
        let args = plugin_args(&profile_config.plugin_config)?;
        let mut profile =
            Profile::from_entries(&name, &entries, &args).map_err(ConfigError::Invalid)?;
        profile.percentage_of_nodes_to_score = profile_config
            .percentage_of_nodes_to_score
            .or(config.percentage_of_nodes_to_score);
        profiles.push(profile);
    }
    Ok(SchedulerConfig {
        profiles,
        percentage_of_nodes_to_score: config.percentage_of_nodes_to_score,
    })
}

fn check_percentage(percentage: Option<i32>) -> Result<(), ConfigError> {
    match percentage {
        Some(p) if !(0..=100).contains(&p) => Err(ConfigError::Invalid(format!(
            "percentageOfNodesToScore: Invalid value: {p}: not in valid range [0-100]"
        ))),
        _ => Ok(()),
    }
}

fn point_by_name(name: &str) -> Option<ExtensionPoint> {
    ExtensionPoint::ALL
        .into_iter()
        .find(|p| p.config_name() == name)
}

/// Merges the default multiPoint plugins with the profile's plugin sets.
fn merge_plugins(
    sets: Option<&BTreeMap<String, PluginSet>>,
) -> Result<Vec<PluginEntry>, ConfigError> {
    let empty = BTreeMap::new();
    let sets = sets.unwrap_or(&empty);
    let mut entries: Vec<PluginEntry> = DEFAULT_PLUGINS
        .iter()
        .map(|(name, weight)| PluginEntry {
            name: name.to_string(),
            weight: *weight,
            points: None,
        })
        .collect();
    if let Some(multi) = sets.get("multiPoint") {
        apply_disabled(&mut entries, &multi.disabled, None);
        for enabled in &multi.enabled {
            match entries.iter_mut().find(|e| e.name == enabled.name) {
                Some(entry) => {
                    if let Some(weight) = enabled.weight {
                        entry.weight = weight;
                    }
                    entry.points = None;
                }
                None => entries.push(PluginEntry {
                    name: enabled.name.clone(),
                    weight: enabled.weight.unwrap_or(0),
                    points: None,
                }),
            }
        }
    }
    for (field, set) in sets {
        if field == "multiPoint" {
            continue;
        }
        let point = point_by_name(field)
            .ok_or_else(|| ConfigError::Decode(format!("unknown extension point {field:?}")))?;
        apply_disabled(&mut entries, &set.disabled, Some(point));
        for enabled in &set.enabled {
            if let Some(weight) = enabled.weight
                && point == ExtensionPoint::Score
                && weight <= 0
            {
                return Err(ConfigError::Invalid(format!(
                    "plugins.score.enabled[{:?}].weight: Invalid value: {weight}: must be positive",
                    enabled.name
                )));
            }
            match entries.iter_mut().find(|e| e.name == enabled.name) {
                Some(entry) => {
                    if let Some(points) = entry.points.as_mut() {
                        points.insert(point);
                    }
                    if let Some(weight) = enabled.weight {
                        entry.weight = weight;
                    }
                }
                None => entries.push(PluginEntry {
                    name: enabled.name.clone(),
                    weight: enabled.weight.unwrap_or(0),
                    points: Some(BTreeSet::from([point])),
                }),
            }
        }
    }
    entries.retain(|e| e.points.as_ref().is_none_or(|p| !p.is_empty()));
    Ok(entries)
}

/// Disables plugins (`*`: all) at one point, or everywhere for multiPoint.
fn apply_disabled(
    entries: &mut Vec<PluginEntry>,
    disabled: &[PluginRef],
    point: Option<ExtensionPoint>,
) {
    for plugin in disabled {
        let all = plugin.name == "*";
        match point {
            None => entries.retain(|e| !(all || e.name == plugin.name)),
            Some(point) => {
                for entry in entries.iter_mut().filter(|e| all || e.name == plugin.name) {
                    let points = entry
                        .points
                        .get_or_insert_with(|| ExtensionPoint::ALL.into_iter().collect());
                    points.remove(&point);
                }
            }
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodTopologySpreadArgsConfig {
    #[serde(default)]
    default_constraints: Vec<TopologySpreadConstraint>,
    #[serde(default)]
    defaulting_type: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSpecConfig {
    name: String,
    #[serde(default)]
    weight: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UtilizationShapePoint {
    utilization: i64,
    score: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestedToCapacityRatioConfig {
    #[serde(default)]
    shape: Vec<UtilizationShapePoint>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScoringStrategyConfig {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    resources: Option<Vec<ResourceSpecConfig>>,
    #[serde(default)]
    requested_to_capacity_ratio: Option<RequestedToCapacityRatioConfig>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeResourcesFitArgsConfig {
    #[serde(default)]
    ignored_resources: Vec<String>,
    #[serde(default)]
    ignored_resource_groups: Vec<String>,
    #[serde(default)]
    scoring_strategy: Option<ScoringStrategyConfig>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BalancedAllocationArgsConfig {
    #[serde(default)]
    resources: Option<Vec<ResourceSpecConfig>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InterPodAffinityArgsConfig {
    #[serde(default)]
    hard_pod_affinity_weight: Option<i32>,
    #[serde(default)]
    ignore_preferred_terms_of_existing_pods: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DefaultPreemptionArgsConfig {
    #[serde(default)]
    min_candidate_nodes_percentage: Option<usize>,
    #[serde(default)]
    min_candidate_nodes_absolute: Option<usize>,
}

fn decode<T: for<'de> Deserialize<'de> + Default>(
    name: &str,
    args: &serde_json::Value,
) -> Result<T, ConfigError> {
    if args.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(args.clone())
        .map_err(|e| ConfigError::Decode(format!("pluginConfig {name:?}: {e}")))
}

fn resource_specs(specs: Option<Vec<ResourceSpecConfig>>) -> Option<Vec<ResourceSpec>> {
    specs.map(|specs| {
        specs
            .into_iter()
            .map(|r| ResourceSpec {
                name: r.name,
                weight: r.weight.filter(|w| *w > 0).unwrap_or(1),
            })
            .collect()
    })
}

/// Plugin arguments from `pluginConfig`, defaults for the rest.
fn plugin_args(configs: &[PluginConfig]) -> Result<PluginArgs, ConfigError> {
    let mut args = PluginArgs::default();
    for config in configs {
        match config.name.as_str() {
            pod_topology_spread::NAME => {
                let c: PodTopologySpreadArgsConfig = decode(&config.name, &config.args)?;
                let defaulting_type = match c.defaulting_type.as_deref() {
                    None | Some("System") => DefaultingType::System,
                    Some("List") => DefaultingType::List,
                    Some(other) => {
                        return Err(ConfigError::Invalid(format!(
                            "defaultingType: Unsupported value: {other:?}: supported values: \"List\", \"System\""
                        )));
                    }
                };
                if defaulting_type == DefaultingType::System && !c.default_constraints.is_empty() {
                    return Err(ConfigError::Invalid(
                        "defaultConstraints: Invalid value: when .defaultingType is \"System\", .defaultConstraints must be empty".to_string(),
                    ));
                }
                args.pod_topology_spread = pod_topology_spread::PodTopologySpreadArgs {
                    default_constraints: c.default_constraints,
                    defaulting_type,
                };
            }
            node_resources_fit::NAME => {
                let c: NodeResourcesFitArgsConfig = decode(&config.name, &config.args)?;
                let mut fit = node_resources_fit::NodeResourcesFitArgs {
                    ignored_resources: c.ignored_resources.into_iter().collect(),
                    ignored_resource_groups: c.ignored_resource_groups.into_iter().collect(),
                    ..Default::default()
                };
                if let Some(strategy) = c.scoring_strategy {
                    if let Some(resources) = resource_specs(strategy.resources) {
                        fit.resources = resources;
                    }
                    fit.scoring_strategy = match strategy.kind.as_deref() {
                        None | Some("LeastAllocated") => ScoringStrategyType::LeastAllocated,
                        Some("MostAllocated") => ScoringStrategyType::MostAllocated,
                        Some("RequestedToCapacityRatio") => {
                            ScoringStrategyType::RequestedToCapacityRatio(
                                strategy
                                    .requested_to_capacity_ratio
                                    .unwrap_or_default()
                                    .shape
                                    .into_iter()
                                    .map(|p| (p.utilization, p.score))
                                    .collect(),
                            )
                        }
                        Some(other) => {
                            return Err(ConfigError::Invalid(format!(
                                "scoringStrategy.type: Unsupported value: {other:?}"
                            )));
                        }
                    };
                }
                args.node_resources_fit = fit;
            }
            crate::plugins::balanced_allocation::NAME => {
                let c: BalancedAllocationArgsConfig = decode(&config.name, &config.args)?;
                if let Some(resources) = resource_specs(c.resources) {
                    args.balanced_allocation.resources = resources;
                }
            }
            inter_pod_affinity::NAME => {
                let c: InterPodAffinityArgsConfig = decode(&config.name, &config.args)?;
                if let Some(weight) = c.hard_pod_affinity_weight {
                    if !(0..=100).contains(&weight) {
                        return Err(ConfigError::Invalid(format!(
                            "hardPodAffinityWeight: Invalid value: {weight}: not in valid range [0-100]"
                        )));
                    }
                    args.inter_pod_affinity.hard_pod_affinity_weight = weight;
                }
                if let Some(ignore) = c.ignore_preferred_terms_of_existing_pods {
                    args.inter_pod_affinity
                        .ignore_preferred_terms_of_existing_pods = ignore;
                }
            }
            default_preemption::NAME => {
                let c: DefaultPreemptionArgsConfig = decode(&config.name, &config.args)?;
                if let Some(p) = c.min_candidate_nodes_percentage {
                    args.default_preemption.min_candidate_nodes_percentage = p;
                }
                if let Some(a) = c.min_candidate_nodes_absolute {
                    args.default_preemption.min_candidate_nodes_absolute = a;
                }
            }
            _ => {}
        }
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn names_at(profile: &Profile, point: ExtensionPoint) -> Vec<&'static str> {
        profile.plugins_at(point).iter().map(|p| p.name()).collect()
    }

    #[test]
    fn empty_configuration_is_the_default_profile() {
        let config = from_json(&json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration"
        }))
        .expect("valid");
        assert_eq!(config.profiles.len(), 1);
        let profile = &config.profiles[0];
        assert_eq!(profile.scheduler_name, "default-scheduler");
        assert_eq!(
            names_at(profile, ExtensionPoint::Filter),
            [
                "NodeUnschedulable",
                "NodeName",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "PodTopologySpread",
                "InterPodAffinity"
            ]
        );
        assert_eq!(
            names_at(profile, ExtensionPoint::Score),
            [
                "TaintToleration",
                "NodeAffinity",
                "NodeResourcesFit",
                "PodTopologySpread",
                "InterPodAffinity",
                "NodeResourcesBalancedAllocation",
                "ImageLocality"
            ]
        );
        assert_eq!(
            names_at(profile, ExtensionPoint::PostFilter),
            ["DefaultPreemption"]
        );
    }

    #[test]
    fn profiles_disable_enable_and_weigh_plugins() {
        let config = from_json(&json!({
            "percentageOfNodesToScore": 30,
            "profiles": [
                {
                    "schedulerName": "no-scoring",
                    "plugins": {"score": {"disabled": [{"name": "*"}]}}
                },
                {
                    "schedulerName": "spread-heavy",
                    "percentageOfNodesToScore": 100,
                    "plugins": {
                        "multiPoint": {
                            "enabled": [{"name": "PodTopologySpread", "weight": 5}],
                            "disabled": [{"name": "ImageLocality"}]
                        },
                        "filter": {"disabled": [{"name": "NodePorts"}]},
                        "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 4}]}
                    },
                    "pluginConfig": [{
                        "name": "NodeResourcesFit",
                        "args": {"scoringStrategy": {"type": "MostAllocated"}}
                    }]
                }
            ]
        }))
        .expect("valid");
        let [no_scoring, spread] = config.profiles.as_slice() else {
            panic!("two profiles");
        };
        assert!(names_at(no_scoring, ExtensionPoint::Score).is_empty());
        assert_eq!(names_at(no_scoring, ExtensionPoint::Filter).len(), 8);
        assert_eq!(no_scoring.percentage_of_nodes_to_score, Some(30));
        assert_eq!(spread.percentage_of_nodes_to_score, Some(100));
        assert!(!names_at(spread, ExtensionPoint::Filter).contains(&"NodePorts"));
        assert!(names_at(spread, ExtensionPoint::PreFilter).contains(&"NodePorts"));
        assert!(!names_at(spread, ExtensionPoint::Score).contains(&"ImageLocality"));
        assert_eq!(spread.weight("PodTopologySpread"), 5);
        assert_eq!(spread.weight("NodeResourcesFit"), 4);
        assert_eq!(spread.weight("TaintToleration"), 3);
    }

    #[test]
    fn invalid_configurations_are_rejected() {
        let cases = [
            json!({"kind": "Pod"}),
            json!({"apiVersion": "kubescheduler.config.k8s.io/v1beta3"}),
            json!({"percentageOfNodesToScore": 101}),
            json!({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]}),
            json!({"profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "NoSuchPlugin"}]}}}]}),
            json!({"profiles": [{"plugins": {"sideways": {}}}]}),
            json!({"profiles": [{"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": 0}]}}}]}),
            json!({"profiles": [{"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "Sometimes"}}]}]}),
            json!({"profiles": [{"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}}]}]}),
            json!({"profiles": [{"pluginConfig": [{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 101}}]}]}),
            json!({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Random"}}}]}]}),
            json!({"profiles": "nope"}),
        ];
        for case in cases {
            assert!(from_json(&case).is_err(), "{case}");
        }
    }

    #[test]
    fn plugin_args_reach_the_plugins() {
        let args = plugin_args(&[
            PluginConfig {
                name: "PodTopologySpread".to_string(),
                args: json!({
                    "defaultingType": "List",
                    "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]
                }),
            },
            PluginConfig {
                name: "NodeResourcesFit".to_string(),
                args: json!({
                    "ignoredResourceGroups": ["example.com"],
                    "scoringStrategy": {
                        "type": "RequestedToCapacityRatio",
                        "resources": [{"name": "cpu", "weight": 2}],
                        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
                    }
                }),
            },
            PluginConfig {
                name: "InterPodAffinity".to_string(),
                args: json!({"hardPodAffinityWeight": 0}),
            },
        ])
        .expect("valid");
        assert_eq!(
            args.pod_topology_spread.defaulting_type,
            DefaultingType::List
        );
        assert_eq!(args.pod_topology_spread.default_constraints.len(), 1);
        assert_eq!(
            args.node_resources_fit.scoring_strategy,
            ScoringStrategyType::RequestedToCapacityRatio(vec![(0, 0), (100, 10)])
        );
        assert_eq!(
            args.node_resources_fit.resources,
            vec![ResourceSpec {
                name: "cpu".to_string(),
                weight: 2
            }]
        );
        assert!(
            args.node_resources_fit
                .ignored_resource_groups
                .contains("example.com")
        );
        assert_eq!(args.inter_pod_affinity.hard_pod_affinity_weight, 0);
    }
}
