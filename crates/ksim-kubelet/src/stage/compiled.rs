//! A Stage compiled for matching: selector requirements, weight and delay getters,
//! plus the choice among matching stages, all as KWOK's lifecycle package computes them.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use rand::Rng;

use super::duration::parse_go_duration;
use super::fields::ReadFields;
use super::jq::{JqInput, JqOutput, JqQuery};
use super::types::{ExpressionFrom, MatchExpression, Stage};
use crate::error::KubeletError;

/// One object as stages see it: the JSON and its jq form, converted once per event.
#[derive(Clone, Debug)]
pub struct ObjectSnapshot<'a> {
    object: &'a serde_json::Value,
    input: JqInput<'a>,
}

impl<'a> ObjectSnapshot<'a> {
    /// Converts `object` for jq once.
    pub fn new(object: &'a serde_json::Value) -> Self {
        Self {
            object,
            input: JqInput::new(object),
        }
    }

    /// The object.
    pub fn object(&self) -> &'a serde_json::Value {
        self.object
    }

    /// Whether every `key: value` of `wanted` is a string entry of the
    /// object's `metadata.<field>` (labels or annotations), looked up
    /// directly: nothing is built when a stage asks for none.
    fn has_entries(&self, field: &str, wanted: &BTreeMap<String, String>) -> bool {
        if wanted.is_empty() {
            return true;
        }
        let entries = self
            .object
            .get("metadata")
            .and_then(|m| m.get(field))
            .and_then(serde_json::Value::as_object);
        wanted.iter().all(|(k, v)| {
            entries
                .and_then(|m| m.get(k))
                .and_then(serde_json::Value::as_str)
                == Some(v.as_str())
        })
    }
}

/// A selector operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelectorOperator {
    /// Some output equals one of the values.
    In,
    /// No output equals any of the values.
    NotIn,
    /// The query has a non-null output.
    Exists,
    /// The query has no non-null output.
    DoesNotExist,
}

/// A compiled `matchExpressions` entry.
#[derive(Clone, Debug)]
pub struct Requirement {
    query: JqQuery,
    operator: SelectorOperator,
    values: Vec<String>,
}

impl Requirement {
    /// Compiles a requirement, checking values against the operator as KWOK does.
    pub fn new(key: &str, operator: &str, values: &[String]) -> Result<Self, String> {
        let operator = match operator {
            "In" => SelectorOperator::In,
            "NotIn" => SelectorOperator::NotIn,
            "Exists" => SelectorOperator::Exists,
            "DoesNotExist" => SelectorOperator::DoesNotExist,
            other => return Err(format!("operator {other:?} is not supported")),
        };
        match operator {
            SelectorOperator::In | SelectorOperator::NotIn if values.is_empty() => {
                return Err("for 'in', 'notin' operators, values set can't be empty".into());
            }
            SelectorOperator::Exists | SelectorOperator::DoesNotExist if !values.is_empty() => {
                return Err("values set must be empty for exists and does not exist".into());
            }
            _ => {}
        }
        let query = JqQuery::compile(key).map_err(|e| e.to_string())?;
        Ok(Self {
            query,
            operator,
            values: values.to_vec(),
        })
    }

    /// Whether the object satisfies the requirement.
    pub fn matches(&self, object: &ObjectSnapshot<'_>) -> bool {
        let outputs = self.query.execute(&object.input);
        let has_value = || {
            outputs.iter().any(|out| match out {
                JqOutput::String(s) => self.values.contains(s),
                JqOutput::Bool(b) => self.values.contains(&b.to_string()),
                JqOutput::Number(n) => self.values.contains(n),
                JqOutput::Composite => false,
            })
        };
        match self.operator {
            SelectorOperator::In => has_value(),
            SelectorOperator::NotIn => !has_value(),
            SelectorOperator::Exists => !outputs.is_empty(),
            SelectorOperator::DoesNotExist => outputs.is_empty(),
        }
    }
}

