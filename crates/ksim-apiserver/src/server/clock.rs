//! The cluster's clock over the API: a ksim-only, non-resource path (no
//! discovery, no kind in any group; kubectl reaches it with `--raw`).
//!
//! - `GET /ksim/v1alpha1/clock`: the clock, as
//!   `{"kind": "Clock", "apiVersion": "ksim.io/v1alpha1", "mode": "virtual",
//!   "now": "2026-01-01T00:00:00Z", "nextTimer": "2026-01-01T00:00:30Z",
//!   "seed": 7}` (`nextTimer` only on a virtual clock with a timer set,
//!   `seed` only when the cluster's random source is seeded).
//! - `POST /ksim/v1alpha1/clock/advance` with `{"by": "10m"}` (a Go
//!   duration: `500ms`, `90s`, `10m`, `1h30m`) or `{"to": RFC 3339}`, or
//!   the same as query parameters (`?by=10m`): moves a virtual clock,
//!   firing every timer that falls due on the way and letting the cluster
//!   settle after each, and answers the clock once it has settled at the
//!   new time. On a real clock: 400 BadRequest; a malformed `by` or `to`,
//!   or a `to` before now: 400 BadRequest naming the field.
//!
//! An advance runs to its end even if its client goes away, and advances
//! run one at a time. The advance request is not counted as work in flight
//! (it waits for the cluster to settle, so counting it would never let it).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Request, State as AxumState};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use http::{Method, StatusCode};
use serde_json::{Value, json};

use ksim_clock::Clock;

use super::State;
use super::codec::{self, Output};
use crate::ApiError;

/// The clock's path.
pub(crate) const CLOCK_PATH: &str = "/ksim/v1alpha1/clock";
/// The path that advances the clock.
pub(crate) const ADVANCE_PATH: &str = "/ksim/v1alpha1/clock/advance";

/// The largest body an advance reads.
const BODY_LIMIT: usize = 64 * 1024;

/// `GET /ksim/v1alpha1/clock`.
pub(crate) async fn get(AxumState(state): AxumState<Arc<State>>, request: Request) -> Response {
    if request.method() != Method::GET {
        return method_not_allowed(request.method());
    }
    codec::respond_value(StatusCode::OK, Output::Json, &describe(&state.clock))
}

/// `POST /ksim/v1alpha1/clock/advance`.
pub(crate) async fn advance(AxumState(state): AxumState<Arc<State>>, request: Request) -> Response {
    match advance_request(state, request).await {
        Ok(value) => codec::respond_value(StatusCode::OK, Output::Json, &value),
        Err(error) => error.into_response(),
    }
}

/// Where an advance goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    By(Duration),
    To(DateTime<Utc>),
}

async fn advance_request(state: Arc<State>, request: Request) -> Result<Value, ApiError> {
    if request.method() != Method::POST {
        return Err(method_not_allowed_error(request.method()));
    }
    let query = request.uri().query().map(str::to_string);
    let body = axum::body::to_bytes(request.into_body(), BODY_LIMIT)
        .await
        .map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?;
    let target = parse_target(query.as_deref(), &body)?;
    if !state.clock.is_virtual() {
        return Err(ApiError::bad_request(
            ksim_clock::Error::NotVirtual.to_string(),
        ));
    }
    if let Target::To(to) = target
        && to < state.clock.now()
    {
        return Err(field_error(
            "to",
            "FieldValueInvalid",
            format!(
                "Invalid value: {:?}: before the cluster's time {} (a clock only moves forward)",
                rfc3339(to),
                rfc3339(state.clock.now())
            ),
        ));
    }
    // Spawned so that the clock reaches its target even if the client goes
    // away half-way; the lock keeps advances from interleaving.
    let task = tokio::spawn({
        let state = state.clone();
        async move {
            let _one_at_a_time = state.advancing.lock().await;
            match target {
                Target::By(by) => state.clock.advance(by).await,
                Target::To(to) => state.clock.advance_to(to).await,
            }
        }
    });
    match task.await {
        Ok(Ok(now)) => {
            tracing::info!(now = %rfc3339(now), "clock advanced");
            Ok(describe(&state.clock))
        }
        Ok(Err(error @ ksim_clock::Error::NotVirtual)) => {
            Err(ApiError::bad_request(error.to_string()))
        }
        Ok(Err(error)) => Err(ApiError::internal(error.to_string())),
        Err(error) => Err(ApiError::internal(format!("advancing the clock: {error}"))),
    }
}

