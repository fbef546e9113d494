//! PrioritySort: the queue order — higher `spec.priority` first, then the
//! pod that entered the queue earlier.

use crate::framework::{Plugin, QueueSortPlugin, QueuedPodInfo};

/// The plugin name.
pub const NAME: &str = "PrioritySort";

/// Orders pods by priority, then by queue timestamp.
#[derive(Debug, Clone, Copy, Default)]
pub struct PrioritySort;

fn priority(info: &QueuedPodInfo) -> i32 {
    ksim_core::status::pod_priority(&info.pod)
}

impl Plugin for PrioritySort {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        Some(self)
    }
}

impl QueueSortPlugin for PrioritySort {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (pa, pb) = (priority(a), priority(b));
        pa > pb || (pa == pb && a.timestamp < b.timestamp)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::testing::pod;

    #[test]
    fn higher_priority_then_earlier_first() {
        let queued = |priority: i32, timestamp: u64| QueuedPodInfo {
            pod: Arc::new(pod("p").priority(priority).obj()),
            timestamp,
            attempts: 0,
        };
        let cases = [
            ("higher priority wins", queued(10, 5), queued(1, 1), true),
            ("lower priority loses", queued(1, 1), queued(10, 5), false),
            (
                "equal priority, earlier wins",
                queued(3, 1),
                queued(3, 2),
                true,
            ),
            (
                "equal priority, later loses",
                queued(3, 2),
                queued(3, 1),
                false,
            ),
            ("identical is not less", queued(3, 2), queued(3, 2), false),
        ];
        for (name, a, b, expected) in cases {
            assert_eq!(PrioritySort.less(&a, &b), expected, "{name}");
        }
    }
}
