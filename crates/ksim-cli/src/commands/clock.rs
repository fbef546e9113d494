//! The cluster's clock on the command line: `ksim create cluster --clock
//! virtual [--clock-start T] [--seed N]` (passed on to `ksim serve`), and the
//! clock a cluster is served with.

use anyhow::Context;
use chrono::{DateTime, Utc};
use ksim_runtime::clock::{Clock, ClockMode, Random};

/// The flags of `ksim create cluster` / `ksim serve` that choose the
/// cluster's clock.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClusterClock {
    /// The cluster's clock: `real` (the wall clock) or `virtual` (stands
    /// still until `ksim clock advance`).
    #[arg(long, default_value = "real", value_parser = parse_mode)]
    pub clock: ClockMode,
    /// Where a virtual clock starts (RFC 3339); default: now, to the second.
    #[arg(long, value_parser = parse_time)]
    pub clock_start: Option<DateTime<Utc>>,
    /// Seed of the cluster's random source (generated names, uids, the
    /// scheduler's tie-breaks): the same seed gives the same run.
    #[arg(long)]
    pub seed: Option<u64>,
}

fn parse_mode(text: &str) -> Result<ClockMode, String> {
    text.parse()
}

fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|time| time.with_timezone(&Utc))
        .map_err(|e| format!("{text:?} is not an RFC 3339 time (2026-01-01T00:00:00Z): {e}"))
}

impl ClusterClock {
    /// The flags to pass on to `ksim serve`; a virtual clock's start is
    /// fixed here, so the server starts where the creator asked.
    pub fn serve_args(&self, now: DateTime<Utc>) -> Vec<String> {
        let mut args = Vec::new();
        if self.clock == ClockMode::Virtual {
            let start = self.clock_start.unwrap_or(now);
            args.extend([
                "--clock".to_string(),
                "virtual".to_string(),
                "--clock-start".to_string(),
                start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            ]);
        }
        if let Some(seed) = self.seed {
            args.extend(["--seed".to_string(), seed.to_string()]);
        }
        args
    }

    /// The clock a cluster is served with.
    pub fn build(&self) -> anyhow::Result<Clock> {
        let random = match self.seed {
            Some(seed) => Random::seeded(seed),
            None => Random::from_entropy(),
        };
        Ok(match self.clock {
            ClockMode::Real => Clock::real_with(random),
            ClockMode::Virtual => {
                let start = match self.clock_start {
                    Some(start) => start,
                    None => whole_seconds(Clock::real().now())
                        .context("cannot read the wall clock for the virtual clock's start")?,
                };
                Clock::virtual_with(start, random)
            }
        })
    }
}

fn whole_seconds(time: DateTime<Utc>) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(time.timestamp(), 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        clock: ClusterClock,
    }

    #[test]
    fn flags_round_trip_through_serve_args() {
        let cli = Cli::try_parse_from(["x", "--clock", "virtual", "--seed", "7"]).expect("flags");
        let now = DateTime::parse_from_rfc3339("2026-03-04T05:06:07Z")
            .expect("time")
            .with_timezone(&Utc);
        let mut args = vec!["x".to_string()];
        args.extend(cli.clock.serve_args(now));
        let again = Cli::try_parse_from(args).expect("round trip");
        assert_eq!(again.clock.clock, ClockMode::Virtual);
        assert_eq!(again.clock.clock_start, Some(now));
        assert_eq!(again.clock.seed, Some(7));
        let clock = again.clock.build().expect("clock");
        assert!(clock.is_virtual());
        assert_eq!(clock.now(), now);
    }

    #[test]
    fn a_bad_mode_or_start_is_refused() {
        assert!(Cli::try_parse_from(["x", "--clock", "fast"]).is_err());
        assert!(Cli::try_parse_from(["x", "--clock-start", "yesterday"]).is_err());
        assert!(
            Cli::try_parse_from(["x"])
                .expect("defaults")
                .clock
                .serve_args(Utc::now())
                .is_empty()
        );
    }
}
