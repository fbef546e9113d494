//! A DaemonSet's ControllerRevisions as pure functions (upstream's
//! `constructHistory` and `cleanupHistory`): which revision records the
//! current template, the number the current one gets, and which old ones
//! `revisionHistoryLimit` deletes (oldest first, never one a pod still
//! runs).

use std::collections::HashSet;

use k8s_openapi::api::apps::v1::ControllerRevision;

use crate::statefulset::{REVISION_LABEL, sort_revisions};

/// The revisions split into those recording `data` (the current template)
/// and the old ones.
pub(crate) fn split_current(
    revisions: Vec<ControllerRevision>,
    data: &serde_json::Value,
) -> (Vec<ControllerRevision>, Vec<ControllerRevision>) {
    revisions
        .into_iter()
        .partition(|r| r.data.as_ref().is_some_and(|d| d.0 == *data))
}

/// The revision number the current revision should carry: one more than
/// any old one (`maxRevision(old) + 1`).
pub(crate) fn next_revision(old: &[ControllerRevision]) -> i64 {
    old.iter().map(|r| r.revision).max().unwrap_or(0) + 1
}

/// The names of old revisions to delete so that at most `limit` remain,
/// oldest first, skipping revisions whose hash a pod still carries.
pub(crate) fn revisions_to_clean(
    old: &[ControllerRevision],
    live_hashes: &HashSet<&str>,
    limit: i32,
) -> Vec<String> {
    let limit = usize::try_from(limit.max(0)).unwrap_or(0);
    let Some(mut to_kill) = old.len().checked_sub(limit).filter(|n| *n > 0) else {
        return Vec::new();
    };
    let mut sorted = old.to_vec();
    sort_revisions(&mut sorted);
    let mut names = Vec::new();
    for revision in sorted {
        if to_kill == 0 {
            break;
        }
        let hash = revision
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(REVISION_LABEL));
        if hash.is_some_and(|h| live_hashes.contains(h.as_str())) {
            continue;
        }
        names.extend(revision.metadata.name);
        to_kill -= 1;
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
    use serde_json::json;

    fn revision(hash: &str, number: i64, data: serde_json::Value) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(format!("agent-{hash}")),
                labels: Some([(REVISION_LABEL.to_string(), hash.to_string())].into()),
                ..ObjectMeta::default()
            },
            revision: number,
            data: Some(RawExtension(data)),
        }
    }

    #[test]
    fn the_current_revision_is_the_one_recording_the_template() {
        let revisions = vec![
            revision("a", 1, json!({"v": 1})),
            revision("b", 2, json!({"v": 2})),
            revision("c", 3, json!({"v": 3})),
        ];
        let (current, old) = split_current(revisions, &json!({"v": 2}));
        assert_eq!(current.len(), 1);
        assert_eq!(current[0].revision, 2);
        assert_eq!(next_revision(&old), 4, "rolled back: it becomes the newest");
        assert_eq!(next_revision(&[]), 1);
    }

    #[test]
    fn old_revisions_beyond_the_limit_go_oldest_first_unless_a_pod_runs_them() {
        let old = vec![
            revision("d", 4, json!(4)),
            revision("a", 1, json!(1)),
            revision("c", 3, json!(3)),
            revision("b", 2, json!(2)),
        ];
        let live: HashSet<&str> = ["a"].into_iter().collect();
        let cases = [
            (10, vec![]),
            (4, vec![]),
            (3, vec!["agent-b"]),
            (2, vec!["agent-b", "agent-c"]),
            (0, vec!["agent-b", "agent-c", "agent-d"]),
        ];
        for (limit, want) in cases {
            assert_eq!(
                revisions_to_clean(&old, &live, limit),
                want,
                "limit {limit}"
            );
        }
    }
}