/// A duration read from the object, with a fallback value.
#[derive(Clone, Debug)]
struct DurationFrom {
    value: Option<TimeDelta>,
    query: Option<JqQuery>,
}

impl DurationFrom {
    fn new(value: Option<TimeDelta>, from: Option<&ExpressionFrom>) -> Result<Self, KubeletError> {
        let query = from
            .and_then(ExpressionFrom::jq_expression)
            .map(JqQuery::compile)
            .transpose()?;
        Ok(Self { value, query })
    }

    /// The duration, or `None` when there is none (KWOK's `ok == false`).
    fn get(&self, object: &ObjectSnapshot<'_>, now: DateTime<Utc>) -> Option<TimeDelta> {
        if let Some(query) = &self.query
            && let Some(JqOutput::String(s)) = query.execute(&object.input).into_iter().next()
        {
            if s.is_empty() {
                return None;
            }
            if let Ok(time) = DateTime::parse_from_rfc3339(&s) {
                return Some(time.with_timezone(&Utc) - now);
            }
            if let Some(duration) = parse_go_duration(&s) {
                return Some(duration);
            }
        }
        self.value
    }
}

/// A Stage ready to match objects; compile once, use for every event.
#[derive(Clone, Debug)]
pub struct CompiledStage {
    stage: Stage,
    has_selector: bool,
    match_labels: BTreeMap<String, String>,
    match_annotations: BTreeMap<String, String>,
    requirements: Vec<Requirement>,
    weight: i64,
    weight_from: Option<JqQuery>,
    duration: Option<DurationFrom>,
    jitter: Option<DurationFrom>,
}

fn millis(ms: i64) -> TimeDelta {
    TimeDelta::try_milliseconds(ms).unwrap_or(TimeDelta::MAX)
}

impl CompiledStage {
    /// Compiles `stage`'s selector, weight and delay.
    pub fn new(stage: Stage) -> Result<Self, KubeletError> {
        let invalid = |message: String| KubeletError::InvalidStage {
            stage: stage.metadata.name.clone(),
            message,
        };
        let spec = &stage.spec;
        let selector = spec.selector.clone().unwrap_or_default();
        let mut requirements = Vec::new();
        for expr in selector.match_expressions.iter().flatten() {
            let (key, operator, values) = requirement_parts(expr).map_err(invalid)?;
            requirements.push(Requirement::new(key, operator, values).map_err(invalid)?);
        }
        let weight_from = spec
            .weight_from
            .as_ref()
            .and_then(ExpressionFrom::jq_expression)
            .map(JqQuery::compile)
            .transpose()?;
        let (duration, jitter) = match &spec.delay {
            None => (None, None),
            Some(delay) => {
                let base = delay
                    .duration_milliseconds
                    .map_or(TimeDelta::zero(), millis);
                let duration = DurationFrom::new(Some(base), delay.duration_from.as_ref())?;
                let jitter = if delay.jitter_duration_milliseconds.is_some()
                    || delay.jitter_duration_from.is_some()
                {
                    Some(DurationFrom::new(
                        delay.jitter_duration_milliseconds.map(millis),
                        delay.jitter_duration_from.as_ref(),
                    )?)
                } else {
                    None
                };
                (Some(duration), jitter)
            }
        };
        Ok(Self {
            has_selector: spec.selector.is_some(),
            match_labels: selector.match_labels.unwrap_or_default(),
            match_annotations: selector.match_annotations.unwrap_or_default(),
            requirements,
            weight: spec.weight,
            weight_from,
            duration,
            jitter,
            stage,
        })
    }

    /// The Stage as written.
    pub fn stage(&self) -> &Stage {
        &self.stage
    }

    /// The Stage's name.
    pub fn name(&self) -> &str {
        &self.stage.metadata.name
    }

