//! The on-disk state of clusters: `$KSIM_HOME` (default `~/.ksim`) holds one
//! directory per cluster, `clusters/<name>/`, with the files `pid` and `port`
//! (written by the serving process), `kubeconfig` (the kubeconfig path that
//! `create cluster` wrote into) and `ksim.log`.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::process::{is_alive, is_serve_process};

const PID_FILE: &str = "pid";
const PORT_FILE: &str = "port";
const KUBECONFIG_FILE: &str = "kubeconfig";
const LOG_FILE: &str = "ksim.log";
const LOCK_FILE: &str = "lock";

/// Checks that `name` can name a cluster: a DNS-1123 label (it becomes a
/// directory name and part of kubeconfig entry names).
pub fn validate_cluster_name(name: &str) -> anyhow::Result<()> {
    let valid_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let valid_ends = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    if name.is_empty() || name.len() > 63 || !valid_chars || !valid_ends {
        bail!(
            "invalid cluster name {name:?}: a lowercase RFC 1123 label must consist of lower case \
             alphanumeric characters or '-', and must start and end with an alphanumeric character"
        );
    }
    Ok(())
}

/// The root of ksim's state: `$KSIM_HOME`, else `~/.ksim`.
#[derive(Debug, Clone)]
pub struct KsimHome {
    root: PathBuf,
}

impl KsimHome {
    /// `$KSIM_HOME` if set and not empty, else `$HOME/.ksim`.
    pub fn from_env() -> anyhow::Result<Self> {
        if let Some(root) = std::env::var_os("KSIM_HOME").filter(|v| !v.is_empty()) {
            return Ok(Self::at(root));
        }
        let home = std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .context("neither KSIM_HOME nor HOME is set")?;
        Ok(Self::at(Path::new(&home).join(".ksim")))
    }

    /// A ksim home rooted at `root`.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        KsimHome { root: root.into() }
    }

    /// The root directory (`$KSIM_HOME`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn clusters_dir(&self) -> PathBuf {
        self.root.join("clusters")
    }

    /// The state directory of the cluster `name` (which may not exist).
    pub fn cluster(&self, name: &str) -> ClusterDir {
        ClusterDir {
            name: name.to_string(),
            dir: self.clusters_dir().join(name),
        }
    }

    /// Every cluster with a state directory, alive or not, sorted by name.
    pub fn clusters(&self) -> anyhow::Result<Vec<ClusterDir>> {
        let dir = self.clusters_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if let (true, Some(name)) = (is_dir, entry.file_name().to_str())
                && validate_cluster_name(name).is_ok()
            {
                names.push(name.to_string());
            }
        }
        names.sort();
        Ok(names.iter().map(|name| self.cluster(name)).collect())
    }
}

/// One cluster's state directory.
#[derive(Debug, Clone)]
pub struct ClusterDir {
    name: String,
    dir: PathBuf,
}

