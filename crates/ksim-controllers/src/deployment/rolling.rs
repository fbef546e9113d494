//! The arithmetic of a Deployment rollout, as pure functions over replica
//! counts: maxSurge/maxUnavailable fenceposts, how far the new ReplicaSet
//! may grow, how far the old ones may shrink, and proportional scaling when
//! the Deployment is resized mid-rollout.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::Error;
use crate::common::scaled_value;

/// One ReplicaSet as the rollout arithmetic sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplicaCounts {
    /// `spec.replicas`.
    pub replicas: i32,
    /// `status.availableReplicas`.
    pub available: i32,
}

/// `deploymentutil.ResolveFenceposts`: maxSurge rounded up, maxUnavailable
/// rounded down, and never both zero (maxUnavailable becomes 1).
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> Result<(i32, i32), Error> {
    let zero = IntOrString::Int(0);
    let surge = scaled_value(max_surge.unwrap_or(&zero), desired, true)?;
    let unavailable = scaled_value(max_unavailable.unwrap_or(&zero), desired, false)?;
    if surge == 0 && unavailable == 0 {
        return Ok((0, 1));
    }
    Ok((surge, unavailable))
}

/// The size the new ReplicaSet may have now in a rolling update: up to
/// `desired + max_surge` pods in all, never above `desired`.
pub fn new_replica_set_replicas(
    desired: i32,
    max_surge: i32,
    all_replicas: i32,
    new_replicas: i32,
) -> i32 {
    let max_total = desired.saturating_add(max_surge);
    if all_replicas >= max_total {
        return new_replicas;
    }
    let scale_up = max_total - all_replicas;
    new_replicas + scale_up.min(desired - new_replicas).max(0)
}

/// The sizes of the old ReplicaSets (oldest first) after one rolling step
/// (`reconcileOldReplicaSets`): first shed their unavailable pods, then
/// available ones while `desired - max_unavailable` stay available.
///
/// A ReplicaSet whose status reports more available pods than its
/// `spec.replicas` (its status has not caught up with a scale-down yet)
/// ends the step where it is met, as upstream's `cleanupUnhealthyReplicas`
/// refuses it: the ReplicaSets before it keep what they shed, none is
/// scaled any further, and the next sync (after its status is written)
/// goes on. Counting such a status would shed pods the rollout may not
/// spare (and "shedding" a negative count would grow the ReplicaSet).
pub fn scale_down_old(
    desired: i32,
    max_unavailable: i32,
    new: ReplicaCounts,
    old: &[ReplicaCounts],
) -> Vec<i32> {
    // In i64: no count the API accepts can overflow.
    let mut sizes: Vec<i64> = old.iter().map(|rs| i64::from(rs.replicas)).collect();
    let old_pods: i64 = sizes.iter().sum();
    if old_pods == 0 {
        return old.iter().map(|rs| rs.replicas).collect();
    }
    let all_pods = old_pods + i64::from(new.replicas);
    let min_available = i64::from(desired) - i64::from(max_unavailable);
    let new_unavailable = i64::from(new.replicas) - i64::from(new.available);
    let max_scaled_down = all_pods - min_available - new_unavailable;
    if max_scaled_down > 0 {
        let mut cleaned = 0;
        for (size, rs) in sizes.iter_mut().zip(old) {
            let available = i64::from(rs.available);
            if cleaned >= max_scaled_down {
                break;
            }
            if *size == 0 || *size == available {
                continue;
            }
            if *size < available {
                return sizes
                    .into_iter()
                    .map(|s| i32::try_from(s.max(0)).unwrap_or(i32::MAX))
                    .collect();
            }
            let down = (max_scaled_down - cleaned).min(*size - available);
            *size -= down;
            cleaned += down;
        }
        let available: i64 =
            old.iter().map(|rs| i64::from(rs.available)).sum::<i64>() + i64::from(new.available);
        if available > min_available {
            let total_down = available - min_available;
            let mut scaled = 0;
            for size in sizes.iter_mut() {
                if scaled >= total_down {
                    break;
                }
                if *size == 0 {
                    continue;
                }
                let down = (*size).min(total_down - scaled);
                *size -= down;
                scaled += down;
            }
        }
    }
    sizes
        .into_iter()
        .map(|s| i32::try_from(s.max(0)).unwrap_or(i32::MAX))
        .collect()
}

