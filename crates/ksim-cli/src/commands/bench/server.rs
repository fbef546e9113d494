//! The `ksim serve` child process a benchmark measures over HTTP: started in
//! a temporary `KSIM_HOME` on a free loopback port, stopped and its state
//! removed when the guard drops, so its memory figures are its own.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::cluster;

/// The name of the benchmarked cluster inside its temporary `KSIM_HOME`.
const CLUSTER_NAME: &str = "bench";

/// A free TCP port on 127.0.0.1 (free when asked; another process may take it).
pub fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

/// A running `ksim serve` child; stopped on drop.
pub struct ServeChild {
    child: Child,
    root: PathBuf,
    port: u16,
}

impl ServeChild {
    /// Starts `ksim serve` (this executable) and waits until `/readyz` answers.
    pub fn start() -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot find the ksim executable")?;
        let root = std::env::temp_dir().join(format!("ksim-bench-api-{}", std::process::id()));
        std::fs::create_dir_all(&root)
            .with_context(|| format!("cannot create {}", root.display()))?;
        let log_path = root.join("serve.log");
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        let log_err = log.try_clone().context("cannot open the serve log")?;
        let port = free_port()?;
        let child = Command::new(&exe)
            // The API server alone: what these figures are about.
            .args(["serve", "--name", CLUSTER_NAME, "--port", &port.to_string()])
            .args(["--disable", "kubelet,controllers,scheduler"])
            .env("KSIM_HOME", &root)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .context("cannot start ksim serve")?;
        let mut serve = Self { child, root, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !cluster::probe_readyz(port) {
            if serve.child.try_wait()?.is_some() || Instant::now() > deadline {
                bail!("ksim serve did not become ready; {}", log_tail(&log_path));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(serve)
    }

    /// The process id of the server.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// The last lines of the server's log, on one line, for an error message.
fn log_tail(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(5)..].join(" | ");
    format!("log {}: {tail}", path.display())
}

impl Drop for ServeChild {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id())
            && self.child.try_wait().ok().flatten().is_none()
            && let Err(e) = cluster::stop(pid, Duration::from_secs(5))
        {
            tracing::warn!("cannot stop the benchmarked ksim serve: {e:#}");
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
