//! NodePorts: rejects nodes where a host port the pod asks for is taken
//! (same protocol and port, on the same ip or 0.0.0.0).

use k8s_openapi::api::core::v1::Pod;

use crate::framework::{
    CycleState, FilterPlugin, HostPort, NodeInfo, Plugin, PreFilterPlugin, PreFilterResult,
    Snapshot, Status, host_ports,
};

/// The plugin name.
pub const NAME: &str = "NodePorts";
/// The reason for a port clash.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";
const STATE_KEY: &str = "PreFilterNodePorts";

/// Filters nodes by free host ports.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodePorts;

impl Plugin for NodePorts {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for NodePorts {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let ports = host_ports(pod);
        if ports.is_empty() {
            return (None, Status::skip());
        }
        state.write(STATE_KEY, ports);
        (None, Status::success())
    }
}

impl FilterPlugin for NodePorts {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(ports) = state.read::<Vec<HostPort>>(STATE_KEY) else {
            return Status::error(format!("reading {STATE_KEY:?} from cycleState: not found"));
        };
        if ports.iter().any(|p| node.used_ports.check_conflict(p)) {
            return Status::unschedulable(ERR_REASON);
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{filter_all, messages, node, pod};

    #[test]
    fn host_ports_must_be_free() {
        let cases = [
            ("no ports", pod("p").obj(), vec![], ""),
            (
                "free port",
                pod("p").host_port("", "", 8080).obj(),
                vec![pod("e").host_port("", "", 9090)],
                "",
            ),
            (
                "same port",
                pod("p").host_port("", "", 8080).obj(),
                vec![pod("e").host_port("", "", 8080)],
                ERR_REASON,
            ),
            (
                "other protocol",
                pod("p").host_port("", "UDP", 8080).obj(),
                vec![pod("e").host_port("", "TCP", 8080)],
                "",
            ),
            (
                "other ip",
                pod("p").host_port("127.0.0.1", "", 8080).obj(),
                vec![pod("e").host_port("127.0.0.2", "", 8080)],
                "",
            ),
            (
                "wildcard taken",
                pod("p").host_port("127.0.0.1", "", 8080).obj(),
                vec![pod("e").host_port("0.0.0.0", "", 8080)],
                ERR_REASON,
            ),
            (
                "wildcard asked",
                pod("p").host_port("0.0.0.0", "", 8080).obj(),
                vec![pod("e").host_port("127.0.0.1", "", 8080)],
                ERR_REASON,
            ),
        ];
        for (name, pod, existing, expected) in cases {
            let snapshot = Snapshot::new(
                [node("n").obj()],
                existing.into_iter().map(|p| p.node("n").obj()),
            );
            assert_eq!(
                messages(&filter_all(&NodePorts, &pod, &snapshot)),
                [expected],
                "{name}"
            );
        }
    }
}
