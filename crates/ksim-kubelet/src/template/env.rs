//! What templates may ask of the running simulator: the clock, node addresses and pod IPs.

use std::collections::BTreeMap;

/// Formats a time the way templates print it (RFC 3339, seconds, `Z`).
pub fn format_time(time: chrono::DateTime<chrono::Utc>) -> String {
    time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The environment a template renders in. The kubelet implements it over its
/// caches and IP pools; tests use [`StaticTemplateEnv`].
pub trait TemplateEnv: Send + Sync {
    /// `Now`: the current time, RFC 3339.
    fn now(&self) -> String;
    /// `StartTime`: when the simulator started, RFC 3339.
    fn start_time(&self) -> String;
    /// `NodeIP`: the address of the node being rendered (or the default node IP).
    fn node_ip(&self) -> String;
    /// `NodeName`: the name of the node being rendered.
    fn node_name(&self) -> String;
    /// `NodePort`: the kubelet port of the node being rendered (0: none).
    fn node_port(&self) -> i64;
    /// `NodeIPsWith name`: the addresses of node `name` (InternalIPs), or the default node IP.
    fn node_ips_with(&self, node_name: &str) -> Vec<String>;
    /// `PodIPsWith node hostNetwork uid name namespace`: the IPs of a pod on `node`
    /// (from the node's podCIDRs; the node's IPs for hostNetwork pods).
    fn pod_ips_with(
        &self,
        node_name: &str,
        host_network: bool,
        uid: &str,
        name: &str,
        namespace: &str,
    ) -> Vec<String>;
}

/// A fixed environment: everything is given up front.
#[derive(Clone, Debug, Default)]
pub struct StaticTemplateEnv {
    /// Returned by `Now`.
    pub now: String,
    /// Returned by `StartTime`.
    pub start_time: String,
    /// Returned by `NodeIP`.
    pub node_ip: String,
    /// Returned by `NodeName`.
    pub node_name: String,
    /// Returned by `NodePort`.
    pub node_port: i64,
    /// Node addresses by node name for `NodeIPsWith`.
    pub node_ips: BTreeMap<String, Vec<String>>,
    /// Pod IPs by pod name for `PodIPsWith` (non-hostNetwork pods).
    pub pod_ips: BTreeMap<String, Vec<String>>,
}

impl TemplateEnv for StaticTemplateEnv {
    fn now(&self) -> String {
        self.now.clone()
    }
    fn start_time(&self) -> String {
        self.start_time.clone()
    }
    fn node_ip(&self) -> String {
        self.node_ip.clone()
    }
    fn node_name(&self) -> String {
        self.node_name.clone()
    }
    fn node_port(&self) -> i64 {
        self.node_port
    }
    fn node_ips_with(&self, node_name: &str) -> Vec<String> {
        match self.node_ips.get(node_name) {
            Some(ips) => ips.clone(),
            None if self.node_ip.is_empty() => Vec::new(),
            None => vec![self.node_ip.clone()],
        }
    }
    fn pod_ips_with(
        &self,
        node_name: &str,
        host_network: bool,
        _uid: &str,
        name: &str,
        _namespace: &str,
    ) -> Vec<String> {
        if host_network {
            return self.node_ips_with(node_name);
        }
        self.pod_ips
            .get(name)
            .cloned()
            .unwrap_or_else(|| self.node_ips_with(node_name))
    }
}