/// One active ReplicaSet in a proportional resize.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScalingReplicaSet {
    /// `spec.replicas`.
    pub replicas: i32,
    /// Its `deployment.kubernetes.io/max-replicas` annotation, if valid.
    pub max_replicas: Option<i32>,
}

/// `DeploymentController.scale` for several active ReplicaSets: spreads the
/// difference between `desired + max_surge` and the current total over them
/// in proportion to their size. `replica_sets` must be sorted as upstream
/// sorts them: by size, newer first when growing, older first when shrinking.
/// `status_replicas` is the Deployment's `status.replicas` (used when an
/// annotation is missing). Returns the new sizes, in the same order.
pub fn proportional_sizes(
    desired: i32,
    max_surge: i32,
    status_replicas: i32,
    replica_sets: &[ScalingReplicaSet],
) -> Vec<i32> {
    let total: i32 = replica_sets
        .iter()
        .map(|rs| rs.replicas)
        .fold(0, i32::saturating_add);
    let allowed = if desired > 0 {
        desired.saturating_add(max_surge)
    } else {
        0
    };
    let to_add = allowed - total;
    let mut sizes: Vec<i32> = replica_sets.iter().map(|rs| rs.replicas).collect();
    if to_add == 0 || sizes.is_empty() {
        return sizes;
    }
    let mut added = 0;
    for (size, rs) in sizes.iter_mut().zip(replica_sets) {
        if rs.replicas == 0 || to_add == added {
            continue;
        }
        let fraction = if desired == 0 {
            -rs.replicas
        } else {
            let deployment_replicas = desired.saturating_add(max_surge);
            let annotated = rs.max_replicas.unwrap_or(status_replicas);
            if annotated == 0 {
                0
            } else {
                let scaled =
                    f64::from(rs.replicas) * f64::from(deployment_replicas) / f64::from(annotated);
                round_to_i32(scaled) - rs.replicas
            }
        };
        let allowed_left = to_add - added;
        let proportion = if to_add > 0 {
            fraction.min(allowed_left)
        } else {
            fraction.max(allowed_left)
        };
        *size = size.saturating_add(proportion);
        added = added.saturating_add(proportion);
    }
    let leftover = to_add - added;
    if leftover != 0
        && let Some(first) = sizes.first_mut()
    {
        *first = (*first + leftover).max(0);
    }
    sizes
}

