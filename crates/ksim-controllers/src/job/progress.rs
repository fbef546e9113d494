//! Where a Job stands, as pure functions: how many pods should be active,
//! whether the completions are met, and the `completedIndexes` notation
//! (written and read).

use std::collections::BTreeSet;

/// How many pods a running Job wants active (`manageJob`): `parallelism`,
/// but no more than the completions left; a work queue (no `completions`)
/// starts nothing once one pod succeeded and lets the active ones finish.
pub fn want_active(parallelism: i32, completions: Option<i32>, succeeded: i32, active: i32) -> i32 {
    let parallelism = parallelism.max(0);
    match completions {
        Some(completions) => (completions - succeeded).min(parallelism).max(0),
        None if succeeded > 0 => active,
        None => parallelism,
    }
}

/// Whether the Job has met its completions with no pod left active.
pub fn is_complete(completions: Option<i32>, succeeded: i32, active: i32) -> bool {
    active == 0
        && match completions {
            Some(completions) => succeeded >= completions,
            None => succeeded > 0,
        }
}

/// The indexes below `completions` that `1,3-5,7` names; an invalid list
/// names none (`parseIndexesFromString`).
pub fn parse_indexes(list: &str, completions: i32) -> BTreeSet<i32> {
    let mut indexes = BTreeSet::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<i32>(), b.parse::<i32>()),
            None => (part.parse::<i32>(), part.parse::<i32>()),
        };
        let (Ok(first), Ok(last)) = (first, last) else {
            return BTreeSet::new();
        };
        if first < 0 || last < first {
            return BTreeSet::new();
        }
        indexes.extend((first..=last.min(completions.saturating_sub(1))).take(1_000_000));
    }
    indexes
}

/// The `completedIndexes` form of sorted indexes: `1,3-5,7`.
pub fn format_indexes(indexes: &[i32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut iter = indexes.iter().copied().peekable();
    while let Some(first) = iter.next() {
        let mut last = first;
        while iter.peek() == Some(&(last + 1)) {
            last += 1;
            iter.next();
        }
        parts.push(if first == last {
            first.to_string()
        } else {
            format!("{first}-{last}")
        });
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_pods_follow_completions_and_parallelism() {
        let cases = [
            ("a new job runs parallelism pods", 2, Some(3), 0, 0, 2),
            ("the last completion needs one pod", 2, Some(3), 2, 1, 1),
            ("completions reached", 2, Some(3), 3, 0, 0),
            ("a work queue runs parallelism pods", 2, None, 0, 0, 2),
            (
                "a work queue starts nothing after a success",
                2,
                None,
                1,
                1,
                1,
            ),
        ];
        for (what, parallelism, completions, succeeded, active, want) in cases {
            assert_eq!(
                want_active(parallelism, completions, succeeded, active),
                want,
                "{what}"
            );
        }
        assert!(is_complete(Some(3), 3, 0));
        assert!(!is_complete(Some(3), 3, 1));
        assert!(is_complete(None, 1, 0));
        assert!(!is_complete(None, 0, 0));
    }

    #[test]
    fn index_lists_parse_below_completions() {
        let parsed = |s: &str| parse_indexes(s, 6).into_iter().collect::<Vec<_>>();
        assert_eq!(parsed("1,3-5,7"), [1, 3, 4, 5]);
        assert_eq!(parsed(""), Vec::<i32>::new());
        assert_eq!(parsed("x"), Vec::<i32>::new());
        assert_eq!(parsed("4-2"), Vec::<i32>::new());
    }

    #[test]
    fn completed_indexes_are_written_as_ranges() {
        assert_eq!(format_indexes(&[]), "");
        assert_eq!(format_indexes(&[0]), "0");
        assert_eq!(format_indexes(&[0, 1, 2]), "0-2");
        assert_eq!(format_indexes(&[1, 3, 4, 5, 7]), "1,3-5,7");
    }
}
