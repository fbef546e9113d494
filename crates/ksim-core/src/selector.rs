//! Label and field selectors: parsing (the string forms of `?labelSelector=`
//! and `?fieldSelector=`, and the structured `LabelSelector` of specs) and
//! matching.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::Error;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value`, `key==value`, or `key in (a,b)`.
    In(String, Vec<String>),
    /// `key!=value`, or `key notin (a,b)` (also true when the key is absent).
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
    /// `key>3` (integer comparison, node affinity style).
    GreaterThan(String, i64),
    /// `key<3`.
    LessThan(String, i64),
}

impl Requirement {
    /// Whether `labels` satisfy this requirement.
    pub fn matches(&self, labels: &dyn Labels) -> bool {
        match self {
            Requirement::In(key, values) => labels
                .get(key)
                .is_some_and(|v| values.iter().any(|x| x == v)),
            Requirement::NotIn(key, values) => labels
                .get(key)
                .is_none_or(|v| values.iter().all(|x| x != v)),
            Requirement::Exists(key) => labels.get(key).is_some(),
            Requirement::DoesNotExist(key) => labels.get(key).is_none(),
            Requirement::GreaterThan(key, n) => labels
                .get(key)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Requirement::LessThan(key, n) => labels
                .get(key)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }
}

/// Something labels can be read from.
pub trait Labels {
    /// The value of a label, if set.
    fn get(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<&str> {
        BTreeMap::get(self, key).map(String::as_str)
    }
}

impl Labels for serde_json::Map<String, serde_json::Value> {
    fn get(&self, key: &str) -> Option<&str> {
        serde_json::Map::get(self, key).and_then(serde_json::Value::as_str)
    }
}

/// No labels at all.
pub struct NoLabels;

impl Labels for NoLabels {
    fn get(&self, _key: &str) -> Option<&str> {
        None
    }
}

/// A parsed label selector: all requirements must hold. The empty selector
/// matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelectorRequirements {
    pub requirements: Vec<Requirement>,
}

impl LabelSelectorRequirements {
    /// Parses the string form (`app=web,tier!=db,env in (a,b),!canary`).
    pub fn parse(input: &str) -> Result<Self, Error> {
        let mut requirements = Vec::new();
        for term in split_terms(input)? {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(parse_term(term)?);
        }
        Ok(LabelSelectorRequirements { requirements })
    }

    /// Converts a structured `LabelSelector` (matchLabels and matchExpressions).
    /// A selector with no terms selects everything, as in kube.
    pub fn from_label_selector(selector: &LabelSelector) -> Result<Self, Error> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            requirements.push(Requirement::In(key.clone(), vec![value.clone()]));
        }
        for expression in selector.match_expressions.iter().flatten() {
            let values = expression.values.clone().unwrap_or_default();
            let key = expression.key.clone();
            let requirement = match expression.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(Error::InvalidSelector(format!(
                        "for 'in', 'notin' operators, values set can't be empty (key {key:?})"
                    )));
                }
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                other => {
                    return Err(Error::InvalidSelector(format!(
                        "{other:?} is not a valid label selector operator"
                    )));
                }
            };
            requirements.push(requirement);
        }
        Ok(LabelSelectorRequirements { requirements })
    }

    /// Converts a `LabelSelector` in its JSON form.
    pub fn from_json(selector: &serde_json::Value) -> Result<Self, Error> {
        let selector: LabelSelector = serde_json::from_value(selector.clone())
            .map_err(|e| Error::InvalidSelector(e.to_string()))?;
        Self::from_label_selector(&selector)
    }

    /// Whether the selector has no requirement (selects everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &dyn Labels) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

/// A structured selector as specs carry it (`Option<LabelSelector>`),
/// parsed: `None` (a nil selector) selects nothing, an empty one selects
/// everything (upstream `metav1.LabelSelectorAsSelector`). Every component
/// keeps such selectors as `Option<LabelSelectorRequirements>` and asks
/// them through this trait.
pub trait NilableSelector {
    /// Whether `labels` are selected (never by a nil selector).
    fn selects(&self, labels: &dyn Labels) -> bool;
    /// Whether the selector is empty, so selects every set of labels.
    fn selects_everything(&self) -> bool;
}

impl NilableSelector for Option<LabelSelectorRequirements> {
    fn selects(&self, labels: &dyn Labels) -> bool {
        self.as_ref().is_some_and(|s| s.matches(labels))
    }

