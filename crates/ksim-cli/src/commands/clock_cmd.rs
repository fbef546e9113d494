//! `ksim clock`: prints a cluster's time and clock mode; `ksim clock advance
//! D` moves a virtual clock by a Go duration (`90s`, `10m`, `1h30m`),
//! firing every timer due on the way, and prints the new time once the
//! cluster has settled. Both talk to the API server's ksim-only path
//! `/ksim/v1alpha1/clock` through the ksim cluster `--name`, or the
//! kubeconfig's (`--kubeconfig`, else the default one's) current context.
//! A real clock refuses to be advanced: one error line, exit code 1.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::{Value, json};

use super::print_line;
use crate::cluster::KsimHome;

/// The clock's path on a ksim API server.
const CLOCK_PATH: &str = "/ksim/v1alpha1/clock";
/// The path that advances it.
const ADVANCE_PATH: &str = "/ksim/v1alpha1/clock/advance";

/// Flags of `ksim clock`.
#[derive(Debug, Clone, clap::Args)]
pub struct ClockCommand {
    #[command(subcommand)]
    pub action: Option<ClockAction>,
    /// The ksim cluster (its `ksim-<name>` context); default: the
    /// kubeconfig's current context.
    #[arg(long, global = true)]
    pub name: Option<String>,
    /// Kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// Output format: the one-line summary, or the API's JSON.
    #[arg(short = 'o', long, value_enum, global = true, default_value_t = ClockOutput::Text)]
    pub output: ClockOutput,
}

/// What `ksim clock` can do besides printing the time.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ClockAction {
    /// Move a virtual clock forward by a duration (e.g. 90s, 10m, 1h30m),
    /// firing every timer due on the way, and print the new time.
    Advance {
        /// How far: a Go duration (500ms, 90s, 10m, 1h30m).
        duration: String,
    },
}

/// How `ksim clock` prints the clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ClockOutput {
    /// `2026-01-01T00:10:00Z (virtual clock, next timer at ...)`.
    #[default]
    Text,
    /// The clock as the API answers it.
    Json,
}

/// Runs `ksim clock`.
pub fn clock(home: &KsimHome, flags: &ClockCommand) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let clock = runtime.block_on(async {
        let client =
            super::connect::client(home, flags.name.as_deref(), flags.kubeconfig.as_deref())
                .await?;
        let request = match &flags.action {
            None => http::Request::get(CLOCK_PATH).body(Vec::new()),
            Some(ClockAction::Advance { duration }) => http::Request::post(ADVANCE_PATH)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(json!({ "by": duration }).to_string().into_bytes()),
        }
        .context("cannot build the request")?;
        let text = client
            .request_text(request)
            .await
            .map_err(|error| match error {
                kube::Error::Api(status) if status.code == 404 => anyhow::anyhow!(
                    "the cluster does not serve ksim's clock ({CLOCK_PATH}): not a ksim cluster"
                ),
                kube::Error::Api(status) => anyhow::anyhow!("{}", status.message),
                other => anyhow::Error::new(other).context("cannot reach the cluster"),
            })?;
        serde_json::from_str::<Value>(&text).context("the cluster answered something not JSON")
    })?;
    match flags.output {
        ClockOutput::Json => print_line(serde_json::to_string_pretty(&clock)?),
        ClockOutput::Text => print_line(summary(&clock)),
    }
}

/// `2026-01-01T00:10:00Z (virtual clock, seed 7, next timer at 2026-01-01T00:10:30Z)`.
fn summary(clock: &Value) -> String {
    let now = clock["now"].as_str().unwrap_or("?");
    let mut about = vec![format!("{} clock", clock["mode"].as_str().unwrap_or("?"))];
    if let Some(seed) = clock["seed"].as_u64() {
        about.push(format!("seed {seed}"));
    }
    if let Some(next) = clock["nextTimer"].as_str() {
        about.push(format!("next timer at {next}"));
    }
    format!("{now} ({})", about.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_leads_with_the_time() {
        assert_eq!(
            summary(
                &json!({"mode": "virtual", "now": "2026-01-01T00:10:00Z", "seed": 7, "nextTimer": "2026-01-01T00:10:30Z"})
            ),
            "2026-01-01T00:10:00Z (virtual clock, seed 7, next timer at 2026-01-01T00:10:30Z)"
        );
        assert_eq!(
            summary(&json!({"mode": "real", "now": "2026-11-26T13:00:00Z"})),
            "2026-11-26T13:00:00Z (real clock)"
        );
    }
}
