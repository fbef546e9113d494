//! Where a federation member's `cluster` leads: this cluster, a sibling
//! ksim cluster of the same KSIM_HOME (its `clusters/<name>/port`, read
//! again at every connection so a re-created cluster is found on its new
//! port), or a context of a kubeconfig (against real clusters).

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// The clusters a controller can reach besides its own.
#[derive(Clone, Debug, Default)]
pub enum ClusterSource {
    /// Only this cluster: any other name is unknown.
    #[default]
    None,
    /// The ksim clusters of a KSIM_HOME; `own` is this cluster's name.
    KsimHome {
        /// `$KSIM_HOME`.
        root: PathBuf,
        /// This cluster's name (a member naming it is local).
        own: String,
    },
    /// The contexts of a kubeconfig; `own` is this cluster's context.
    Kubeconfig {
        /// The kubeconfig.
        kubeconfig: Box<Kubeconfig>,
        /// The context this controller's own client uses.
        own: Option<String>,
    },
}

/// Whether `name` is a DNS-1123 label (a ksim cluster name).
fn is_cluster_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

impl ClusterSource {
    /// A ksim cluster name without the `ksim-` of its kubeconfig context.
    fn ksim_name<'a>(&self, name: &'a str) -> &'a str {
        match self {
            ClusterSource::KsimHome { root, .. } => match name.strip_prefix("ksim-") {
                Some(short) if !root.join("clusters").join(name).exists() => short,
                _ => name,
            },
            _ => name,
        }
    }

    /// Whether `cluster` (a member's `cluster` field) is this cluster.
    pub fn is_local(&self, cluster: &str) -> bool {
        if cluster.is_empty() {
            return true;
        }
        match self {
            ClusterSource::None => false,
            ClusterSource::KsimHome { own, .. } => self.ksim_name(cluster) == own,
            ClusterSource::Kubeconfig { own, .. } => own.as_deref() == Some(cluster),
        }
    }

    /// Why `cluster` can name no cluster at all, if it cannot (a ksim
    /// cluster that is merely not running is known: it is Unreachable).
    pub fn unknown(&self, cluster: &str) -> Option<String> {
        match self {
            ClusterSource::None => Some(format!(
                "cluster {cluster:?}: this controller reaches no other cluster (give it a kubeconfig with contexts)"
            )),
            ClusterSource::KsimHome { .. } => (!is_cluster_name(self.ksim_name(cluster)))
                .then(|| format!("cluster {cluster:?} is not a ksim cluster name")),
            ClusterSource::Kubeconfig { kubeconfig, .. } => {
                (!kubeconfig.contexts.iter().any(|c| c.name == cluster))
                    .then(|| format!("context {cluster:?} does not exist in the kubeconfig"))
            }
        }
    }

    /// A client of `cluster`, or why there is none now.
    pub async fn connect(&self, cluster: &str) -> Result<kube::Client, String> {
        let config = match self {
            ClusterSource::None => return Err(self.unknown(cluster).unwrap_or_default()),
            ClusterSource::KsimHome { root, .. } => {
                let name = self.ksim_name(cluster);
                let port = std::fs::read_to_string(root.join("clusters").join(name).join("port"))
                    .ok()
                    .and_then(|p| p.trim().parse::<u16>().ok())
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("ksim cluster {name:?} is not running"))?;
                let url = format!("http://127.0.0.1:{port}")
                    .parse()
                    .map_err(|e| format!("bad address for ksim cluster {name:?}: {e}"))?;
                let mut config = kube::Config::new(url);
                config.connect_timeout = Some(std::time::Duration::from_secs(2));
                config.read_timeout = None;
                config
            }
            ClusterSource::Kubeconfig { kubeconfig, .. } => {
                let options = KubeConfigOptions {
                    context: Some(cluster.to_string()),
                    ..KubeConfigOptions::default()
                };
                kube::Config::from_custom_kubeconfig((**kubeconfig).clone(), &options)
                    .await
                    .map_err(|e| format!("context {cluster:?}: {e}"))?
            }
        };
        ksim_runtime::client::from_config(config).map_err(|e| format!("cluster {cluster:?}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ksim_siblings_are_known_by_name_and_the_own_name_is_local() {
        let source = ClusterSource::KsimHome {
            root: PathBuf::from("/nonexistent"),
            own: "red".into(),
        };
        assert!(source.is_local(""));
        assert!(source.is_local("red"));
        assert!(source.is_local("ksim-red"));
        assert!(!source.is_local("blue"));
        assert_eq!(source.unknown("blue"), None);
        assert!(source.unknown("Not_A_Name").is_some());
        assert!(ClusterSource::None.unknown("blue").is_some());
    }

    #[tokio::test]
    async fn a_ksim_sibling_that_is_not_running_is_unreachable() {
        let source = ClusterSource::KsimHome {
            root: PathBuf::from("/nonexistent"),
            own: "red".into(),
        };
        let Err(error) = source.connect("blue").await else {
            panic!("a cluster that is not running has no client");
        };
        assert_eq!(error, "ksim cluster \"blue\" is not running");
    }
}
