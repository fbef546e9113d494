//! SchedulingGates: a PreEnqueue plugin keeping pods with
//! `spec.schedulingGates` out of the active queue.

use k8s_openapi::api::core::v1::Pod;

use crate::framework::{Plugin, PreEnqueuePlugin, Status};

/// The plugin name.
pub const NAME: &str = "SchedulingGates";

/// Holds gated pods back.
#[derive(Debug, Clone, Copy, Default)]
pub struct SchedulingGates;

impl Plugin for SchedulingGates {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }
}

impl PreEnqueuePlugin for SchedulingGates {
    fn pre_enqueue(&self, pod: &Pod) -> Status {
        let gates: Vec<&str> = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .into_iter()
            .flatten()
            .map(|g| g.name.as_str())
            .collect();
        if gates.is_empty() {
            return Status::success();
        }
        Status::unresolvable(format!(
            "waiting for scheduling gates: [{}]",
            gates.join(" ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodSchedulingGate;

    use super::*;
    use crate::framework::Code;
    use crate::testing::pod;

    #[test]
    fn gated_pods_wait() {
        let mut gated = pod("p").obj();
        if let Some(spec) = gated.spec.as_mut() {
            spec.scheduling_gates = Some(vec![
                PodSchedulingGate {
                    name: "foo".to_string(),
                },
                PodSchedulingGate {
                    name: "bar".to_string(),
                },
            ]);
        }
        let status = SchedulingGates.pre_enqueue(&gated);
        assert_eq!(status.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(status.message(), "waiting for scheduling gates: [foo bar]");
        assert!(SchedulingGates.pre_enqueue(&pod("free").obj()).is_success());
    }
}