    /// Whether the stage is about objects of this group and kind (`v1` or empty means core).
    pub fn applies_to(&self, api_group: &str, kind: &str) -> bool {
        let normalize = |g: &str| match g {
            "" | "v1" => String::new(),
            other => other.split('/').next().unwrap_or(other).to_owned(),
        };
        let reference = &self.stage.spec.resource_ref;
        reference.kind == kind && normalize(&reference.api_group) == normalize(api_group)
    }

    /// `immediateNextStage`.
    pub fn immediate_next_stage(&self) -> bool {
        self.stage.spec.immediate_next_stage.unwrap_or(false)
    }

    /// Adds to `fields` every field of an object that matching, weighing and
    /// delaying it with this stage reads (rendering its next action reads the
    /// whole object).
    pub fn read_fields(&self, fields: &mut ReadFields) {
        if !self.match_labels.is_empty() {
            fields.add(&["metadata", "labels"]);
        }
        if !self.match_annotations.is_empty() {
            fields.add(&["metadata", "annotations"]);
        }
        let queries = self
            .requirements
            .iter()
            .map(|r| &r.query)
            .chain(&self.weight_from)
            .chain(self.duration.iter().filter_map(|d| d.query.as_ref()))
            .chain(self.jitter.iter().filter_map(|d| d.query.as_ref()));
        for query in queries {
            match query.field_prefix() {
                Some(path) => fields.add(&path),
                None => fields.add::<&str>(&[]),
            }
        }
    }

    /// Whether the object matches the selector (a stage without selector matches nothing).
    pub fn matches(&self, object: &ObjectSnapshot<'_>) -> bool {
        if !self.has_selector {
            return false;
        }
        if !object.has_entries("labels", &self.match_labels)
            || !object.has_entries("annotations", &self.match_annotations)
        {
            return false;
        }
        self.requirements.iter().all(|r| r.matches(object))
    }

    /// The weight for this object, or `None` when `weightFrom` gives an unusable value.
    pub fn weight(&self, object: &ObjectSnapshot<'_>) -> Option<i64> {
        if let Some(query) = &self.weight_from
            && let Some(first) = query.execute(&object.input).into_iter().next()
        {
            match first {
                JqOutput::String(s) if s.is_empty() => return None,
                JqOutput::String(s) => return parse_go_int(&s),
                JqOutput::Number(n) => return n.parse::<f64>().ok().map(|f| f as i64),
                _ => {}
            }
        }
        Some(self.weight)
    }

    /// How long to wait before applying the stage: the duration, or a uniform pick between
    /// the duration and the jitter bound when the bound is larger; the bound itself when
    /// it is smaller (as KWOK). Times in the past give zero.
    pub fn delay(
        &self,
        object: &ObjectSnapshot<'_>,
        now: DateTime<Utc>,
        rng: &mut impl Rng,
    ) -> Duration {
        let Some(duration) = self.duration.as_ref().and_then(|d| d.get(object, now)) else {
            return Duration::ZERO;
        };
        let chosen = match self.jitter.as_ref().and_then(|j| j.get(object, now)) {
            None => duration,
            Some(jitter) if jitter <= duration => jitter,
            Some(jitter) => {
                let span = (jitter - duration).num_nanoseconds().unwrap_or(i64::MAX);
                duration + TimeDelta::nanoseconds(rng.random_range(0..span))
            }
        };
        chosen.to_std().unwrap_or(Duration::ZERO)
    }
}

fn requirement_parts(expr: &MatchExpression) -> Result<(&str, &str, &[String]), String> {
    if let Some(jq) = &expr.jq {
        return Ok((&jq.key, &jq.operator, &jq.values));
    }
    if expr.cel.is_some() && expr.key.is_empty() {
        return Err("CEL match expressions are not supported".into());
    }
    if expr.key.is_empty() {
        return Err("invalid expression".into());
    }
    Ok((&expr.key, &expr.operator, &expr.values))
}

