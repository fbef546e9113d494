//! ImageLocality: prefers nodes that already have the pod's container
//! images, weighted by image size and by how widely the image is spread
//! (to avoid piling pods onto the few nodes that have an image).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;

use crate::framework::{
    CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, PreScorePlugin, ScorePlugin, Snapshot, Status,
};

/// The plugin name.
pub const NAME: &str = "ImageLocality";
const MB: i64 = 1024 * 1024;
const MIN_THRESHOLD: i64 = 23 * MB;
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;
const PRE_SCORE_KEY: &str = "PreScoreImageLocality";

/// Scores nodes by the images they have.
#[derive(Debug, Clone, Copy, Default)]
pub struct ImageLocality;

#[derive(Clone)]
struct PreScoreState {
    /// Normalized image name of each container (init containers first),
    /// with the fraction of nodes that have it.
    images: Vec<(String, f64)>,
    containers: i64,
}

/// Adds `:latest` to an image without a tag.
pub fn normalized_image_name(name: &str) -> String {
    let colon = name.rfind(':');
    let slash = name.rfind('/');
    if colon.is_none() || colon <= slash {
        format!("{name}:latest")
    } else {
        name.to_string()
    }
}

fn calculate_priority(sum_scores: i64, containers: i64) -> i64 {
    let max_threshold = MAX_CONTAINER_THRESHOLD.saturating_mul(containers.max(1));
    let sum = sum_scores.clamp(MIN_THRESHOLD, max_threshold.max(MIN_THRESHOLD));
    if max_threshold <= MIN_THRESHOLD {
        return 0;
    }
    MAX_NODE_SCORE * (sum - MIN_THRESHOLD) / (max_threshold - MIN_THRESHOLD)
}

impl Plugin for ImageLocality {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl PreScorePlugin for ImageLocality {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _nodes: &[&NodeInfo],
        snapshot: &Snapshot,
    ) -> Status {
        let total = snapshot.len().max(1) as f64;
        let Some(spec) = pod.spec.as_ref() else {
            return Status::skip();
        };
        let containers = spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers);
        let mut spread: HashMap<String, f64> = HashMap::new();
        let mut images = Vec::new();
        let mut count = 0i64;
        for container in containers {
            count += 1;
            let Some(image) = container.image.as_deref() else {
                continue;
            };
            let name = normalized_image_name(image);
            let fraction = *spread
                .entry(name.clone())
                .or_insert_with(|| snapshot.nodes_with_image(&name) as f64 / total);
            images.push((name, fraction));
        }
        state.write(
            PRE_SCORE_KEY,
            PreScoreState {
                images,
                containers: count,
            },
        );
        Status::success()
    }
}

impl ScorePlugin for ImageLocality {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let pre = state.read::<PreScoreState>(PRE_SCORE_KEY).ok_or_else(|| {
            Status::error(format!(
                "reading {PRE_SCORE_KEY:?} from cycleState: not found"
            ))
        })?;
        let sum: i64 = pre
            .images
            .iter()
            .filter_map(|(name, spread)| {
                node.image_sizes
                    .get(name)
                    .map(|size| (*size as f64 * spread) as i64)
            })
            .fold(0i64, i64::saturating_add);
        Ok(calculate_priority(sum, pre.containers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod, score_all};

    #[test]
    fn image_names_get_latest_tag() {
        let cases = [
            ("nginx", "nginx:latest"),
            ("nginx:1.25", "nginx:1.25"),
            ("registry:5000/app", "registry:5000/app:latest"),
            ("registry:5000/app:v1", "registry:5000/app:v1"),
        ];
        for (input, expected) in cases {
            assert_eq!(normalized_image_name(input), expected);
        }
    }

    #[test]
    fn score_grows_with_present_image_size_and_spread() {
        // 40 and 300 MB images; 250 MB on one node only.
        let snapshot = Snapshot::new(
            [
                node("n1")
                    .image(&["gcr.io/40:latest"], 40 * MB)
                    .image(&["gcr.io/300:latest"], 300 * MB)
                    .obj(),
                node("n2")
                    .image(&["gcr.io/40:latest"], 40 * MB)
                    .image(&["gcr.io/250:latest"], 250 * MB)
                    .obj(),
                node("n3").obj(),
            ],
            [],
        );
        let mut p = pod("p")
            .container_image("gcr.io/40")
            .container_image("gcr.io/300")
            .obj();
        // The builder's first container has no image; drop it.
        if let Some(spec) = p.spec.as_mut() {
            spec.containers.remove(0);
        }
        // n1: 40MB*(2/3) + 300MB*(1/3) = 126.67MB -> 100*(126.67-23)/(2000-23)
        let expected_n1 = calculate_priority((40 * MB) * 2 / 3 + (300 * MB) / 3, 2);
        let expected_n2 = calculate_priority((40 * MB) * 2 / 3, 2);
        assert_eq!(
            score_all(&ImageLocality, &p, &snapshot),
            Some(vec![expected_n1, expected_n2, 0])
        );
        assert_eq!(expected_n1, 5);
        assert_eq!(expected_n2, 0);
        assert_eq!(calculate_priority(2000 * MB, 2), 100);
    }
}
