//! What one StatefulSet sync does, as a pure function of the set's shape
//! and its pods (upstream's `updateStatefulSet` pass): create missing
//! ordinals, replace failed pods, delete condemned ordinals from the
//! highest, then roll pods to the update revision from the highest ordinal
//! down to the partition. OrderedReady stops at the first pod that is not
//! Running and Ready; Parallel does not wait.

/// How far along one pod is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    /// Running with the Ready condition True.
    Healthy,
    /// Created but not (yet) Running and Ready.
    Starting,
    /// Succeeded or Failed: to be replaced.
    Finished,
    /// Being deleted.
    Terminating,
}

/// One pod of the set, as the plan sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberPod {
    /// The pod's name.
    pub name: String,
    /// The ordinal its name ends with.
    pub ordinal: i32,
    /// Its `controller-revision-hash` label.
    pub revision: String,
    /// How far along it is.
    pub state: PodState,
}

/// The parts of a StatefulSet the plan reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetShape {
    /// `spec.replicas`.
    pub replicas: i32,
    /// `spec.ordinals.start`.
    pub start: i32,
    /// podManagementPolicy Parallel.
    pub parallel: bool,
    /// RollingUpdate's partition; `None` for the OnDelete strategy.
    pub partition: Option<i32>,
    /// The revision pods of ordinals below the partition keep.
    pub current_revision: String,
    /// The revision of the set's template.
    pub update_revision: String,
}

/// One thing the sync does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Create the pod of this ordinal at this revision.
    Create {
        /// The ordinal.
        ordinal: i32,
        /// The revision whose template it gets.
        revision: String,
    },
    /// Delete this pod.
    Delete(String),
}

impl SetShape {
    /// The revision a newly created pod of `ordinal` gets
    /// (`newVersionedStatefulSetPod`).
    fn revision_for(&self, ordinal: i32) -> String {
        let index = ordinal - self.start;
        // The apiserver defaults the partition to 0, so upstream's
        // `ord < currentReplicas` case for a missing partition never applies.
        let keep_current = self.partition.is_some_and(|partition| index < partition);
        if keep_current && self.current_revision != self.update_revision {
            self.current_revision.clone()
        } else {
            self.update_revision.clone()
        }
    }
}

