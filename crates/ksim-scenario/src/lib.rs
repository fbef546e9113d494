//! ksim-scenario: the scenario files `ksim run` reads (`apiVersion:
//! ksim.io/v1alpha1`, `kind: Scenario`): parsing and validation before
//! anything runs ([`Scenario::load`]), running the steps against a cluster
//! ([`run`] with a [`Target`]), the built-in assertions, and the report (a
//! text timeline, JSON, JUnit XML).
//!
//! The crate knows nothing of how the cluster is started: the caller gives a
//! [`Target`] (a client, a kubeconfig for child processes, the cluster's
//! clock: `advance` and `waitFor` move a virtual one timer by timer).

mod args;
mod checks;
mod clock;
mod duration;
mod error;
mod get;
mod model;
mod report;
mod runner;

pub use args::split_args;
pub use checks::{Check, Events, Evictions, JqCheck, Pending, Placement, Spread};
pub use clock::{ClockReading, ClusterClock, read_clock};
pub use duration::{format_duration, parse_duration};
pub use error::ScenarioError;
pub use get::{GetArgs, Resolver};
pub use model::{
    Action, ClockMode, ClusterSpec, ConfigSource, DEFAULT_CLOCK_START, Expect, Manifest, Scenario,
    Step,
};
pub use report::{Outcome, Report, StepReport, junit_xml, reports_json};
pub use runner::{Target, run};
