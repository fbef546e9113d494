//! Kubeconfig files: where `create cluster` writes (`--kubeconfig`, else the
//! first path of `$KUBECONFIG`, else `~/.kube/config`), and merging ksim's
//! cluster/user/context entries into a file without losing anything else in
//! it (other tools' entries and unknown fields are kept as they are).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

/// The name of the kubeconfig cluster, user and context of ksim cluster `cluster`.
pub fn context_name(cluster: &str) -> String {
    format!("ksim-{cluster}")
}

/// The server URL of a cluster listening on `port`.
pub fn server_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

/// The kubeconfig path to write: `explicit`, else the first non-empty path of
/// `$KUBECONFIG`, else `$HOME/.kube/config`.
pub fn resolve_path(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    if let Some(list) = std::env::var_os("KUBECONFIG")
        && let Some(first) = std::env::split_paths(&list).find(|p| !p.as_os_str().is_empty())
    {
        return Ok(first);
    }
    let home = std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .context("cannot find the kubeconfig: neither KUBECONFIG nor HOME is set")?;
    Ok(Path::new(&home).join(".kube").join("config"))
}

/// A kubeconfig document, kept as a generic tree so that fields ksim does not
/// know survive a rewrite.
#[derive(Debug, Clone, PartialEq)]
pub struct Kubeconfig {
    doc: Map<String, Value>,
}

impl Default for Kubeconfig {
    fn default() -> Self {
        let mut doc = Map::new();
        doc.insert("apiVersion".into(), json!("v1"));
        doc.insert("kind".into(), json!("Config"));
        doc.insert("clusters".into(), json!([]));
        doc.insert("contexts".into(), json!([]));
        doc.insert("current-context".into(), json!(""));
        doc.insert("preferences".into(), json!({}));
        doc.insert("users".into(), json!([]));
        Kubeconfig { doc }
    }
}

impl Kubeconfig {
    /// Parses a kubeconfig; an empty document is an empty kubeconfig.
    pub fn parse(yaml: &str) -> anyhow::Result<Self> {
        if yaml.trim().is_empty() {
            return Ok(Self::default());
        }
        let value: Value = serde_saphyr::from_str(yaml).map_err(|e| {
            // The parser's message continues with a source snippet: keep its
            // first line only.
            let message = e.to_string();
            let first = message.lines().next().unwrap_or_default();
            anyhow::anyhow!(
                "invalid kubeconfig YAML: {}",
                first.strip_prefix("error: ").unwrap_or(first)
            )
        })?;
        match value {
            Value::Null => Ok(Self::default()),
            Value::Object(doc) => Ok(Kubeconfig { doc }),
            _ => bail!("invalid kubeconfig: the document is not a mapping"),
        }
    }

