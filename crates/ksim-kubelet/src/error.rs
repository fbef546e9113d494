//! Errors of the kubelet simulator: its pure parts and its API calls.

/// What can go wrong compiling a Stage or computing its next action.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    /// A jq expression did not parse or compile.
    #[error("invalid jq expression {expression:?}: {reason}")]
    InvalidExpression {
        /// The expression as written.
        expression: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A selector requirement is malformed.
    #[error("stage {stage:?}: {message}")]
    InvalidStage {
        /// Stage name.
        stage: String,
        /// What is wrong, in KWOK's words where it has some.
        message: String,
    },
    /// A template did not parse or failed while rendering.
    #[error("template: {0}")]
    Template(String),
    /// A rendered template is not valid YAML.
    #[error("rendered template is not valid YAML: {reason}: {text}")]
    RenderedYaml {
        /// Parser message.
        reason: String,
        /// The rendered text.
        text: String,
    },
    /// A CIDR could not be parsed.
    #[error("invalid CIDR {cidr:?}: {reason}")]
    InvalidCidr {
        /// The CIDR as given.
        cidr: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A pod IP pool has no address left.
    #[error("no IP address left in {cidr}")]
    PoolExhausted {
        /// The pool's CIDR.
        cidr: String,
    },
    /// A stage file did not decode.
    #[error("invalid stage YAML: {0}")]
    StageYaml(String),
    /// A request to the API server failed.
    #[error("{action}: {message}")]
    Api {
        /// What the simulator was doing.
        action: String,
        /// The server's or the transport's message.
        message: String,
    },
    /// A command-line style option is malformed.
    #[error("{0}")]
    InvalidOption(String),
}

impl KubeletError {
    /// An [`KubeletError::Api`] error for `action`.
    pub fn api(action: impl Into<String>, error: impl std::fmt::Display) -> Self {
        KubeletError::Api {
            action: action.into(),
            message: error.to_string(),
        }
    }
}