/// Parses an integer as Go's `strconv.ParseInt(s, 0, 0)`: optional sign, `0x`/`0o`/`0b` prefixes.
fn parse_go_int(s: &str) -> Option<i64> {
    let (negative, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let digits = digits.replace('_', "");
    let lower = digits.to_ascii_lowercase();
    let magnitude = if let Some(hex) = lower.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()?
    } else if let Some(oct) = lower.strip_prefix("0o") {
        i64::from_str_radix(oct, 8).ok()?
    } else if let Some(bin) = lower.strip_prefix("0b") {
        i64::from_str_radix(bin, 2).ok()?
    } else if lower.len() > 1 && lower.starts_with('0') {
        i64::from_str_radix(&lower[1..], 8).ok()?
    } else {
        lower.parse::<i64>().ok()?
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// Compiles every stage, returning the good ones and an error for each bad one.
pub fn compile_stages(
    stages: impl IntoIterator<Item = Stage>,
) -> (Vec<CompiledStage>, Vec<KubeletError>) {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for stage in stages {
        match CompiledStage::new(stage) {
            Ok(compiled) => good.push(compiled),
            Err(err) => bad.push(err),
        }
    }
    (good, bad)
}

/// The stages whose selector the object matches, in the given order.
pub fn matching_stages<'s>(
    stages: &'s [CompiledStage],
    object: &ObjectSnapshot<'_>,
) -> Vec<&'s CompiledStage> {
    stages.iter().filter(|s| s.matches(object)).collect()
}

/// KWOK's choice among matching stages: weighted random by weight; stages whose
/// `weightFrom` is unusable are left out unless every stage's is; uniform when all
/// weights are zero.
pub fn choose_stage<'s>(
    matching: &[&'s CompiledStage],
    object: &ObjectSnapshot<'_>,
    rng: &mut impl Rng,
) -> Option<&'s CompiledStage> {
    match matching {
        [] => return None,
        [only] => return Some(only),
        _ => {}
    }
    let weights: Vec<Option<i64>> = matching.iter().map(|s| s.weight(object)).collect();
    let usable: Vec<(&'s CompiledStage, i64)> = matching
        .iter()
        .zip(&weights)
        .filter_map(|(s, w)| w.map(|w| (*s, w)))
        .collect();
    if usable.is_empty() {
        return matching.get(rng.random_range(0..matching.len())).copied();
    }
    let total: i64 = usable.iter().map(|(_, w)| (*w).max(0)).sum();
    if total <= 0 {
        return usable
            .get(rng.random_range(0..usable.len()))
            .map(|(s, _)| *s);
    }
    let mut offset = rng.random_range(0..total);
    for (stage, weight) in &usable {
        if *weight <= 0 {
            continue;
        }
        offset -= weight;
        if offset < 0 {
            return Some(stage);
        }
    }
    usable.last().map(|(s, _)| *s)
}