    /// Reads the kubeconfig at `path`; a missing file is an empty kubeconfig.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        match std::fs::read_to_string(path) {
            Ok(yaml) => {
                Self::parse(&yaml).with_context(|| format!("cannot read {}", path.display()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// A kubeconfig holding only the entries of ksim cluster `cluster`.
    pub fn for_cluster(cluster: &str, server: &str) -> Self {
        let mut config = Self::default();
        config.set_cluster(cluster, server);
        config
    }

    /// The YAML text of the kubeconfig.
    pub fn to_yaml(&self) -> anyhow::Result<String> {
        serde_saphyr::to_string(&self.doc).context("cannot serialize the kubeconfig")
    }

    /// Writes the kubeconfig to `path` (atomically, creating parent
    /// directories; a new file is private to its owner).
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        use std::os::unix::fs::PermissionsExt;

        let yaml = self.to_yaml()?;
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let permissions = std::fs::metadata(path)
            .map(|m| m.permissions())
            .unwrap_or_else(|_| std::fs::Permissions::from_mode(0o600));
        let file_name = path
            .file_name()
            .with_context(|| format!("{} is not a file path", path.display()))?;
        let tmp = dir.join(format!(
            ".{}.ksim-{}",
            file_name.to_string_lossy(),
            std::process::id()
        ));
        std::fs::write(&tmp, yaml)
            .and_then(|()| std::fs::set_permissions(&tmp, permissions))
            .and_then(|()| std::fs::rename(&tmp, path))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp);
            })
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// The current context, if set.
    pub fn current_context(&self) -> Option<&str> {
        self.doc
            .get("current-context")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// Adds or replaces the cluster, user and context of ksim cluster
    /// `cluster` and makes the context current.
    pub fn set_cluster(&mut self, cluster: &str, server: &str) {
        let name = context_name(cluster);
        self.upsert("clusters", &name, "cluster", json!({ "server": server }));
        self.upsert("users", &name, "user", json!({}));
        self.upsert(
            "contexts",
            &name,
            "context",
            json!({ "cluster": name, "user": name }),
        );
        self.doc.insert("current-context".into(), json!(name));
    }

    /// Removes the cluster, user and context of ksim cluster `cluster`, and
    /// unsets the current context if it was that one. Returns whether
    /// anything changed.
    pub fn remove_cluster(&mut self, cluster: &str) -> bool {
        let name = context_name(cluster);
        let mut changed = false;
        for list in ["clusters", "users", "contexts"] {
            changed |= self.remove(list, &name);
        }
        if self.current_context() == Some(name.as_str()) {
            self.doc.insert("current-context".into(), json!(""));
            changed = true;
        }
        changed
    }

    fn list_mut(&mut self, list: &str) -> &mut Vec<Value> {
        let slot = self.doc.entry(list).or_insert_with(|| json!([]));
        if !slot.is_array() {
            *slot = json!([]);
        }
        slot.as_array_mut()
            .expect("the slot was just made an array")
    }

    fn upsert(&mut self, list: &str, name: &str, field: &str, body: Value) {
        let items = self.list_mut(list);
        let existing = items
            .iter_mut()
            .find(|item| item.get("name").and_then(Value::as_str) == Some(name));
        match existing {
            Some(Value::Object(item)) => {
                item.insert(field.into(), body);
            }
            _ => items.push(json!({ "name": name, field: body })),
        }
    }

    fn remove(&mut self, list: &str, name: &str) -> bool {
        let Some(Value::Array(items)) = self.doc.get_mut(list) else {
            return false;
        };
        let before = items.len();
        items.retain(|item| item.get("name").and_then(Value::as_str) != Some(name));
        items.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OTHER: &str = r#"apiVersion: v1
kind: Config
clusters:
- name: kind-dev
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: QUJD
contexts:
- name: kind-dev
  context:
    cluster: kind-dev
    user: kind-dev
    namespace: team
current-context: kind-dev
users:
- name: kind-dev
  user:
    token: secret
extensions:
- name: tool
  extension:
    answer: 42
"#;

    fn names(config: &Kubeconfig, list: &str) -> Vec<String> {
        config.doc[list]
            .as_array()
            .expect("list")
            .iter()
            .map(|i| i["name"].as_str().expect("name").to_string())
            .collect()
    }

    #[test]
    fn set_cluster_keeps_other_entries_and_unknown_fields() {
        let mut config = Kubeconfig::parse(OTHER).expect("parse");
        config.set_cluster("ksim", "http://127.0.0.1:1234");
        let reread = Kubeconfig::parse(&config.to_yaml().expect("yaml")).expect("reparse");
        for list in ["clusters", "users", "contexts"] {
            assert_eq!(names(&reread, list), ["kind-dev", "ksim-ksim"], "{list}");
        }
        assert_eq!(reread.current_context(), Some("ksim-ksim"));
        assert_eq!(reread.doc["extensions"][0]["extension"]["answer"], 42);
        assert_eq!(reread.doc["users"][0]["user"]["token"], "secret");
        assert_eq!(reread.doc["contexts"][0]["context"]["namespace"], "team");
        assert_eq!(
            reread.doc["clusters"][1]["cluster"]["server"],
            "http://127.0.0.1:1234"
        );
    }

    #[test]
    fn set_cluster_twice_replaces_instead_of_duplicating() {
        let mut config = Kubeconfig::default();
        config.set_cluster("ksim", "http://127.0.0.1:1");
        config.set_cluster("ksim", "http://127.0.0.1:2");
        assert_eq!(names(&config, "clusters"), ["ksim-ksim"]);
        assert_eq!(
            config.doc["clusters"][0]["cluster"]["server"],
            "http://127.0.0.1:2"
        );
    }

    #[test]
    fn remove_cluster_unsets_current_context_only_if_ours() {
        let mut config = Kubeconfig::parse(OTHER).expect("parse");
        config.set_cluster("a", "http://127.0.0.1:1");
        config.set_cluster("b", "http://127.0.0.1:2");
        assert!(config.remove_cluster("a"));
        assert_eq!(config.current_context(), Some("ksim-b"));
        assert!(config.remove_cluster("b"));
        assert_eq!(config.current_context(), None);
        assert!(!config.remove_cluster("b"), "nothing left to remove");
        assert_eq!(names(&config, "contexts"), ["kind-dev"]);
    }

    #[test]
    fn empty_or_null_documents_are_empty_kubeconfigs() {
        for yaml in ["", "  \n", "~\n", "null"] {
            assert_eq!(
                Kubeconfig::parse(yaml).expect(yaml),
                Kubeconfig::default(),
                "{yaml:?}"
            );
        }
        assert!(Kubeconfig::parse("- a\n- b\n").is_err());
        let error = Kubeconfig::parse("a: [\n  - b\n").expect_err("invalid");
        let message = format!("{error:#}");
        assert!(
            message.starts_with("invalid kubeconfig YAML: line 2"),
            "{message}"
        );
        assert!(!message.contains('\n'), "{message}");
    }

    #[test]
    fn null_or_scalar_lists_are_replaced_by_lists() {
        let mut config = Kubeconfig::parse("clusters: null\nusers: 3\n").expect("parse");
        config.set_cluster("ksim", "http://127.0.0.1:1");
        assert_eq!(names(&config, "clusters"), ["ksim-ksim"]);
        assert_eq!(names(&config, "users"), ["ksim-ksim"]);
    }

    #[test]
    fn save_then_load_round_trips_and_creates_directories() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let path = tmp.path().join("nested").join("config");
        assert_eq!(
            Kubeconfig::load(&path).expect("missing"),
            Kubeconfig::default()
        );
        let config = Kubeconfig::for_cluster("ksim", "http://127.0.0.1:9");
        config.save(&path).expect("save");
        assert_eq!(Kubeconfig::load(&path).expect("load"), config);
    }

    #[test]
    fn resolve_path_prefers_the_explicit_path() {
        let explicit = Path::new("/tmp/explicit");
        assert_eq!(resolve_path(Some(explicit)).expect("path"), explicit);
    }
}
