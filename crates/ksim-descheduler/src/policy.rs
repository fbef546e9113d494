//! The DeschedulerPolicy (`descheduler/v1alpha2`) as a user writes it, in
//! YAML or JSON: decoding with errors that name the field
//! (`profiles[0].pluginConfig[1].args.thresholds.cpu: ...`), upstream's
//! validation and defaulting (DefaultEvictor enabled at filter and
//! preEvictionFilter when absent), and building each profile's plugins.

use serde::Deserialize;

use crate::Error;
use crate::evictor::{DEFAULT_EVICTOR, DefaultEvictorArgs};
use crate::framework::{ArgsError, BalancePlugin, DeschedulePlugin};
use crate::plugins::{PluginFactory, lookup};

/// The policy's apiVersion.
pub const API_VERSION: &str = "descheduler/v1alpha2";
/// The policy's kind.
pub const KIND: &str = "DeschedulerPolicy";

/// A decoded, validated DeschedulerPolicy.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeschedulerPolicy {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    /// The profiles, run in order.
    #[serde(default)]
    pub profiles: Vec<Profile>,
    /// Only nodes with these labels are descheduled (a selector string).
    #[serde(default)]
    pub node_selector: Option<String>,
    /// maxNoOfPodsToEvictPerNode.
    #[serde(default)]
    pub max_no_of_pods_to_evict_per_node: Option<u32>,
    /// maxNoOfPodsToEvictPerNamespace.
    #[serde(default)]
    pub max_no_of_pods_to_evict_per_namespace: Option<u32>,
    /// maxNoOfPodsToEvictTotal.
    #[serde(default)]
    pub max_no_of_pods_to_evict_total: Option<u32>,
    /// Warning events on pods whose eviction failed.
    #[serde(default)]
    pub eviction_failure_event_notification: Option<bool>,
    /// The grace period of evictions (None: the pod's own).
    #[serde(default)]
    pub grace_period_seconds: Option<i64>,
    /// Accepted for compatibility; ksim has no metrics server (requests only).
    #[serde(default)]
    pub metrics_collector: Option<serde_json::Value>,
    /// Accepted for compatibility; ksim has no metrics providers.
    #[serde(default)]
    pub metrics_providers: Option<serde_json::Value>,
}

/// A profile: plugin args and the extension points they are enabled at.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Profile {
    /// The profile's name (logged with each eviction).
    #[serde(default)]
    pub name: String,
    /// Each plugin's args.
    #[serde(default)]
    pub plugin_config: Vec<PluginConfig>,
    /// The extension points.
    #[serde(default)]
    pub plugins: Plugins,
}

/// One plugin's args.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    /// The plugin.
    pub name: String,
    /// Its args (absent: the plugin's defaults).
    #[serde(default)]
    pub args: Option<serde_json::Value>,
}

/// The extension points (upstream spells them in lower case).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Plugins {
    /// Not used by any plugin (accepted, ignored).
    #[serde(alias = "preSort")]
    pub presort: PluginSet,
    /// Not used by any plugin (accepted, ignored).
    pub sort: PluginSet,
    /// Plugins evicting pods that break a rule on their node.
    pub deschedule: PluginSet,
    /// Plugins evening out the cluster.
    pub balance: PluginSet,
    /// Which pods may be evicted at all (DefaultEvictor).
    pub filter: PluginSet,
    /// Checked just before evicting (DefaultEvictor).
    #[serde(alias = "preEvictionFilter")]
    pub preevictionfilter: PluginSet,
}

/// Plugins enabled and disabled at one extension point.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PluginSet {
    /// Enabled, in order.
    pub enabled: Vec<String>,
    /// Disabled (removed from `enabled`; DefaultEvictor is then not added).
    pub disabled: Vec<String>,
}

impl PluginSet {
    fn effective(&self) -> impl Iterator<Item = (usize, &String)> {
        self.enabled
            .iter()
            .enumerate()
            .filter(|(_, name)| !self.disabled.contains(name))
    }
}

/// A profile ready to run.
pub struct BuiltProfile {
    /// The profile's name.
    pub name: String,
    /// Its deschedule plugins, in order.
    pub deschedule: Vec<Box<dyn DeschedulePlugin>>,
    /// Its balance plugins, in order.
    pub balance: Vec<Box<dyn BalancePlugin>>,
    /// The DefaultEvictor's args.
    pub evictor_args: DefaultEvictorArgs,
    /// DefaultEvictor enabled at filter.
    pub filter: bool,
    /// DefaultEvictor enabled at preEvictionFilter.
    pub pre_eviction_filter: bool,
}