/// Matches and chooses in one step: the stage to play for this object, if any.
pub fn select_stage<'s>(
    stages: &'s [CompiledStage],
    object: &ObjectSnapshot<'_>,
    rng: &mut impl Rng,
) -> Option<&'s CompiledStage> {
    choose_stage(&matching_stages(stages, object), object, rng)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use serde_json::json;

    fn stage(spec: serde_json::Value) -> CompiledStage {
        let stage: Stage = serde_json::from_value(json!({
            "metadata": {"name": spec.get("name").and_then(|n| n.as_str()).unwrap_or("s")},
            "spec": spec,
        }))
        .expect("valid stage");
        CompiledStage::new(stage).expect("compiles")
    }

    fn with_selector(selector: serde_json::Value) -> CompiledStage {
        stage(json!({"resourceRef": {"apiGroup": "v1", "kind": "Pod"}, "selector": selector}))
    }

    fn pod() -> serde_json::Value {
        json!({
            "metadata": {"name": "p", "labels": {"app": "web"}, "annotations": {"team": "a"},
                         "ownerReferences": [{"kind": "ReplicaSet"}, {"kind": "Job"}]},
            "spec": {"nodeName": "node-0", "priority": 5, "hostNetwork": true},
            "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}
        })
    }

    #[test]
    fn selector_operators_on_jq_paths() {
        let cases = [
            (
                json!({"key": ".status.phase", "operator": "In", "values": ["Pending"]}),
                true,
            ),
            (
                json!({"key": ".status.phase", "operator": "In", "values": ["Running"]}),
                false,
            ),
            (
                json!({"key": ".status.phase", "operator": "NotIn", "values": ["Running"]}),
                true,
            ),
            (
                json!({"key": ".status.phase", "operator": "NotIn", "values": ["Pending"]}),
                false,
            ),
            (
                json!({"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}),
                true,
            ),
            (
                json!({"key": ".metadata.deletionTimestamp", "operator": "Exists"}),
                false,
            ),
            (json!({"key": ".spec.nodeName", "operator": "Exists"}), true),
            (
                json!({"key": ".spec.nodeName", "operator": "DoesNotExist"}),
                false,
            ),
            (
                json!({"key": ".status.conditions.[] | select( .type == \"Ready\" ) | .status", "operator": "NotIn", "values": ["True"]}),
                true,
            ),
            (
                json!({"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]}),
                true,
            ),
            (
                json!({"key": ".spec.hostNetwork", "operator": "In", "values": ["true"]}),
                true,
            ),
            (
                json!({"key": ".spec.priority", "operator": "In", "values": ["5"]}),
                true,
            ),
            (
                json!({"jq": {"key": ".status.phase", "operator": "In", "values": ["Pending"]}}),
                true,
            ),
            (
                json!({"key": ".status.missing", "operator": "NotIn", "values": ["x"]}),
                true,
            ),
        ];
        let object = pod();
        let snapshot = ObjectSnapshot::new(&object);
        for (expr, want) in cases {
            let s = with_selector(json!({"matchExpressions": [expr.clone()]}));
            assert_eq!(s.matches(&snapshot), want, "{expr}");
        }
    }

    #[test]
    fn labels_and_annotations_must_all_match() {
        let object = pod();
        let snapshot = ObjectSnapshot::new(&object);
        let cases = [
            (json!({"matchLabels": {"app": "web"}}), true),
            (json!({"matchLabels": {"app": "db"}}), false),
            (json!({"matchLabels": {"app": "web", "tier": "x"}}), false),
            (json!({"matchAnnotations": {"team": "a"}}), true),
            (json!({"matchAnnotations": {"team": "b"}}), false),
            (json!({}), true),
        ];
        for (selector, want) in cases {
            assert_eq!(
                with_selector(selector.clone()).matches(&snapshot),
                want,
                "{selector}"
            );
        }
    }

    #[test]
    fn stage_without_selector_matches_nothing() {
        let object = pod();
        let s = stage(json!({"resourceRef": {"kind": "Pod"}}));
        assert!(!s.matches(&ObjectSnapshot::new(&object)));
    }

    #[test]
    fn malformed_requirements_are_rejected() {
        let cases = [
            (
                json!({"key": ".a", "operator": "In"}),
                "values set can't be empty",
            ),
            (
                json!({"key": ".a", "operator": "Exists", "values": ["x"]}),
                "must be empty",
            ),
            (
                json!({"key": ".a", "operator": "Gt", "values": ["1"]}),
                "not supported",
            ),
            (
                json!({"key": ".a[", "operator": "Exists"}),
                "invalid jq expression",
            ),
            (json!({"cel": {"expression": "true"}}), "CEL"),
        ];
        for (expr, want) in cases {
            let stage: Stage = serde_json::from_value(json!({
                "metadata": {"name": "bad"},
                "spec": {"resourceRef": {"kind": "Pod"}, "selector": {"matchExpressions": [expr.clone()]}}
            }))
            .expect("decodes");
            let err = CompiledStage::new(stage).expect_err("rejected");
            assert!(err.to_string().contains(want), "{expr}: {err}");
        }
    }

    #[test]
    fn resource_ref_treats_v1_as_core() {
        let s = with_selector(json!({}));
        assert!(s.applies_to("", "Pod"));
        assert!(s.applies_to("v1", "Pod"));
        assert!(!s.applies_to("", "Node"));
        assert!(!s.applies_to("apps", "Pod"));
    }

    #[test]
    fn weighted_choice_follows_weights() {
        let object = pod();
        let snapshot = ObjectSnapshot::new(&object);
        let heavy = stage(
            json!({"name": "heavy", "resourceRef": {"kind": "Pod"}, "selector": {}, "weight": 3}),
        );
        let light = stage(
            json!({"name": "light", "resourceRef": {"kind": "Pod"}, "selector": {}, "weight": 1}),
        );
        let never = stage(
            json!({"name": "never", "resourceRef": {"kind": "Pod"}, "selector": {}, "weight": 0}),
        );
        let matching = vec![&heavy, &light, &never];
        let mut rng = StdRng::seed_from_u64(7);
        let mut counts = BTreeMap::new();
        for _ in 0..4000 {
            let chosen = choose_stage(&matching, &snapshot, &mut rng).expect("one");
            *counts.entry(chosen.name().to_owned()).or_insert(0) += 1;
        }
        assert_eq!(counts.get("never"), None);
        let heavy_count = counts["heavy"];
        assert!((2700..3300).contains(&heavy_count), "{counts:?}");
    }

    #[test]
    fn zero_weights_choose_uniformly_and_weight_from_overrides() {
        let object = json!({"metadata": {"annotations": {"w": "5", "bad": "x"}}});
        let snapshot = ObjectSnapshot::new(&object);
        let a = stage(json!({"name": "a", "resourceRef": {"kind": "Pod"}, "selector": {}}));
        let b = stage(json!({"name": "b", "resourceRef": {"kind": "Pod"}, "selector": {}}));
        let mut rng = StdRng::seed_from_u64(1);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..100 {
            seen.insert(
                choose_stage(&[&a, &b], &snapshot, &mut rng)
                    .expect("one")
                    .name()
                    .to_owned(),
            );
        }
        assert_eq!(seen.len(), 2);

        let from = stage(
            json!({"resourceRef": {"kind": "Pod"}, "selector": {}, "weight": 1,
            "weightFrom": {"expressionFrom": ".metadata.annotations.w"}}),
        );
        assert_eq!(from.weight(&snapshot), Some(5));
        let bad = stage(
            json!({"resourceRef": {"kind": "Pod"}, "selector": {}, "weight": 1,
            "weightFrom": {"expressionFrom": ".metadata.annotations.bad"}}),
        );
        assert_eq!(bad.weight(&snapshot), None);
        let missing = stage(
            json!({"resourceRef": {"kind": "Pod"}, "selector": {}, "weight": 2,
            "weightFrom": {"expressionFrom": ".metadata.annotations.none"}}),
        );
        assert_eq!(missing.weight(&snapshot), Some(2));
        // The stage with an unusable weight is left out.
        for _ in 0..50 {
            let chosen = choose_stage(&[&bad, &from], &snapshot, &mut rng).expect("one");
            assert!(std::ptr::eq(chosen, &from));
        }
    }

    #[test]
    fn matching_keeps_order_and_select_returns_none_without_match() {
        let object = pod();
        let snapshot = ObjectSnapshot::new(&object);
        let yes = with_selector(json!({"matchLabels": {"app": "web"}}));
        let no = with_selector(json!({"matchLabels": {"app": "db"}}));
        let stages = vec![no.clone(), yes];
        assert_eq!(matching_stages(&stages, &snapshot).len(), 1);
        let mut rng = StdRng::seed_from_u64(0);
        assert!(select_stage(&[no], &snapshot, &mut rng).is_none());
    }

    fn delayed(delay: serde_json::Value) -> CompiledStage {
        stage(json!({"resourceRef": {"kind": "Pod"}, "selector": {}, "delay": delay}))
    }

    #[test]
    fn delay_lies_between_duration_and_jitter() {
        let object = json!({});
        let snapshot = ObjectSnapshot::new(&object);
        let s = delayed(json!({"durationMilliseconds": 1000, "jitterDurationMilliseconds": 5000}));
        let mut rng = StdRng::seed_from_u64(42);
        let now = Utc::now();
        let mut min = Duration::MAX;
        let mut max = Duration::ZERO;
        for _ in 0..1000 {
            let d = s.delay(&snapshot, now, &mut rng);
            assert!(
                d >= Duration::from_secs(1) && d < Duration::from_secs(5),
                "{d:?}"
            );
            min = min.min(d);
            max = max.max(d);
        }
        assert!(min < Duration::from_millis(1100) && max > Duration::from_millis(4900));
    }

    #[test]
    fn delay_rules_follow_kwok() {
        let now: DateTime<Utc> = "2024-01-01T00:00:00Z".parse().expect("time");
        let object = json!({"metadata": {
            "deletionTimestamp": "2024-01-01T00:00:30Z",
            "annotations": {"d": "2s", "empty": "", "past": "2023-12-31T23:59:00Z"}
        }});
        let snapshot = ObjectSnapshot::new(&object);
        let cases = [
            (json!(null), Duration::ZERO),
            (
                json!({"durationMilliseconds": 1500}),
                Duration::from_millis(1500),
            ),
            // A jitter bound below the duration wins.
            (
                json!({"durationMilliseconds": 3000, "jitterDurationMilliseconds": 1000}),
                Duration::from_secs(1),
            ),
            (
                json!({"durationMilliseconds": 1000, "durationFrom": {"expressionFrom": ".metadata.annotations.d"}}),
                Duration::from_secs(2),
            ),
            (
                json!({"durationMilliseconds": 1000, "durationFrom": {"expressionFrom": ".metadata.annotations.none"}}),
                Duration::from_secs(1),
            ),
            (
                json!({"durationMilliseconds": 1000, "durationFrom": {"expressionFrom": ".metadata.annotations.empty"}}),
                Duration::ZERO,
            ),
            (
                json!({"durationFrom": {"expressionFrom": ".metadata.deletionTimestamp"}}),
                Duration::from_secs(30),
            ),
            (
                json!({"durationFrom": {"expressionFrom": ".metadata.annotations.past"}}),
                Duration::ZERO,
            ),
            (
                json!({"durationMilliseconds": 40000, "jitterDurationFrom": {"expressionFrom": ".metadata.deletionTimestamp"}}),
                Duration::from_secs(30),
            ),
        ];
        let mut rng = StdRng::seed_from_u64(3);
        for (delay, want) in cases {
            let s = if delay.is_null() {
                stage(json!({"resourceRef": {"kind": "Pod"}, "selector": {}}))
            } else {
                delayed(delay.clone())
            };
            assert_eq!(s.delay(&snapshot, now, &mut rng), want, "{delay}");
        }
        // KWOK's pod-delete: between 1 s and the deletion timestamp.
        let s = delayed(
            json!({"durationMilliseconds": 1000, "jitterDurationFrom": {"expressionFrom": ".metadata.deletionTimestamp"}}),
        );
        for _ in 0..100 {
            let d = s.delay(&snapshot, now, &mut rng);
            assert!(
                d >= Duration::from_secs(1) && d < Duration::from_secs(30),
                "{d:?}"
            );
        }
    }

    #[test]
    fn go_integers_parse_with_prefixes() {
        let cases = [
            ("10", Some(10)),
            ("-3", Some(-3)),
            ("0x10", Some(16)),
            ("010", Some(8)),
            ("0b11", Some(3)),
            ("x", None),
            ("", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_go_int(s), want, "{s}");
        }
    }
}
