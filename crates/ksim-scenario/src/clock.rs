//! [`ClusterClock`]: the clock of the cluster a scenario runs against, as
//! the runner moves and reads it. A cluster started inside the process
//! shares its [`Clock`]; an existing ksim cluster on a virtual clock is
//! moved through its API (`GET /ksim/v1alpha1/clock`,
//! `POST /ksim/v1alpha1/clock/advance`), where every advance settles the
//! cluster before it answers; any other cluster runs on the wall clock.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use ksim_runtime::Clock;
use serde_json::{Value, json};

/// The clock's path on a ksim API server.
pub const CLOCK_PATH: &str = "/ksim/v1alpha1/clock";
/// The path that advances it.
pub const ADVANCE_PATH: &str = "/ksim/v1alpha1/clock/advance";

/// The clock of a scenario's cluster.
#[derive(Clone)]
pub enum ClusterClock {
    /// The cluster's own clock in this process (real or virtual), or the
    /// wall clock for a cluster on the real clock.
    Local(Clock),
    /// A ksim cluster's virtual clock, through its API.
    Remote(kube::Client),
}

impl From<Clock> for ClusterClock {
    fn from(clock: Clock) -> Self {
        ClusterClock::Local(clock)
    }
}

/// What a ksim cluster says of its clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockReading {
    /// `virtual` or `real`.
    pub mode: String,
    /// Its time.
    pub now: DateTime<Utc>,
    /// When its next timer falls due (a virtual clock with one set).
    pub next_timer: Option<DateTime<Utc>>,
}

impl ClockReading {
    fn from_value(value: &Value) -> Result<Self, String> {
        let time = |field: &str| -> Result<Option<DateTime<Utc>>, String> {
            match value.get(field).and_then(Value::as_str) {
                None => Ok(None),
                Some(text) => DateTime::parse_from_rfc3339(text)
                    .map(|t| Some(t.with_timezone(&Utc)))
                    .map_err(|e| format!("the cluster's clock has a bad {field} {text:?}: {e}")),
            }
        };
        Ok(ClockReading {
            mode: value
                .get("mode")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            now: time("now")?.ok_or("the cluster's clock has no time (now)")?,
            next_timer: time("nextTimer")?,
        })
    }
}

/// Reads a ksim cluster's clock: `None` when the cluster serves none (not
/// a ksim cluster).
pub async fn read_clock(client: &kube::Client) -> Result<Option<ClockReading>, String> {
    let request = http::Request::get(CLOCK_PATH)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    match client.request::<Value>(request).await {
        Ok(value) => ClockReading::from_value(&value).map(Some),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(format!("cannot read the cluster's clock: {error}")),
    }
}

/// `POST /ksim/v1alpha1/clock/advance` with `body`: the clock once the
/// cluster has settled at its new time.
async fn post_advance(client: &kube::Client, body: Value) -> Result<ClockReading, String> {
    let request = http::Request::post(ADVANCE_PATH)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body.to_string().into_bytes())
        .map_err(|e| e.to_string())?;
    match client.request::<Value>(request).await {
        Ok(value) => ClockReading::from_value(&value),
        Err(kube::Error::Api(status)) => Err(status.message),
        Err(error) => Err(format!("cannot advance the cluster's clock: {error}")),
    }
}

fn rfc3339(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

impl ClusterClock {
    /// Whether `advance` and `waitFor` move this clock timer by timer.
    pub fn is_virtual(&self) -> bool {
        match self {
            ClusterClock::Local(clock) => clock.is_virtual(),
            ClusterClock::Remote(_) => true,
        }
    }

    /// The cluster's time.
    pub async fn now(&self) -> Result<DateTime<Utc>, String> {
        match self {
            ClusterClock::Local(clock) => Ok(clock.now()),
            ClusterClock::Remote(client) => match read_clock(client).await? {
                Some(reading) => Ok(reading.now),
                None => Err("the cluster does not serve ksim's clock".to_string()),
            },
        }
    }

    /// Waits until the cluster has settled (at once on a real clock).
    pub async fn settle(&self) -> Result<(), String> {
        match self {
            ClusterClock::Local(clock) => clock.settle().await.map_err(|e| e.to_string()),
            // An advance by nothing fires what is due now and settles.
            ClusterClock::Remote(client) => {
                post_advance(client, json!({"by": "0s"})).await.map(drop)
            }
        }
    }

    /// Settles, then fires the next timer if it falls due by `limit` and
    /// settles again: the new time, or `None` (the clock stays) when no
    /// timer falls due by then.
    pub async fn fire_next(&self, limit: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, String> {
        match self {
            ClusterClock::Local(clock) => clock.fire_next(limit).await.map_err(|e| e.to_string()),
            ClusterClock::Remote(client) => {
                let settled = post_advance(client, json!({"by": "0s"})).await?;
                match settled.next_timer {
                    Some(next) if next <= limit => {
                        let moved = post_advance(client, json!({"to": rfc3339(next)})).await?;
                        Ok(Some(moved.now))
                    }
                    _ => Ok(None),
                }
            }
        }
    }

    /// Moves a virtual clock to `to`, firing every timer on the way.
    pub async fn advance_to(&self, to: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
        match self {
            ClusterClock::Local(clock) => clock.advance_to(to).await.map_err(|e| e.to_string()),
            ClusterClock::Remote(client) => post_advance(client, json!({"to": rfc3339(to)}))
                .await
                .map(|reading| reading.now),
        }
    }

    /// Moves a virtual clock by `by`, firing every timer on the way.
    pub async fn advance(&self, by: Duration) -> Result<DateTime<Utc>, String> {
        let to =
            self.now().await? + chrono::Duration::from_std(by).unwrap_or(chrono::TimeDelta::MAX);
        self.advance_to(to).await
    }

    /// Waits `duration` of real time (polling a cluster on the real clock).
    pub async fn sleep(&self, duration: Duration) {
        match self {
            ClusterClock::Local(clock) => clock.sleep(duration).await,
            ClusterClock::Remote(_) => Clock::real().sleep(duration).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_has_the_mode_time_and_next_timer() {
        let reading = ClockReading::from_value(&json!({
            "kind": "Clock", "mode": "virtual", "now": "2026-01-01T00:00:00Z",
            "nextTimer": "2026-01-01T00:00:10.5Z",
        }))
        .expect("reading");
        assert_eq!(reading.mode, "virtual");
        assert_eq!(rfc3339(reading.now), "2026-01-01T00:00:00Z");
        assert_eq!(
            reading.next_timer.map(rfc3339).as_deref(),
            Some("2026-01-01T00:00:10.500Z")
        );
        let error = ClockReading::from_value(&json!({"mode": "real"})).expect_err("no time");
        assert!(error.contains("no time"), "{error}");
    }
}
