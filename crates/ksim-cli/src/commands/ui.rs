//! `ksim ui [--name N]`: prints the URL of a running cluster's web view
//! (`/ui/` on the cluster's own port) and opens it in a browser when the
//! session has a display and `xdg-open`.

use anyhow::bail;

use super::print_line;
use crate::cluster::{KsimHome, validate_cluster_name};
use crate::kubeconfig::server_url;

/// Prints the web view's URL of cluster `name`; `open` also starts a
/// browser where one is available (never an error when none is).
pub fn ui(home: &KsimHome, name: &str, open: bool) -> anyhow::Result<()> {
    validate_cluster_name(name)?;
    let cluster = home.cluster(name);
    let Some(port) = cluster.running_pid().and_then(|_| cluster.port()) else {
        bail!("cluster {name:?} does not exist");
    };
    let url = format!("{}{}", server_url(port), ksim_ui::PREFIX);
    print_line(&url)?;
    if open && browser_available() {
        match std::process::Command::new("xdg-open")
            .arg(&url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
        {
            Ok(_) => tracing::debug!(%url, "opened a browser"),
            Err(error) => tracing::debug!(%error, "cannot open a browser"),
        }
    }
    Ok(())
}

/// A graphical session with `xdg-open` on the PATH.
fn browser_available() -> bool {
    let display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
    display
        && std::env::var_os("PATH").is_some_and(|path| {
            std::env::split_paths(&path).any(|dir| dir.join("xdg-open").is_file())
        })
}
