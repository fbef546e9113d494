//! jq queries over objects (jaq): compiled once per Stage, run on an object converted once
//! per event, and only when an expression is not one the fast path ([`super::path`]) runs
//! straight on the JSON.

use std::cell::OnceCell;
use std::fmt;
use std::sync::Arc;

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars, data};
use jaq_json::Val;
use serde::Deserialize;

use super::path::{FastOutput, FastPath};
use crate::error::KubeletError;

type JqFilter = jaq_core::Filter<data::JustLut<Val>>;

/// A compiled jq program.
#[derive(Clone)]
pub struct JqQuery {
    source: String,
    filter: Arc<JqFilter>,
    fast: Option<FastPath>,
}

impl fmt::Debug for JqQuery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("JqQuery").field(&self.source).finish()
    }
}

/// An object as queries see it, shared by every query of one event: the JSON, and
/// its conversion to jaq's value type, made once and only if a query needs it.
#[derive(Clone, Debug)]
pub struct JqInput<'a> {
    object: &'a serde_json::Value,
    converted: OnceCell<Val>,
}

impl<'a> JqInput<'a> {
    /// The input of queries about `object`.
    pub fn new(object: &'a serde_json::Value) -> Self {
        Self {
            object,
            converted: OnceCell::new(),
        }
    }

    fn val(&self) -> &Val {
        // serde_json::Value always deserializes into a JSON value.
        self.converted
            .get_or_init(|| Val::deserialize(self.object).unwrap_or(Val::Null))
    }
}

/// One output of a query, reduced to what stage rules look at.
#[derive(Clone, Debug, PartialEq)]
pub enum JqOutput {
    /// A string.
    String(String),
    /// A boolean.
    Bool(bool),
    /// A number, as jq prints it.
    Number(String),
    /// An array or object.
    Composite,
}

impl JqQuery {
    /// Parses and compiles `source`.
    pub fn compile(source: &str) -> Result<Self, KubeletError> {
        let invalid = |reason: String| KubeletError::InvalidExpression {
            expression: source.to_owned(),
            reason,
        };
        let defs = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs());
        let funs = jaq_core::funs()
            .chain(jaq_std::funs())
            .chain(jaq_json::funs());
        let loader = Loader::new(defs);
        let arena = Arena::default();
        let program = File {
            code: source,
            path: (),
        };
        let modules = loader
            .load(&arena, program)
            .map_err(|errs| invalid(format!("parse error ({} errors)", errs.len())))?;
        let filter = Compiler::default()
            .with_funs(funs)
            .compile(modules)
            .map_err(|errs| invalid(format!("compile error ({} errors)", errs.len())))?;
        Ok(Self {
            source: source.to_owned(),
            filter: Arc::new(filter),
            fast: FastPath::parse(source),
        })
    }

    /// The object fields every output of the query lies under, when the
    /// query is a plain field path (the fast path's grammar); `None` when it
    /// may read anything (an empty path is the whole object too).
    pub fn field_prefix(&self) -> Option<Vec<&str>> {
        self.fast.as_ref().map(FastPath::field_prefix)
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Runs the query. As in KWOK, `null` outputs are skipped and an error
    /// anywhere makes the whole result empty.
    pub fn execute(&self, input: &JqInput<'_>) -> Vec<JqOutput> {
        if let Some(out) = self
            .fast
            .as_ref()
            .and_then(|fast| run_fast(fast, input.object))
        {
            return out;
        }
        self.execute_with_jaq(input)
    }

    /// Runs the query with jq's own semantics, for callers that show the
    /// results to people (`ksim run`'s checks): every output as jq prints it
    /// (`null` included), or the first error's message.
    pub fn evaluate(&self, object: &serde_json::Value) -> Result<Vec<String>, String> {
        let input = JqInput::new(object);
        let ctx = Ctx::<data::JustLut<Val>>::new(&self.filter.lut, Vars::new([]));
        self.filter
            .id
            .run((ctx, input.val().clone()))
            .map(|item| {
                jaq_core::unwrap_valr(item)
                    .map(|value| value.to_string())
                    .map_err(|error| error.to_string())
            })
            .collect()
    }

    fn execute_with_jaq(&self, input: &JqInput<'_>) -> Vec<JqOutput> {
        let ctx = Ctx::<data::JustLut<Val>>::new(&self.filter.lut, Vars::new([]));
        let mut out = Vec::new();
        for item in self.filter.id.run((ctx, input.val().clone())) {
            match jaq_core::unwrap_valr(item) {
                Ok(Val::Null) => {}
                Ok(Val::Bool(b)) => out.push(JqOutput::Bool(b)),
                Ok(Val::Num(n)) => out.push(JqOutput::Number(n.to_string())),
                Ok(Val::TStr(s) | Val::BStr(s)) => {
                    out.push(JqOutput::String(String::from_utf8_lossy(&s).into_owned()))
                }
                Ok(Val::Arr(_) | Val::Obj(_)) => out.push(JqOutput::Composite),
                Err(_) => return Vec::new(),
            }
        }
        out
    }
}