/// `integer.RoundToInt32`: to nearest, halves away from zero.
fn round_to_i32(value: f64) -> i32 {
    let rounded = value.round();
    if rounded >= f64::from(i32::MAX) {
        i32::MAX
    } else if rounded <= f64::from(i32::MIN) {
        i32::MIN
    } else {
        // In range and integral: the conversion is exact.
        rounded as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn percent(s: &str) -> IntOrString {
        IntOrString::String(s.into())
    }

    #[test]
    fn fenceposts_round_surge_up_and_unavailable_down() {
        let cases = [
            (Some(percent("25%")), Some(percent("25%")), 10, (3, 2)),
            (Some(percent("25%")), Some(percent("25%")), 3, (1, 0)),
            (
                Some(IntOrString::Int(0)),
                Some(IntOrString::Int(0)),
                5,
                (0, 1),
            ),
            (Some(IntOrString::Int(2)), Some(percent("50%")), 5, (2, 2)),
            (None, None, 4, (0, 1)),
        ];
        for (surge, unavailable, desired, want) in cases {
            assert_eq!(
                resolve_fenceposts(surge.as_ref(), unavailable.as_ref(), desired).expect("valid"),
                want,
                "{surge:?} {unavailable:?} of {desired}"
            );
        }
        assert!(resolve_fenceposts(Some(&percent("x")), None, 1).is_err());
    }

    #[test]
    fn the_new_replica_set_grows_within_the_surge() {
        assert_eq!(new_replica_set_replicas(3, 1, 3, 0), 1);
        assert_eq!(new_replica_set_replicas(3, 1, 4, 1), 1);
        assert_eq!(new_replica_set_replicas(10, 3, 10, 0), 3);
        assert_eq!(new_replica_set_replicas(3, 5, 3, 0), 3);
        assert_eq!(new_replica_set_replicas(3, 1, 2, 2), 3);
    }

    #[test]
    fn old_replica_sets_shrink_only_while_enough_pods_stay_available() {
        let rs = |replicas, available| ReplicaCounts {
            replicas,
            available,
        };
        // 3 desired, maxUnavailable 1; new RS has 1 unavailable pod: one old pod may go.
        assert_eq!(scale_down_old(3, 1, rs(1, 0), &[rs(3, 3)]), vec![2]);
        // new RS pods not yet available and nothing spare: no scale down.
        assert_eq!(scale_down_old(3, 0, rs(1, 0), &[rs(3, 3)]), vec![3]);
        // unavailable old pods go first, then available ones, oldest RS first.
        assert_eq!(
            scale_down_old(4, 0, rs(2, 2), &[rs(2, 1), rs(2, 2)]),
            vec![0, 2]
        );
        assert_eq!(
            scale_down_old(5, 0, rs(2, 2), &[rs(2, 1), rs(2, 2)]),
            vec![1, 2]
        );
        // new RS fully available: all old pods go.
        assert_eq!(scale_down_old(3, 1, rs(3, 3), &[rs(2, 2)]), vec![0]);
        assert_eq!(scale_down_old(3, 1, rs(3, 3), &[rs(0, 0)]), vec![0]);
    }

    #[test]
    fn an_old_replica_set_whose_status_lags_its_scale_down_ends_the_step() {
        let rs = |replicas, available| ReplicaCounts {
            replicas,
            available,
        };
        // 4 desired, maxUnavailable 1: the old set was scaled 4 -> 3 but
        // still reports 4 available; upstream leaves it alone this sync
        // (4 + 1 available would otherwise count a pod that is going).
        assert_eq!(scale_down_old(4, 1, rs(2, 1), &[rs(3, 4)]), vec![3]);
        // It never grows: the lagging set comes first, an unhealthy one after.
        assert_eq!(
            scale_down_old(4, 1, rs(1, 1), &[rs(1, 2), rs(3, 0)]),
            vec![1, 3]
        );
        // Sets before it keep what they shed.
        assert_eq!(
            scale_down_old(4, 1, rs(1, 1), &[rs(3, 2), rs(1, 2)]),
            vec![2, 1]
        );
        // Once its status has caught up, the step goes on.
        assert_eq!(scale_down_old(4, 1, rs(2, 1), &[rs(3, 3)]), vec![2]);
    }

    #[test]
    fn extreme_counts_saturate_instead_of_overflowing() {
        let max = i32::MAX;
        let rs = |replicas, available| ReplicaCounts {
            replicas,
            available,
        };
        assert_eq!(new_replica_set_replicas(max, max, 0, 0), max);
        let sizes = scale_down_old(max, max, rs(max, max), &[rs(max, 0), rs(max, max)]);
        assert_eq!(sizes, vec![0, 0]);
        let big = ScalingReplicaSet {
            replicas: max,
            max_replicas: Some(1),
        };
        assert_eq!(proportional_sizes(max, max, 1, &[big, big]).len(), 2);
        assert_eq!(
            crate::common::scaled_value(&IntOrString::String("9999999999%".into()), max, true)
                .expect("valid"),
            max
        );
    }

    #[test]
    fn resizing_mid_rollout_spreads_replicas_proportionally() {
        let rs = |replicas, max| ScalingReplicaSet {
            replicas,
            max_replicas: Some(max),
        };
        // 10 -> 20 with maxSurge 3 (13 -> 23 allowed): sizes 8 and 5 double-ish.
        let sizes = proportional_sizes(20, 3, 13, &[rs(8, 13), rs(5, 13)]);
        assert_eq!(sizes.iter().sum::<i32>(), 23);
        assert_eq!(sizes, vec![14, 9]);
        // scale to zero removes everything.
        assert_eq!(
            proportional_sizes(0, 0, 13, &[rs(8, 13), rs(5, 13)]),
            vec![0, 0]
        );
    }
}
