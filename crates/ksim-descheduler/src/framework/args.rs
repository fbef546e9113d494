//! Decoding a plugin's `args` from the policy, with errors that name the
//! offending field as the user wrote it.

use serde::de::DeserializeOwned;

/// A plugin's args could not be decoded or are out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ArgsError {
    /// The path of the field within the plugin's args, e.g. `thresholds.cpu`
    /// (empty for the args object itself). The policy parser prefixes it
    /// with the plugin's position in the policy.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl ArgsError {
    /// An error about one field.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ArgsError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Decodes a plugin's args (absent or null args give `T::default()`),
/// reporting the path of the first bad field.
pub fn decode_args<T: DeserializeOwned + Default>(
    args: Option<&serde_json::Value>,
) -> Result<T, ArgsError> {
    match args {
        None | Some(serde_json::Value::Null) => Ok(T::default()),
        Some(value) => serde_path_to_error::deserialize(value).map_err(|error| {
            let path = error.path().to_string();
            let field = if path == "." { String::new() } else { path };
            ArgsError::new(field, error.into_inner().to_string())
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
    struct ExampleArgs {
        max_pod_life_time_seconds: Option<u32>,
        states: Vec<String>,
    }

    #[test]
    fn absent_args_decode_to_defaults() {
        assert_eq!(decode_args::<ExampleArgs>(None), Ok(ExampleArgs::default()));
    }

    #[test]
    fn a_bad_field_is_named_by_its_path() {
        let args = serde_json::json!({"states": ["Running", 3]});
        let error = decode_args::<ExampleArgs>(Some(&args)).expect_err("3 is not a string");
        assert_eq!(error.field, "states[1]");
    }

    #[test]
    fn an_unknown_field_is_refused() {
        let args = serde_json::json!({"maxPodLifeTime": 3});
        let error = decode_args::<ExampleArgs>(Some(&args)).expect_err("unknown field");
        assert!(error.message.contains("maxPodLifeTime"), "{error}");
    }
}