    fn selects_everything(&self) -> bool {
        self.as_ref()
            .is_some_and(LabelSelectorRequirements::is_empty)
    }
}

impl LabelSelectorRequirements {
    /// Parses an optional structured selector; `None` stays nil.
    pub fn from_optional(selector: Option<&LabelSelector>) -> Result<Option<Self>, Error> {
        selector.map(Self::from_label_selector).transpose()
    }
}

/// Splits on commas that are not inside parentheses.
fn split_terms(input: &str) -> Result<Vec<&str>, Error> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| Error::InvalidSelector(input.to_string()))?;
            }
            ',' if depth == 0 => {
                terms.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(Error::InvalidSelector(input.to_string()));
    }
    terms.push(&input[start..]);
    Ok(terms)
}

fn parse_term(term: &str) -> Result<Requirement, Error> {
    let invalid = || Error::InvalidSelector(term.to_string());
    if let Some(key) = term.strip_prefix('!') {
        let key = key.trim();
        check_key(key, term)?;
        return Ok(Requirement::DoesNotExist(key.to_string()));
    }
    for (operator, is_in) in [(" notin ", false), (" in ", true)] {
        if let Some(position) = term.find(operator) {
            let key = term[..position].trim();
            check_key(key, term)?;
            let rest = term[position + operator.len()..].trim();
            let inner = rest
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(invalid)?;
            let values: Vec<String> = inner
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            return Ok(if is_in {
                Requirement::In(key.to_string(), values)
            } else {
                Requirement::NotIn(key.to_string(), values)
            });
        }
    }
    for (operator, build) in [
        (
            "!=",
            Requirement::NotIn as fn(String, Vec<String>) -> Requirement,
        ),
        ("==", Requirement::In),
        ("=", Requirement::In),
    ] {
        if let Some((key, value)) = term.split_once(operator) {
            let key = key.trim();
            check_key(key, term)?;
            return Ok(build(key.to_string(), vec![value.trim().to_string()]));
        }
    }
    for (operator, greater) in [(">", true), ("<", false)] {
        if let Some((key, value)) = term.split_once(operator) {
            let key = key.trim();
            check_key(key, term)?;
            let n: i64 = value.trim().parse().map_err(|_| invalid())?;
            return Ok(if greater {
                Requirement::GreaterThan(key.to_string(), n)
            } else {
                Requirement::LessThan(key.to_string(), n)
            });
        }
    }
    check_key(term, term)?;
    Ok(Requirement::Exists(term.to_string()))
}

fn check_key(key: &str, term: &str) -> Result<(), Error> {
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if valid {
        Ok(())
    } else {
        Err(Error::InvalidSelector(term.to_string()))
    }
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// e.g. `metadata.name`, `spec.nodeName`.
    pub field: String,
    /// The value compared with.
    pub value: String,
    /// `!=` rather than `=`/`==`.
    pub negated: bool,
}

/// A parsed field selector (`metadata.name=x,spec.nodeName!=`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    pub requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses the string form.
    pub fn parse(input: &str) -> Result<Self, Error> {
        let mut requirements = Vec::new();
        for term in input.split(',') {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let (field, value, negated) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, v, false)
            } else {
                return Err(Error::InvalidSelector(format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                )));
            };
            requirements.push(FieldRequirement {
                field: field.trim().to_string(),
                value: value.trim().to_string(),
                negated,
            });
        }
        Ok(FieldSelector { requirements })
    }

    /// Whether every requirement holds, reading field values with `value_of`
    /// (which returns `None` for a field that is not supported).
    pub fn matches(&self, value_of: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements.iter().all(|r| {
            let actual = value_of(&r.field).unwrap_or_default();
            (actual == r.value) != r.negated
        })
    }
}