impl ClusterDir {
    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the serving process writes its logs.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join(LOG_FILE)
    }

    /// Where a serving process that failed to start writes why, in one
    /// line, for `create cluster` to print (a snapshot that does not parse
    /// or restore).
    pub fn startup_error_path(&self) -> PathBuf {
        self.dir.join("startup-error")
    }

    /// Where `create cluster --scheduler-config` stores the configuration.
    pub fn scheduler_config_path(&self) -> PathBuf {
        self.dir.join("scheduler-config.yaml")
    }

    /// Whether the state directory exists.
    pub fn exists(&self) -> bool {
        self.dir.is_dir()
    }

    /// Creates the state directory.
    pub fn create(&self) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))
    }

    /// Removes the state directory and all it holds.
    pub fn remove(&self) -> anyhow::Result<()> {
        match std::fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("cannot remove {}", self.dir.display()))
            }
            _ => Ok(()),
        }
    }

    fn read(&self, file: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.join(file))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// Writes `file` atomically (temporary file, then rename).
    fn write(&self, file: &str, contents: &str) -> anyhow::Result<()> {
        let path = self.dir.join(file);
        let tmp = self.dir.join(format!(".{file}.{}", std::process::id()));
        std::fs::write(&tmp, contents)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// Takes the cluster's lock, which its serving process holds for its whole
    /// life (so two processes never serve one name). `None` if another
    /// process holds it. The lock is released when the file is dropped.
    pub fn lock(&self) -> anyhow::Result<Option<std::fs::File>> {
        self.create()?;
        let path = self.dir.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(e).with_context(|| format!("cannot lock {}", path.display()))
            }
        }
    }

    /// Whether a process holds the cluster's lock (it is serving or starting).
    pub fn is_locked(&self) -> bool {
        let Ok(file) = std::fs::File::open(self.dir.join(LOCK_FILE)) else {
            return false;
        };
        matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock))
    }

    /// The pid recorded by the serving process, if any.
    pub fn pid(&self) -> Option<i32> {
        self.read(PID_FILE)?.parse().ok().filter(|pid| *pid > 1)
    }

    /// The port recorded by the serving process, if any.
    pub fn port(&self) -> Option<u16> {
        self.read(PORT_FILE)?.parse().ok().filter(|port| *port > 0)
    }

    /// The pid of the cluster's process if it is alive (and, where `/proc`
    /// tells, still a `serve` process: a recycled pid does not count).
    pub fn running_pid(&self) -> Option<i32> {
        self.pid()
            .filter(|pid| is_alive(*pid) && is_serve_process(*pid))
    }

    /// Records that process `pid` serves the cluster on `port`. The port is
    /// written first, so a reader that sees the pid also sees the port.
    pub fn record_serving(&self, pid: u32, port: u16) -> anyhow::Result<()> {
        self.create()?;
        self.write(PORT_FILE, &format!("{port}\n"))?;
        self.write(PID_FILE, &format!("{pid}\n"))
    }

    /// Forgets the serving process if it is `pid` (another process may have
    /// taken the name over meanwhile).
    pub fn clear_serving(&self, pid: u32) {
        if self.pid() == i32::try_from(pid).ok() {
            let _ = std::fs::remove_file(self.dir.join(PID_FILE));
            let _ = std::fs::remove_file(self.dir.join(PORT_FILE));
        }
    }

    /// Forgets any serving process and the kubeconfig it wrote into (its
    /// state is stale).
    pub fn clear_stale(&self) {
        for file in [PID_FILE, PORT_FILE, KUBECONFIG_FILE] {
            let _ = std::fs::remove_file(self.dir.join(file));
        }
    }

    /// Records the kubeconfig file `create cluster` wrote its entries into.
    pub fn record_kubeconfig(&self, path: &Path) -> anyhow::Result<()> {
        let path = path
            .to_str()
            .with_context(|| format!("kubeconfig path {} is not valid UTF-8", path.display()))?;
        self.write(KUBECONFIG_FILE, &format!("{path}\n"))
    }

    /// The kubeconfig file `create cluster` wrote its entries into, if any.
    pub fn kubeconfig(&self) -> Option<PathBuf> {
        self.read(KUBECONFIG_FILE)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_must_be_dns_labels() {
        let cases = [
            ("ksim", true),
            ("a", true),
            ("my-cluster-2", true),
            ("", false),
            ("-a", false),
            ("a-", false),
            ("Upper", false),
            ("a/b", false),
            ("..", false),
            ("a.b", false),
        ];
        for (name, valid) in cases {
            assert_eq!(validate_cluster_name(name).is_ok(), valid, "{name:?}");
        }
        assert!(validate_cluster_name(&"a".repeat(64)).is_err());
    }

    #[test]
    fn serving_state_round_trips_and_clears_only_for_its_owner() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let cluster = KsimHome::at(tmp.path()).cluster("ksim");
        assert!(!cluster.exists());
        assert_eq!((cluster.pid(), cluster.port()), (None, None));

        cluster.record_serving(4242, 8080).expect("record");
        assert_eq!((cluster.pid(), cluster.port()), (Some(4242), Some(8080)));

        cluster.clear_serving(4243);
        assert_eq!(cluster.pid(), Some(4242), "another pid must not clear it");
        cluster.clear_serving(4242);
        assert_eq!((cluster.pid(), cluster.port()), (None, None));
    }

    #[test]
    fn the_lock_is_exclusive_until_dropped() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let cluster = KsimHome::at(tmp.path()).cluster("ksim");
        assert!(!cluster.is_locked());
        let held = cluster.lock().expect("lock").expect("free");
        assert!(cluster.is_locked());
        assert!(
            cluster.lock().expect("lock").is_none(),
            "held by another handle"
        );
        drop(held);
        assert!(!cluster.is_locked());
        assert!(cluster.lock().expect("lock").is_some());
    }

    #[test]
    fn unparsable_pid_reads_as_none() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let cluster = KsimHome::at(tmp.path()).cluster("ksim");
        cluster.create().expect("create");
        for junk in ["", "abc", "-5", "1", "0"] {
            std::fs::write(cluster.dir.join(PID_FILE), junk).expect("write");
            assert_eq!(cluster.pid(), None, "{junk:?}");
        }
    }

    #[test]
    fn clusters_lists_directories_sorted_and_skips_invalid_names() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let home = KsimHome::at(tmp.path());
        for name in ["b", "a", "Not_Valid"] {
            std::fs::create_dir_all(tmp.path().join("clusters").join(name)).expect("mkdir");
        }
        std::fs::write(tmp.path().join("clusters").join("file"), "").expect("write");
        let names: Vec<_> = home
            .clusters()
            .expect("list")
            .iter()
            .map(|c| c.name().to_string())
            .collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn kubeconfig_path_round_trips() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let cluster = KsimHome::at(tmp.path()).cluster("ksim");
        cluster.create().expect("create");
        assert_eq!(cluster.kubeconfig(), None);
        cluster
            .record_kubeconfig(Path::new("/x/y/config"))
            .expect("record");
        assert_eq!(cluster.kubeconfig(), Some(PathBuf::from("/x/y/config")));
    }
}