/// `by` or `to`, from the query or a JSON body (one of them, once).
fn parse_target(query: Option<&str>, body: &Bytes) -> Result<Target, ApiError> {
    let mut fields: Vec<(String, Value)> = query
        .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|(key, _)| key == "by" || key == "to")
        .map(|(key, value)| (key, Value::String(value)))
        .collect();
    if !body.iter().all(u8::is_ascii_whitespace) {
        let value: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("the body of an advance is not JSON: {e}"))
        })?;
        let Value::Object(map) = value else {
            return Err(ApiError::bad_request(
                "the body of an advance must be a JSON object such as {\"by\": \"10m\"}",
            ));
        };
        for (key, value) in map {
            match key.as_str() {
                "by" | "to" => fields.push((key, value)),
                "kind" | "apiVersion" => {}
                other => {
                    return Err(field_error(
                        other,
                        "FieldValueNotSupported",
                        format!("unknown field {other:?}: an advance takes \"by\" or \"to\""),
                    ));
                }
            }
        }
    }
    let (key, value) = match fields.as_slice() {
        [] => {
            return Err(field_error(
                "by",
                "FieldValueRequired",
                "Required value: how far to advance (a duration such as \"10m\"), or \"to\" (a time)"
                    .to_string(),
            ));
        }
        [one] => one,
        _ => {
            return Err(ApiError::bad_request(
                "an advance takes one of \"by\" and \"to\", once",
            ));
        }
    };
    let text = match value {
        Value::String(text) => text.as_str(),
        other => {
            return Err(field_error(
                key,
                "FieldValueInvalid",
                format!("Invalid value: {other}: must be a string"),
            ));
        }
    };
    if key == "by" {
        ksim_core::duration::parse_go_duration(text)
            .map(Target::By)
            .map_err(|why| {
                field_error(
                    "by",
                    "FieldValueInvalid",
                    format!("Invalid value: {text:?}: {why}"),
                )
            })
    } else {
        DateTime::parse_from_rfc3339(text)
            .map(|t| Target::To(t.with_timezone(&Utc)))
            .map_err(|why| {
                field_error(
                    "to",
                    "FieldValueInvalid",
                    format!("Invalid value: {text:?}: not an RFC 3339 time: {why}"),
                )
            })
    }
}

/// 400 BadRequest about one field of the advance (`by: Invalid value: ...`),
/// with the field among the Status's causes.
fn field_error(field: &str, reason: &str, message: String) -> ApiError {
    let mut error = ApiError::bad_request(format!("{field}: {message}"));
    error.details = Some(json!({
        "name": "clock", "group": "ksim.io", "kind": "Clock",
        "causes": [{"reason": reason, "message": message, "field": field}],
    }));
    error
}

/// The clock as the API shows it.
pub(crate) fn describe(clock: &Clock) -> Value {
    let mut value = json!({
        "kind": "Clock",
        "apiVersion": "ksim.io/v1alpha1",
        "mode": clock.mode().to_string(),
        "now": rfc3339(clock.now()),
    });
    if let Some(next) = clock.next_timer() {
        value["nextTimer"] = json!(rfc3339(next));
    }
    if let Some(seed) = clock.random().seed() {
        value["seed"] = json!(seed);
    }
    value
}

/// A time as RFC 3339, with fractions only when there are any.
fn rfc3339(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

fn method_not_allowed_error(method: &Method) -> ApiError {
    ApiError::method_not_allowed(format!(
        "the server does not allow this method on the requested resource ({method})"
    ))
}

fn method_not_allowed(method: &Method) -> Response {
    method_not_allowed_error(method).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(text: &str) -> Bytes {
        Bytes::from(text.to_string())
    }

    #[test]
    fn an_advance_takes_by_or_to_from_the_body_or_the_query() {
        assert_eq!(
            parse_target(None, &body(r#"{"by": "10m"}"#)).expect("by"),
            Target::By(Duration::from_secs(600))
        );
        assert_eq!(
            parse_target(Some("by=1h30m"), &body("")).expect("query"),
            Target::By(Duration::from_secs(5_400))
        );
        assert_eq!(
            parse_target(None, &body(r#"{"to": "2026-01-01T01:00:00Z"}"#)).expect("to"),
            Target::To("2026-01-01T01:00:00Z".parse().expect("time"))
        );
    }

    #[test]
    fn a_bad_advance_names_its_field() {
        let error = parse_target(None, &body(r#"{"by": "ten minutes"}"#)).expect_err("bad");
        assert_eq!((error.code, error.reason), (400, "BadRequest"));
        assert_eq!(
            error.message,
            r#"by: Invalid value: "ten minutes": time: invalid duration "ten minutes""#
        );
        assert_eq!(
            error.details.expect("details")["causes"][0]["field"],
            json!("by")
        );
        let error = parse_target(None, &body("")).expect_err("missing");
        assert!(error.message.starts_with("by: Required value"), "{error}");
        let error = parse_target(None, &body(r#"{"step": "1m"}"#)).expect_err("unknown");
        assert!(error.message.contains("unknown field \"step\""), "{error}");
        let error = parse_target(Some("by=1m"), &body(r#"{"by": "2m"}"#)).expect_err("twice");
        assert_eq!(error.code, 400);
        let error = parse_target(None, &body(r#"{"to": "tomorrow"}"#)).expect_err("to");
        assert!(
            error.message.starts_with("to: Invalid value: \"tomorrow\""),
            "{error}"
        );
    }
}
