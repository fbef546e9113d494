//! The result of a plugin call: a code, reasons, and the plugin that set it.

use std::borrow::Cow;
use std::fmt;

/// What a plugin says about a pod (upstream `framework.Code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// All good.
    Success,
    /// An internal error: the cycle fails, not just the node.
    Error,
    /// The node does not fit, but preemption might help.
    Unschedulable,
    /// The node does not fit and preemption cannot help.
    UnschedulableAndUnresolvable,
    /// A Permit plugin asks to wait.
    Wait,
    /// The plugin has nothing to do for this pod (PreFilter/PreScore).
    Skip,
    /// Waiting for something outside the scheduler.
    Pending,
}

/// A plugin status: code, reasons (shown to users) and the plugin name.
/// Reasons that are constants are kept without copying them, since a
/// cycle may reject thousands of nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    code: Code,
    reasons: Vec<Cow<'static, str>>,
    plugin: Option<&'static str>,
}

impl Default for Status {
    fn default() -> Self {
        Status::success()
    }
}

impl Status {
    /// A status with one or more reasons.
    pub fn new(
        code: Code,
        reasons: impl IntoIterator<Item = impl Into<Cow<'static, str>>>,
    ) -> Self {
        Status {
            code,
            reasons: reasons.into_iter().map(Into::into).collect(),
            plugin: None,
        }
    }

    /// Success.
    pub fn success() -> Self {
        Status {
            code: Code::Success,
            reasons: Vec::new(),
            plugin: None,
        }
    }

    /// Skip.
    pub fn skip() -> Self {
        Status {
            code: Code::Skip,
            reasons: Vec::new(),
            plugin: None,
        }
    }

    /// Unschedulable with one reason.
    pub fn unschedulable(reason: impl Into<Cow<'static, str>>) -> Self {
        Status::new(Code::Unschedulable, [reason.into()])
    }

    /// UnschedulableAndUnresolvable with one reason.
    pub fn unresolvable(reason: impl Into<Cow<'static, str>>) -> Self {
        Status::new(Code::UnschedulableAndUnresolvable, [reason.into()])
    }

    /// An internal error.
    pub fn error(message: impl Into<Cow<'static, str>>) -> Self {
        Status::new(Code::Error, [message.into()])
    }

    /// Records the plugin that produced the status.
    pub fn with_plugin(mut self, plugin: &'static str) -> Self {
        self.plugin = Some(plugin);
        self
    }

    /// The code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The reasons, in order.
    pub fn reasons(&self) -> impl Iterator<Item = &str> {
        self.reasons.iter().map(AsRef::as_ref)
    }

    /// The plugin that produced the status, if recorded.
    pub fn plugin(&self) -> Option<&'static str> {
        self.plugin
    }

    /// The reasons joined by ", " (upstream `Status.Message`).
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }

    /// Success.
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    /// Skip.
    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    /// Unschedulable or UnschedulableAndUnresolvable.
    pub fn is_rejected(&self) -> bool {
        matches!(
            self.code,
            Code::Unschedulable | Code::UnschedulableAndUnresolvable | Code::Pending
        )
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_joins_reasons_and_codes_classify() {
        let status = Status::new(
            Code::Unschedulable,
            ["Insufficient cpu", "Insufficient memory"],
        )
        .with_plugin("NodeResourcesFit");
        assert_eq!(status.message(), "Insufficient cpu, Insufficient memory");
        assert_eq!(status.plugin(), Some("NodeResourcesFit"));
        assert!(status.is_rejected());
        assert!(Status::unresolvable("x").is_rejected());
        assert!(!Status::error("boom").is_rejected());
        assert!(Status::success().is_success());
        assert!(Status::skip().is_skip());
    }
}
