//! The report of a run: a text timeline (cluster time, step, outcome, and
//! for a failure what was expected and what was seen), JSON, and JUnit XML
//! (one testcase per step). Wall-clock timings appear only in JUnit's `time`
//! attributes, so the timeline and the JSON of two runs of a deterministic
//! scenario are identical byte for byte.

use serde::Serialize;

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// It did what it should.
    Passed,
    /// It did not.
    Failed,
    /// An earlier step failed.
    Skipped,
}

impl Outcome {
    fn word(self) -> &'static str {
        match self {
            Outcome::Passed => "ok",
            Outcome::Failed => "FAILED",
            Outcome::Skipped => "skipped",
        }
    }
}

/// One step's record.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepReport {
    /// The step's number, from 1.
    pub number: usize,
    /// What it does, in short.
    pub description: String,
    /// Cluster time since the scenario started, when the step ended.
    pub at: String,
    /// How it ended.
    pub outcome: Outcome,
    /// For a failure: what was expected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// What was seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seen: Option<String>,
    /// Wall-clock seconds the step took (JUnit only).
    #[serde(skip)]
    pub wall_seconds: f64,
}

/// A scenario's run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// `metadata.name`.
    pub name: String,
    /// The file, as given.
    pub file: String,
    /// `virtual` or `real`.
    pub clock: String,
    /// The seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Whether no step failed.
    pub passed: bool,
    /// Every step.
    pub steps: Vec<StepReport>,
    /// A digest of the cluster at the end of a seeded run: every pod's
    /// name, uid, node, IP and phase and every event's name, reason, message
    /// and count, in name order. Two runs with the same seed must agree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Wall-clock seconds the run took (JUnit only).
    #[serde(skip)]
    pub wall_seconds: f64,
}

impl Report {
    fn count(&self, outcome: Outcome) -> usize {
        self.steps.iter().filter(|s| s.outcome == outcome).count()
    }

    /// The timeline, one line per step (and the expected and seen lines of
    /// failures), ending with a summary line.
    pub fn timeline(&self) -> String {
        let mut out = format!(
            "scenario {} ({}), clock {}",
            self.name, self.file, self.clock
        );
        if let Some(seed) = self.seed {
            out.push_str(&format!(", seed {seed}"));
        }
        out.push('\n');
        let width = self.steps.iter().map(|s| s.at.len()).max().unwrap_or(2);
        for step in &self.steps {
            out.push_str(&format!(
                "  {:>width$}  {:>3}. {}  {}\n",
                step.at,
                step.number,
                step.description,
                step.outcome.word(),
            ));
            if step.outcome == Outcome::Failed {
                let pad = " ".repeat(width + 8);
                if let Some(expected) = &step.expected {
                    out.push_str(&format!("{pad}expected: {expected}\n"));
                }
                if let Some(seen) = &step.seen {
                    out.push_str(&format!("{pad}seen:     {seen}\n"));
                }
            }
        }
        if let Some(state) = &self.state {
            out.push_str(&format!("  state at the end: {state}\n"));
        }
        out.push_str(&format!(
            "{} {}: {} passed, {} failed, {} skipped\n",
            if self.passed { "PASS" } else { "FAIL" },
            self.name,
            self.count(Outcome::Passed),
            self.count(Outcome::Failed),
            self.count(Outcome::Skipped),
        ));
        out
    }
}

/// The JSON of several runs: `{"passed": bool, "scenarios": [...]}`.
pub fn reports_json(reports: &[Report]) -> String {
    let value = serde_json::json!({
        "passed": reports.iter().all(|r| r.passed),
        "scenarios": reports,
    });
    serde_json::to_string_pretty(&value)
        .unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()))
}

fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML: a testsuite per scenario, a testcase per step.
pub fn junit_xml(reports: &[Report]) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let tests: usize = reports.iter().map(|r| r.steps.len()).sum();
    let failures: usize = reports.iter().map(|r| r.count(Outcome::Failed)).sum();
    let skipped: usize = reports.iter().map(|r| r.count(Outcome::Skipped)).sum();
    let time: f64 = reports.iter().map(|r| r.wall_seconds).sum();
    out.push_str(&format!(
        "<testsuites name=\"ksim run\" tests=\"{tests}\" failures=\"{failures}\" skipped=\"{skipped}\" time=\"{time:.3}\">\n"
    ));
    for report in reports {
        out.push_str(&format!(
            "  <testsuite name=\"{}\" file=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3}\">\n",
            xml_escape(&report.name),
            xml_escape(&report.file),
            report.steps.len(),
            report.count(Outcome::Failed),
            report.count(Outcome::Skipped),
            report.wall_seconds,
        ));
        for step in &report.steps {
            out.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                xml_escape(&report.name),
                xml_escape(&format!("{:03} {}", step.number, step.description)),
                step.wall_seconds,
            ));
            match step.outcome {
                Outcome::Passed => out.push_str("/>\n"),
                Outcome::Skipped => out.push_str(
                    ">\n      <skipped message=\"an earlier step failed\"/>\n    </testcase>\n",
                ),
                Outcome::Failed => {
                    let expected = step.expected.as_deref().unwrap_or_default();
                    let seen = step.seen.as_deref().unwrap_or_default();
                    out.push_str(&format!(
                        ">\n      <failure message=\"{}\">expected: {}\nseen: {}\nat: {} (cluster time)</failure>\n    </testcase>\n",
                        xml_escape(&format!("expected {expected}")),
                        xml_escape(expected),
                        xml_escape(seen),
                        xml_escape(&step.at),
                    ));
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        let step = |number, outcome, expected: Option<&str>, seen: Option<&str>| StepReport {
            number,
            description: format!("step <{number}>"),
            at: if number == 1 {
                "0s".into()
            } else {
                "10m0s".into()
            },
            outcome,
            expected: expected.map(str::to_string),
            seen: seen.map(str::to_string),
            wall_seconds: 0.25,
        };
        Report {
            name: "demo".into(),
            file: "demo.yaml".into(),
            clock: "virtual".into(),
            seed: Some(7),
            passed: false,
            state: None,
            steps: vec![
                step(1, Outcome::Passed, None, None),
                step(
                    2,
                    Outcome::Failed,
                    Some(".x == 0 to yield true"),
                    Some("false"),
                ),
                step(3, Outcome::Skipped, None, None),
            ],
            wall_seconds: 1.0,
        }
    }

    #[test]
    fn timeline_shows_cluster_time_and_failures() {
        let text = report().timeline();
        let want = [
            "scenario demo (demo.yaml), clock virtual, seed 7",
            "     0s    1. step <1>  ok",
            "  10m0s    2. step <2>  FAILED",
            "             expected: .x == 0 to yield true",
            "             seen:     false",
            "  10m0s    3. step <3>  skipped",
            "FAIL demo: 1 passed, 1 failed, 1 skipped",
            "",
        ];
        assert_eq!(text, want.join("\n"));
    }

    #[test]
    fn json_has_no_wall_clock_timings() {
        let json = reports_json(&[report()]);
        assert!(!json.contains("wall"), "{json}");
        assert!(!json.contains("0.25"), "{json}");
        let value: serde_json::Value = serde_json::from_str(&json).expect("json");
        assert_eq!(value["passed"], false);
        assert_eq!(value["scenarios"][0]["steps"][1]["outcome"], "failed");
    }

    #[test]
    fn junit_has_a_testcase_per_step_escaped() {
        let xml = junit_xml(&[report()]);
        assert!(
            xml.contains("tests=\"3\" failures=\"1\" skipped=\"1\""),
            "{xml}"
        );
        assert_eq!(xml.matches("<testcase ").count(), 3);
        assert!(
            xml.contains("name=\"002 step &lt;2&gt;\" time=\"0.250\""),
            "{xml}"
        );
        assert!(
            xml.contains("<failure message=\"expected .x == 0 to yield true\">"),
            "{xml}"
        );
    }
}