/// The steps of one sync.
pub fn plan_steps(shape: &SetShape, pods: &[MemberPod]) -> Vec<Step> {
    let ordered = !shape.parallel;
    let end = shape.start.saturating_add(shape.replicas.max(0));
    let mut steps = Vec::new();
    let replicas: Vec<Option<&MemberPod>> = (shape.start..end)
        .map(|ordinal| pods.iter().find(|p| p.ordinal == ordinal))
        .collect();
    let mut condemned: Vec<&MemberPod> = pods
        .iter()
        .filter(|p| p.ordinal < shape.start || p.ordinal >= end)
        .collect();
    condemned.sort_by_key(|p| std::cmp::Reverse(p.ordinal));

    for (index, slot) in replicas.iter().enumerate() {
        let ordinal = shape.start + i32::try_from(index).unwrap_or(i32::MAX);
        match slot {
            None => {
                steps.push(Step::Create {
                    ordinal,
                    revision: shape.revision_for(ordinal),
                });
                if ordered {
                    return steps;
                }
            }
            Some(pod) => match pod.state {
                PodState::Healthy => {}
                PodState::Finished => {
                    steps.push(Step::Delete(pod.name.clone()));
                    if ordered {
                        return steps;
                    }
                }
                PodState::Starting | PodState::Terminating => {
                    if ordered {
                        return steps;
                    }
                }
            },
        }
    }

    for pod in &condemned {
        if pod.state == PodState::Terminating {
            if ordered {
                return steps;
            }
            continue;
        }
        steps.push(Step::Delete(pod.name.clone()));
        if ordered {
            return steps;
        }
    }
    if !steps.is_empty() || !condemned.is_empty() {
        return steps;
    }

    let Some(partition) = shape.partition else {
        return steps;
    };
    let update_min = usize::try_from(partition.max(0)).unwrap_or(0);
    for index in (update_min..replicas.len()).rev() {
        let Some(pod) = replicas[index] else {
            return steps;
        };
        if pod.revision != shape.update_revision && pod.state != PodState::Terminating {
            steps.push(Step::Delete(pod.name.clone()));
            return steps;
        }
        if pod.state != PodState::Healthy {
            return steps;
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(replicas: i32, parallel: bool) -> SetShape {
        SetShape {
            replicas,
            start: 0,
            parallel,
            partition: Some(0),
            current_revision: "web-1".into(),
            update_revision: "web-1".into(),
        }
    }

    fn pod(ordinal: i32, revision: &str, state: PodState) -> MemberPod {
        MemberPod {
            name: format!("web-{ordinal}"),
            ordinal,
            revision: revision.into(),
            state,
        }
    }

    fn create(ordinal: i32, revision: &str) -> Step {
        Step::Create {
            ordinal,
            revision: revision.into(),
        }
    }

    fn delete(ordinal: i32) -> Step {
        Step::Delete(format!("web-{ordinal}"))
    }

    #[test]
    fn steps_follow_the_pod_management_policy() {
        use PodState::*;
        let rolled = SetShape {
            update_revision: "web-2".into(),
            ..shape(3, false)
        };
        let partitioned = SetShape {
            partition: Some(2),
            ..rolled.clone()
        };
        let cases: Vec<(&str, SetShape, Vec<MemberPod>, Vec<Step>)> = vec![
            (
                "ordered creates web-0 first",
                shape(3, false),
                vec![],
                vec![create(0, "web-1")],
            ),
            (
                "ordered waits for web-0 to be ready",
                shape(3, false),
                vec![pod(0, "web-1", Starting)],
                vec![],
            ),
            (
                "ordered creates the next once the previous is ready",
                shape(3, false),
                vec![pod(0, "web-1", Healthy)],
                vec![create(1, "web-1")],
            ),
            (
                "parallel creates every ordinal at once",
                shape(3, true),
                vec![],
                vec![create(0, "web-1"), create(1, "web-1"), create(2, "web-1")],
            ),
            (
                "ordered scale-down deletes the highest ordinal first",
                shape(1, false),
                vec![
                    pod(0, "web-1", Healthy),
                    pod(1, "web-1", Healthy),
                    pod(2, "web-1", Healthy),
                ],
                vec![delete(2)],
            ),
            (
                "ordered scale-down waits for the terminating pod",
                shape(1, false),
                vec![
                    pod(0, "web-1", Healthy),
                    pod(1, "web-1", Healthy),
                    pod(2, "web-1", Terminating),
                ],
                vec![],
            ),
            (
                "parallel scale-down deletes every condemned pod",
                shape(1, true),
                vec![
                    pod(0, "web-1", Healthy),
                    pod(1, "web-1", Healthy),
                    pod(2, "web-1", Healthy),
                ],
                vec![delete(2), delete(1)],
            ),
            (
                "a failed pod is replaced",
                shape(2, false),
                vec![pod(0, "web-1", Finished), pod(1, "web-1", Healthy)],
                vec![delete(0)],
            ),
            (
                "a rolling update deletes the highest outdated ordinal",
                rolled.clone(),
                vec![
                    pod(0, "web-1", Healthy),
                    pod(1, "web-1", Healthy),
                    pod(2, "web-1", Healthy),
                ],
                vec![delete(2)],
            ),
            (
                "a rolling update waits for the updated pod to be ready",
                rolled.clone(),
                vec![
                    pod(0, "web-1", Healthy),
                    pod(1, "web-1", Healthy),
                    pod(2, "web-2", Starting),
                ],
                vec![],
            ),
            (
                "a rolling update continues downwards",
                rolled.clone(),
                vec![
                    pod(0, "web-1", Healthy),
                    pod(1, "web-1", Healthy),
                    pod(2, "web-2", Healthy),
                ],
                vec![delete(1)],
            ),
            (
                "a partition stops the update at its ordinal",
                partitioned.clone(),
                vec![
                    pod(0, "web-1", Healthy),
                    pod(1, "web-1", Healthy),
                    pod(2, "web-2", Healthy),
                ],
                vec![],
            ),
            (
                "below the partition a recreated pod keeps the current revision",
                partitioned,
                vec![pod(1, "web-1", Healthy), pod(2, "web-2", Healthy)],
                vec![create(0, "web-1")],
            ),
            (
                "OnDelete never deletes outdated pods",
                SetShape {
                    partition: None,
                    replicas: 1,
                    ..rolled
                },
                vec![pod(0, "web-1", Healthy)],
                vec![],
            ),
        ];
        for (what, shape, pods, want) in cases {
            assert_eq!(plan_steps(&shape, &pods), want, "{what}");
        }
    }
}