impl DeschedulerPolicy {
    /// Decodes and validates a policy file's text (YAML or JSON).
    pub fn parse(text: &str) -> Result<Self, Error> {
        let value: serde_json::Value = serde_saphyr::from_str(text)
            .map_err(|error| Error::Policy(format!("cannot parse the policy: {error}")))?;
        Self::from_value(value)
    }

    /// Decodes and validates a policy as JSON.
    pub fn from_value(value: serde_json::Value) -> Result<Self, Error> {
        let api_version = value
            .get("apiVersion")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        match api_version {
            API_VERSION => {}
            "descheduler/v1alpha1" => {
                return Err(Error::Policy(
                    "apiVersion: descheduler/v1alpha1 is no longer supported (upstream removed it in v0.31): write the policy as descheduler/v1alpha2 profiles".into(),
                ));
            }
            "" => {
                return Err(Error::Policy(format!(
                    "apiVersion: required, must be {API_VERSION:?}"
                )));
            }
            other => {
                return Err(Error::Policy(format!(
                    "apiVersion: unsupported {other:?}, must be {API_VERSION:?}"
                )));
            }
        }
        let kind = value.get("kind").and_then(serde_json::Value::as_str);
        if kind != Some(KIND) {
            return Err(Error::Policy(format!(
                "kind: must be {KIND:?}, not {:?}",
                kind.unwrap_or_default()
            )));
        }
        let policy: DeschedulerPolicy =
            serde_path_to_error::deserialize(value).map_err(|error| {
                let path = error.path().to_string();
                Error::Policy(format!("{path}: {}", error.into_inner()))
            })?;
        if policy
            .grace_period_seconds
            .is_some_and(|seconds| seconds < 0)
        {
            return Err(Error::Policy(
                "gracePeriodSeconds: must be a non-negative integer".into(),
            ));
        }
        policy.build_profiles()?;
        Ok(policy)
    }

    /// Builds every profile's plugins (validating their args), with
    /// upstream's defaulting of DefaultEvictor.
    pub fn build_profiles(&self) -> Result<Vec<BuiltProfile>, Error> {
        let mut built = Vec::with_capacity(self.profiles.len());
        for (index, profile) in self.profiles.iter().enumerate() {
            built.push(build_profile(index, profile)?);
        }
        Ok(built)
    }

    /// The policy's eviction limits.
    pub fn limits(&self) -> crate::evictor::EvictionLimits {
        crate::evictor::EvictionLimits {
            per_node: self.max_no_of_pods_to_evict_per_node,
            per_namespace: self.max_no_of_pods_to_evict_per_namespace,
            total: self.max_no_of_pods_to_evict_total,
        }
    }
}

fn args_error(prefix: &str, error: ArgsError) -> Error {
    if error.field.is_empty() {
        Error::Policy(format!("{prefix}: {}", error.message))
    } else {
        Error::Policy(format!("{prefix}.{}: {}", error.field, error.message))
    }
}

/// The args of `name` in the profile, and where they are.
fn plugin_args<'a>(
    profile: &'a Profile,
    name: &str,
) -> (Option<&'a serde_json::Value>, Option<usize>) {
    match profile
        .plugin_config
        .iter()
        .position(|config| config.name == name)
    {
        Some(position) => (
            profile.plugin_config[position].args.as_ref(),
            Some(position),
        ),
        None => (None, None),
    }
}

