//! Where a Job stands, as pure functions: from its spec and the counts of
//! its pods, whether it has met its success criteria or failed, and how
//! many pods should be running; and the `completedIndexes` notation.

/// The Job's spec numbers and its pods, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// `spec.parallelism` (default 1).
    pub parallelism: i32,
    /// `spec.completions` (`None`: a work queue).
    pub completions: Option<i32>,
    /// `spec.backoffLimit` (default 6).
    pub backoff_limit: i32,
    /// `spec.suspend`.
    pub suspended: bool,
    /// Pods running or pending (not finished, not being deleted).
    pub active: i32,
    /// Pods (or, Indexed, distinct indexes) that succeeded.
    pub succeeded: i32,
    /// Pods that failed.
    pub failed: i32,
}

/// What the Job should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Keep this many pods active.
    Run(i32),
    /// The success criteria are met (`CompletionsReached`).
    Succeeded,
    /// Too many pods failed (`BackoffLimitExceeded`).
    BackoffLimitExceeded,
}

/// The verdict for a Job with these counts (`syncJob`'s decisions).
pub fn judge(counts: &Counts) -> Verdict {
    if counts.failed > counts.backoff_limit {
        return Verdict::BackoffLimitExceeded;
    }
    let parallelism = counts.parallelism.max(0);
    match counts.completions {
        Some(completions) => {
            if counts.succeeded >= completions {
                return Verdict::Succeeded;
            }
            if counts.suspended {
                return Verdict::Run(0);
            }
            Verdict::Run(parallelism.min(completions - counts.succeeded))
        }
        None => {
            if counts.succeeded > 0 && counts.active == 0 {
                return Verdict::Succeeded;
            }
            if counts.suspended || counts.succeeded > 0 {
                // Once one pod succeeded no new ones start; the rest finish.
                return Verdict::Run(if counts.suspended { 0 } else { counts.active });
            }
            Verdict::Run(parallelism)
        }
    }
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

    fn counts(completions: Option<i32>, active: i32, succeeded: i32, failed: i32) -> Counts {
        Counts {
            parallelism: 2,
            completions,
            backoff_limit: 1,
            suspended: false,
            active,
            succeeded,
            failed,
        }
    }

    #[test]
    fn verdicts_follow_completions_parallelism_and_backoff() {
        let cases = [
            (
                "a new job runs parallelism pods",
                counts(Some(3), 0, 0, 0),
                Verdict::Run(2),
            ),
            (
                "the last completion needs one pod",
                counts(Some(3), 1, 2, 0),
                Verdict::Run(1),
            ),
            (
                "completions reached",
                counts(Some(3), 0, 3, 0),
                Verdict::Succeeded,
            ),
            (
                "one failure is within the limit",
                counts(Some(3), 2, 0, 1),
                Verdict::Run(2),
            ),
            (
                "two failures exceed a limit of 1",
                counts(Some(3), 2, 0, 2),
                Verdict::BackoffLimitExceeded,
            ),
            (
                "a work queue runs parallelism pods",
                counts(None, 0, 0, 0),
                Verdict::Run(2),
            ),
            (
                "a work queue starts nothing after a success",
                counts(None, 1, 1, 0),
                Verdict::Run(1),
            ),
            (
                "a work queue is done when all finished",
                counts(None, 0, 1, 0),
                Verdict::Succeeded,
            ),
            (
                "a suspended job runs nothing",
                Counts {
                    suspended: true,
                    ..counts(Some(3), 2, 0, 0)
                },
                Verdict::Run(0),
            ),
        ];
        for (what, counts, want) in cases {
            assert_eq!(judge(&counts), want, "{what}");
        }
    }

    #[test]
    fn completed_indexes_are_written_as_ranges() {
        assert_eq!(format_indexes(&[]), "");
        assert_eq!(format_indexes(&[0]), "0");
        assert_eq!(format_indexes(&[0, 1, 2]), "0-2");
        assert_eq!(format_indexes(&[1, 3, 4, 5, 7]), "1,3-5,7");
    }
}
