//! NodeName: a pod with `spec.nodeName` set fits only that node.

use k8s_openapi::api::core::v1::Pod;

use crate::framework::{CycleState, FilterPlugin, NodeInfo, Plugin, Status};

/// The plugin name.
pub const NAME: &str = "NodeName";
/// The reason for another node.
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

/// Filters nodes by `spec.nodeName`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeName;

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl FilterPlugin for NodeName {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        match pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            Some(name) if !name.is_empty() && name != node.name() => {
                Status::unresolvable(ERR_REASON)
            }
            _ => Status::success(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Snapshot;
    use crate::testing::{filter_all, messages, node, pod};

    #[test]
    fn only_the_named_node_fits() {
        let snapshot = Snapshot::new([node("foo").obj(), node("bar").obj()], []);
        let cases = [
            ("no node name", pod("p").obj(), ["", ""]),
            ("named foo", pod("p").node("foo").obj(), ["", ERR_REASON]),
            (
                "named elsewhere",
                pod("p").node("baz").obj(),
                [ERR_REASON, ERR_REASON],
            ),
        ];
        for (name, pod, expected) in cases {
            assert_eq!(
                messages(&filter_all(&NodeName, &pod, &snapshot)),
                expected,
                "{name}"
            );
        }
    }
}
