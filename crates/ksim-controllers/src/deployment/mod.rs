//! The Deployment controller: ReplicaSets named
//! `<deployment>-<pod-template-hash>`, RollingUpdate (maxSurge and
//! maxUnavailable, counts or percentages) and Recreate rollouts, proportional
//! resizing, pause, revision annotations and revisionHistoryLimit cleanup,
//! status counts and the Available and Progressing conditions, so that
//! `kubectl rollout status|history|restart` and `kubectl scale` work.

mod controller;
mod hash;
mod rolling;
mod status;

pub use controller::{
    DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, REVISION_ANNOTATION, run,
};
pub use hash::{POD_TEMPLATE_HASH_LABEL, compute_hash, safe_encode_string};
pub use rolling::{
    ReplicaCounts, ScalingReplicaSet, new_replica_set_replicas, proportional_sizes,
    resolve_fenceposts, scale_down_old,
};
pub(crate) use status::nonzero;
pub use status::{calculate_status, is_complete, rollout_status};