fn build_profile(index: usize, profile: &Profile) -> Result<BuiltProfile, Error> {
    let here = format!("profiles[{index}]");
    let profile_name = &profile.name;
    if profile_name.is_empty() {
        return Err(Error::Policy(format!("{here}.name: required")));
    }
    // Every pluginConfig must name a registered plugin with valid args.
    for (position, config) in profile.plugin_config.iter().enumerate() {
        let at = format!("{here}.pluginConfig[{position}]");
        if profile.plugin_config[..position]
            .iter()
            .any(|other| other.name == config.name)
        {
            return Err(Error::Policy(format!(
                "{at}.name: in profile {profile_name}: plugin {} configured twice",
                config.name
            )));
        }
        let args = config.args.as_ref();
        if config.name == DEFAULT_EVICTOR {
            DefaultEvictorArgs::decode(args).map_err(|e| args_error(&format!("{at}.args"), e))?;
            continue;
        }
        match lookup(&config.name) {
            None => {
                return Err(Error::Policy(format!(
                    "{at}.name: in profile {profile_name}: plugin {} in pluginConfig not registered",
                    config.name
                )));
            }
            Some(PluginFactory::Deschedule(factory)) => {
                factory(args).map_err(|e| args_error(&format!("{at}.args"), e))?;
            }
            Some(PluginFactory::Balance(factory)) => {
                factory(args).map_err(|e| args_error(&format!("{at}.args"), e))?;
            }
        }
    }
    let plugins = &profile.plugins;
    let mut deschedule = Vec::new();
    for (position, name) in plugins.deschedule.effective() {
        let at = format!("{here}.plugins.deschedule.enabled[{position}]");
        let Some(PluginFactory::Deschedule(factory)) = lookup(name) else {
            return Err(Error::Policy(format!(
                "{at}: profile {profile_name:?} configures deschedule extension point of non-existing plugins: [{name}]"
            )));
        };
        deschedule.push(build(factory, profile, name, &here, &at)?);
    }
    let mut balance = Vec::new();
    for (position, name) in plugins.balance.effective() {
        let at = format!("{here}.plugins.balance.enabled[{position}]");
        let Some(PluginFactory::Balance(factory)) = lookup(name) else {
            return Err(Error::Policy(format!(
                "{at}: profile {profile_name:?} configures balance extension point of non-existing plugins: [{name}]"
            )));
        };
        balance.push(build(factory, profile, name, &here, &at)?);
    }
    for (point, set, words) in [
        ("filter", &plugins.filter, "filter"),
        (
            "preevictionfilter",
            &plugins.preevictionfilter,
            "preEvictionFilter",
        ),
    ] {
        if let Some((position, name)) = set.effective().find(|(_, name)| *name != DEFAULT_EVICTOR) {
            return Err(Error::Policy(format!(
                "{here}.plugins.{point}.enabled[{position}]: profile {profile_name:?} configures {words} extension point of non-existing plugins: [{name}]"
            )));
        }
    }
    for (point, set) in [("presort", &plugins.presort), ("sort", &plugins.sort)] {
        if let Some((position, name)) = set.effective().next() {
            return Err(Error::Policy(format!(
                "{here}.plugins.{point}.enabled[{position}]: profile {profile_name:?} configures {point} extension point of non-existing plugins: [{name}]"
            )));
        }
    }
    let enabled_unless_disabled =
        |set: &PluginSet| !set.disabled.iter().any(|name| name == DEFAULT_EVICTOR);
    let (args, _) = plugin_args(profile, DEFAULT_EVICTOR);
    let evictor_args = DefaultEvictorArgs::decode(args).map_err(|e| {
        let (_, position) = plugin_args(profile, DEFAULT_EVICTOR);
        args_error(
            &format!("{here}.pluginConfig[{}].args", position.unwrap_or_default()),
            e,
        )
    })?;
    Ok(BuiltProfile {
        name: profile_name.clone(),
        deschedule,
        balance,
        evictor_args,
        filter: enabled_unless_disabled(&plugins.filter),
        pre_eviction_filter: enabled_unless_disabled(&plugins.preevictionfilter),
    })
}

