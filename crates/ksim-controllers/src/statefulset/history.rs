//! Revision history of ControllerRevisions (`pkg/controller/history`): the
//! order revisions sort in, and which old revisions a StatefulSet's
//! `revisionHistoryLimit` deletes (`truncateHistory`).

use std::collections::HashSet;

use k8s_openapi::api::apps::v1::ControllerRevision;

/// Oldest first: by revision number, then creation time, then name
/// (`SortControllerRevisions`).
pub(crate) fn sort_revisions(revisions: &mut [ControllerRevision]) {
    revisions.sort_by(|a, b| {
        let created = |r: &ControllerRevision| r.metadata.creation_timestamp.as_ref().map(|t| t.0);
        a.revision
            .cmp(&b.revision)
            .then_with(|| created(a).cmp(&created(b)))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// The names of the revisions to delete so that no more than `limit`
/// revisions that no pod uses (and that are neither the current nor the
/// update revision, both in `live`) remain, oldest first.
pub(crate) fn revisions_to_truncate(
    revisions: &[ControllerRevision],
    live: &HashSet<&str>,
    limit: i32,
) -> Vec<String> {
    let mut history: Vec<ControllerRevision> = revisions
        .iter()
        .filter(|r| !live.contains(r.metadata.name.as_deref().unwrap_or("")))
        .cloned()
        .collect();
    let limit = usize::try_from(limit.max(0)).unwrap_or(0);
    if history.len() <= limit {
        return Vec::new();
    }
    sort_revisions(&mut history);
    let excess = history.len() - limit;
    history
        .into_iter()
        .take(excess)
        .filter_map(|r| r.metadata.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn revision(name: &str, number: i64) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            revision: number,
            data: None,
        }
    }

    #[test]
    fn the_oldest_unused_revisions_beyond_the_limit_are_truncated() {
        let revisions = vec![
            revision("r5", 5),
            revision("r1", 1),
            revision("r3", 3),
            revision("r2", 2),
            revision("r4", 4),
        ];
        // r5 is the update revision, r2 is still used by a pod.
        let live: HashSet<&str> = ["r5", "r2"].into_iter().collect();
        let cases = [
            (10, vec![]),
            (3, vec![]),
            (2, vec!["r1"]),
            (1, vec!["r1", "r3"]),
            (0, vec!["r1", "r3", "r4"]),
        ];
        for (limit, want) in cases {
            assert_eq!(
                revisions_to_truncate(&revisions, &live, limit),
                want,
                "limit {limit}"
            );
        }
    }
}