/// The fast path's outputs, or `None` when only jaq gives the exact answer (numbers,
/// which jaq prints its own way).
fn run_fast(fast: &FastPath, object: &serde_json::Value) -> Option<Vec<JqOutput>> {
    let values = match fast.run(object) {
        FastOutput::Error => return Some(Vec::new()),
        FastOutput::Values(values) => values,
    };
    let mut out = Vec::with_capacity(values.len());
    for value in values {
        match value {
            serde_json::Value::Null => {}
            serde_json::Value::Bool(b) => out.push(JqOutput::Bool(*b)),
            serde_json::Value::String(s) => out.push(JqOutput::String(s.clone())),
            serde_json::Value::Array(_) | serde_json::Value::Object(_) => {
                out.push(JqOutput::Composite)
            }
            serde_json::Value::Number(_) => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(expr: &str, object: serde_json::Value) -> Vec<JqOutput> {
        JqQuery::compile(expr)
            .expect("compiles")
            .execute(&JqInput::new(&object))
    }

    #[test]
    fn paths_kwok_ships_evaluate() {
        let node = json!({"status": {"phase": "Running", "conditions": [
            {"type": "MemoryPressure", "status": "False"},
            {"type": "Ready", "status": "True"}
        ]}, "metadata": {"labels": {"a.b/c": "x"}, "ownerReferences": [{"kind": "Job"}]}});
        let cases: &[(&str, Vec<JqOutput>)] = &[
            (".status.phase", vec![JqOutput::String("Running".into())]),
            (
                r#".status.conditions.[] | select( .type == "Ready" ) | .status"#,
                vec![JqOutput::String("True".into())],
            ),
            (
                r#".metadata.labels["a.b/c"]"#,
                vec![JqOutput::String("x".into())],
            ),
            (
                ".metadata.ownerReferences.[].kind",
                vec![JqOutput::String("Job".into())],
            ),
            (".metadata.deletionTimestamp", vec![]),
            (".status.conditions", vec![JqOutput::Composite]),
        ];
        for (expr, want) in cases {
            assert_eq!(&run(expr, node.clone()), want, "{expr}");
        }
    }

    #[test]
    fn fast_path_agrees_with_jaq() {
        let objects = [
            json!({"status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Ready", "status": "False"},
                {"type": "Initialized", "status": true},
                "not an object",
            ]}, "metadata": {"labels": {"a.b/c": "x"}, "ownerReferences": [{"kind": "Job"}, {}],
                "finalizers": ["f"], "deletionTimestamp": "2024-01-01T00:00:00Z"}}),
            json!({"status": {"conditions": null, "phase": 3}, "metadata": {"labels": "s"}}),
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            json!({"status": {"conditions": {"x": {"type": "Ready", "status": "True"}}}}),
            json!({"status": "flat", "metadata": null}),
            json!({"status": {"conditions": [{"type": 1}], "n": 1.5}}),
            json!(null),
            json!([1, "a"]),
        ];
        let expressions = [
            ".status.phase",
            ".metadata.deletionTimestamp",
            ".metadata.finalizers",
            r#".metadata.labels["a.b/c"]"#,
            ".metadata.ownerReferences.[].kind",
            r#".status.conditions.[] | select( .type == "Ready" ) | .status"#,
            r#".status.conditions.[] | select( .type == "Initialized" ) | .status"#,
            ".status.conditions[]",
            ".status.n",
            ".[]",
            ".",
        ];
        for expression in expressions {
            let query = JqQuery::compile(expression).expect("compiles");
            assert!(query.fast.is_some(), "{expression} takes the fast path");
            for object in &objects {
                let input = JqInput::new(object);
                assert_eq!(
                    query.execute(&input),
                    query.execute_with_jaq(&input),
                    "{expression} on {object}"
                );
            }
        }
    }

    #[test]
    fn runtime_error_gives_empty_result() {
        assert_eq!(run(".a.b", json!({"a": "string"})), vec![]);
    }

    #[test]
    fn numbers_and_bools_come_out_typed() {
        assert_eq!(
            run(".a, .b", json!({"a": 3, "b": true})),
            vec![JqOutput::Number("3".into()), JqOutput::Bool(true)]
        );
    }

    #[test]
    fn evaluate_gives_every_output_as_jq_prints_it_or_the_error() {
        let query = JqQuery::compile(".a, .b, (.c | length > 1)").expect("compiles");
        assert_eq!(
            query.evaluate(&json!({"a": null, "b": {"x": [1]}, "c": [1, 2]})),
            Ok(vec!["null".into(), r#"{"x":[1]}"#.into(), "true".into()])
        );
        let failing = JqQuery::compile(".a.b").expect("compiles");
        let error = failing
            .evaluate(&json!({"a": "s"}))
            .expect_err("cannot index a string");
        assert!(error.contains("cannot index"), "{error}");
    }

    #[test]
    fn syntax_error_is_reported() {
        let err = JqQuery::compile(".status.[").expect_err("bad syntax");
        assert!(err.to_string().contains(".status.["), "{err}");
    }
}