fn build<T: ?Sized>(
    factory: fn(Option<&serde_json::Value>) -> Result<Box<T>, ArgsError>,
    profile: &Profile,
    name: &str,
    here: &str,
    at: &str,
) -> Result<Box<T>, Error> {
    let (args, position) = plugin_args(profile, name);
    factory(args).map_err(|error| match position {
        Some(position) => args_error(&format!("{here}.pluginConfig[{position}].args"), error),
        None => args_error(&format!("{at} ({name} without pluginConfig)"), error),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<DeschedulerPolicy, String> {
        DeschedulerPolicy::parse(text).map_err(|error| error.to_string())
    }

    const TAINTS: &str = r#"
apiVersion: "descheduler/v1alpha2"
kind: "DeschedulerPolicy"
maxNoOfPodsToEvictPerNode: 5
gracePeriodSeconds: 0
profiles:
  - name: ProfileName
    pluginConfig:
    - name: "DefaultEvictor"
      args:
        evictLocalStoragePods: true
        nodeFit: true
    - name: "RemovePodsViolatingNodeTaints"
      args:
        excludedTaints: ["dedicated=special"]
    plugins:
      deschedule:
        enabled:
          - "RemovePodsViolatingNodeTaints"
"#;

    #[test]
    fn an_upstream_policy_parses_with_default_evictor_defaulted() {
        let policy = parse(TAINTS).expect("valid policy");
        assert_eq!(policy.max_no_of_pods_to_evict_per_node, Some(5));
        assert_eq!(policy.grace_period_seconds, Some(0));
        let profiles = policy.build_profiles().expect("builds");
        assert_eq!(profiles.len(), 1);
        let profile = &profiles[0];
        assert_eq!(profile.name, "ProfileName");
        assert_eq!(profile.deschedule.len(), 1);
        assert_eq!(
            profile.deschedule[0].name(),
            "RemovePodsViolatingNodeTaints"
        );
        assert!(profile.filter && profile.pre_eviction_filter);
        assert!(profile.evictor_args.node_fit);
        assert!(profile.evictor_args.evict_local_storage_pods);
    }

    #[test]
    fn json_policies_parse_too() {
        let json = r#"{"apiVersion":"descheduler/v1alpha2","kind":"DeschedulerPolicy","profiles":[{"name":"p","pluginConfig":[{"name":"PodLifeTime","args":{"maxPodLifeTimeSeconds":60}}],"plugins":{"deschedule":{"enabled":["PodLifeTime"]}}}]}"#;
        assert!(parse(json).is_ok());
    }

    #[test]
    fn bad_policies_are_refused_with_the_field_named() {
        let cases = [
            (
                "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\n",
                "invalid DeschedulerPolicy: apiVersion: descheduler/v1alpha1 is no longer supported",
            ),
            (
                "apiVersion: descheduler/v1alpha2\nkind: Policy\n",
                "invalid DeschedulerPolicy: kind: must be \"DeschedulerPolicy\"",
            ),
            (
                "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nmaxNoOfPodsToEvictPerNode: many\n",
                "invalid DeschedulerPolicy: maxNoOfPodsToEvictPerNode: invalid type",
            ),
            (
                "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  pluginConfig:\n  - name: Nope\n",
                "invalid DeschedulerPolicy: profiles[0].pluginConfig[0].name: in profile p: plugin Nope in pluginConfig not registered",
            ),
            (
                "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  plugins:\n    deschedule:\n      enabled: [Nope]\n",
                "invalid DeschedulerPolicy: profiles[0].plugins.deschedule.enabled[0]: profile \"p\" configures deschedule extension point of non-existing plugins: [Nope]",
            ),
            (
                "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  pluginConfig:\n  - name: DefaultEvictor\n  - name: RemovePodsViolatingNodeTaints\n    args:\n      excludedTaints: [a]\n      includedTaints: [b]\n",
                "invalid DeschedulerPolicy: profiles[0].pluginConfig[1].args.includedTaints: either includedTaints or excludedTaints can be set, but not both",
            ),
            (
                "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  pluginConfig:\n  - name: DefaultEvictor\n    args:\n      minReplica: 2\n",
                "invalid DeschedulerPolicy: profiles[0].pluginConfig[0].args.minReplica: unknown field `minReplica`",
            ),
            (
                "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  pluginConfig:\n  - name: PodLifeTime\n    args:\n      maxPodLifeTimeSeconds: -1\n",
                "invalid DeschedulerPolicy: profiles[0].pluginConfig[0].args.maxPodLifeTimeSeconds: invalid value",
            ),
            (
                "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  plugins:\n    filter:\n      enabled: [Other]\n",
                "invalid DeschedulerPolicy: profiles[0].plugins.filter.enabled[0]: profile \"p\" configures filter extension point of non-existing plugins: [Other]",
            ),
            (
                "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\ngracePeriodSeconds: -1\n",
                "invalid DeschedulerPolicy: gracePeriodSeconds: must be a non-negative integer",
            ),
            (
                "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofile: []\n",
                "invalid DeschedulerPolicy: profile: unknown field `profile`",
            ),
        ];
        for (text, prefix) in cases {
            let error = parse(text).expect_err(text);
            assert!(
                error.starts_with(prefix),
                "{text}\nwant prefix: {prefix}\ngot:         {error}"
            );
        }
    }
}