/// The string form of a structured `LabelSelector`, as kube's
/// `LabelSelectorAsSelector(selector).String()` prints it: one term per
/// requirement (`key=value` for matchLabels, `key in (a,b)`, `key notin (a)`,
/// `key`, `!key`), sorted by key, values sorted. It is what the scale
/// subresource and `kubectl get -o wide` show and what controllers send as
/// `?labelSelector=`. An empty selector gives the empty string (everything);
/// an invalid one (unknown operator, values where none belong) an error.
pub fn label_selector_string(selector: &LabelSelector) -> Result<String, Error> {
    let mut terms: Vec<(&str, String)> = Vec::new();
    for (key, value) in selector.match_labels.iter().flatten() {
        terms.push((key, format!("{key}={value}")));
    }
    for expression in selector.match_expressions.iter().flatten() {
        let key = expression.key.as_str();
        let mut values: Vec<&str> = expression
            .values
            .iter()
            .flatten()
            .map(String::as_str)
            .collect();
        values.sort_unstable();
        let term = match (expression.operator.as_str(), values.is_empty()) {
            ("In", false) => format!("{key} in ({})", values.join(",")),
            ("NotIn", false) => format!("{key} notin ({})", values.join(",")),
            ("Exists", true) => key.to_string(),
            ("DoesNotExist", true) => format!("!{key}"),
            (operator, _) => {
                return Err(Error::InvalidSelector(format!(
                    "{operator:?} with {} values is not a valid label selector requirement (key {key:?})",
                    values.len()
                )));
            }
        };
        terms.push((key, term));
    }
    terms.sort_by(|a, b| a.0.cmp(b.0));
    Ok(terms
        .into_iter()
        .map(|(_, term)| term)
        .collect::<Vec<_>>()
        .join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn string_selectors_match_as_kubectl_l_does() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("version", "3")]);
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=db", false),
            ("app in (web,db)", true),
            ("app notin (web,db)", false),
            ("missing notin (a)", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("app=web,tier=front", true),
            ("app=web,tier=back", false),
            ("version>2", true),
            ("version<2", false),
            ("", true),
        ];
        for (selector, expected) in cases {
            let parsed = LabelSelectorRequirements::parse(selector).expect(selector);
            assert_eq!(parsed.matches(&l), expected, "{selector}");
        }
    }

    #[test]
    fn a_nil_selector_selects_nothing_and_an_empty_one_everything() {
        let web = labels(&[("app", "web")]);
        let nil = LabelSelectorRequirements::from_optional(None).expect("nil");
        assert!(!nil.selects(&web));
        assert!(!nil.selects(&NoLabels));
        assert!(!nil.selects_everything());
        let empty =
            LabelSelectorRequirements::from_optional(Some(&LabelSelector::default())).expect("{}");
        assert!(empty.selects(&web));
        assert!(empty.selects(&NoLabels));
        assert!(empty.selects_everything());
        let app = LabelSelectorRequirements::from_optional(Some(&LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
            ..LabelSelector::default()
        }))
        .expect("app=web");
        assert!(app.selects(&web));
        assert!(!app.selects(&NoLabels));
        assert!(!app.selects_everything());
    }

    #[test]
    fn malformed_selectors_are_errors() {
        for bad in ["app in (a", "a=b)", "app in a", "ke y=v", "=v"] {
            assert!(LabelSelectorRequirements::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn structured_selector_with_expressions() {
        let selector = serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]
        });
        let parsed = LabelSelectorRequirements::from_json(&selector).expect("valid");
        assert!(parsed.matches(&labels(&[("app", "web"), ("tier", "front")])));
        assert!(!parsed.matches(&labels(&[("app", "web"), ("tier", "db")])));
        let bad = serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Near"}]});
        assert!(LabelSelectorRequirements::from_json(&bad).is_err());
    }

    #[test]
    fn field_selector_equality_and_inequality() {
        let selector = FieldSelector::parse("spec.nodeName=,status.phase!=Failed").expect("valid");
        let value_of = |field: &str| match field {
            "spec.nodeName" => Some(String::new()),
            "status.phase" => Some("Pending".to_string()),
            _ => None,
        };
        assert!(selector.matches(value_of));
        assert!(FieldSelector::parse("nonsense").is_err());
    }

    #[test]
    fn label_selector_string_prints_sorted_terms_as_kube() {
        let selector: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"tier": "web", "app": "nginx"},
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["b", "a"]},
                {"key": "env", "operator": "NotIn", "values": ["x"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "b", "operator": "Exists"}
            ]
        }))
        .expect("a valid selector");
        assert_eq!(
            label_selector_string(&selector).as_deref(),
            Ok("app=nginx,b,!canary,env notin (x),tier=web,zone in (a,b)")
        );
        assert_eq!(
            label_selector_string(&LabelSelector::default()).as_deref(),
            Ok("")
        );
        let invalid: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchExpressions": [{"key": "zone", "operator": "In"}]
        }))
        .expect("a well-formed selector");
        assert!(label_selector_string(&invalid).is_err());
    }
}
