//! The stage sets ksim ships, as YAML files of our own under `stages/`: the default set
//! installed in every cluster and the optional `general` and `chaos` sets users apply.

use crate::error::KubeletError;
use crate::stage::Stage;

/// A shipped set of stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageSet {
    /// Installed at cluster creation: node-initialize, node-heartbeat-with-lease,
    /// pod-ready, pod-complete, pod-delete (KWOK's "fast" behaviour).
    Default,
    /// Pod phases with delays of a few seconds each (KWOK's "general" set).
    General,
    /// Failure injection by label: node-not-ready, container failures (KWOK's "chaos" set).
    Chaos,
}

const DEFAULT: &[(&str, &str)] = &[
    (
        "node-initialize.yaml",
        include_str!("../../stages/default/node-initialize.yaml"),
    ),
    (
        "node-heartbeat-with-lease.yaml",
        include_str!("../../stages/default/node-heartbeat-with-lease.yaml"),
    ),
    (
        "pod-ready.yaml",
        include_str!("../../stages/default/pod-ready.yaml"),
    ),
    (
        "pod-complete.yaml",
        include_str!("../../stages/default/pod-complete.yaml"),
    ),
    (
        "pod-delete.yaml",
        include_str!("../../stages/default/pod-delete.yaml"),
    ),
];

const GENERAL: &[(&str, &str)] = &[
    (
        "pod-create.yaml",
        include_str!("../../stages/general/pod-create.yaml"),
    ),
    (
        "pod-init-container-running.yaml",
        include_str!("../../stages/general/pod-init-container-running.yaml"),
    ),
    (
        "pod-init-container-completed.yaml",
        include_str!("../../stages/general/pod-init-container-completed.yaml"),
    ),
    (
        "pod-ready.yaml",
        include_str!("../../stages/general/pod-ready.yaml"),
    ),
    (
        "pod-complete.yaml",
        include_str!("../../stages/general/pod-complete.yaml"),
    ),
    (
        "pod-delete.yaml",
        include_str!("../../stages/general/pod-delete.yaml"),
    ),
];

const CHAOS: &[(&str, &str)] = &[
    (
        "node-not-ready.yaml",
        include_str!("../../stages/chaos/node-not-ready.yaml"),
    ),
    (
        "pod-container-running-failed.yaml",
        include_str!("../../stages/chaos/pod-container-running-failed.yaml"),
    ),
    (
        "pod-init-container-running-failed.yaml",
        include_str!("../../stages/chaos/pod-init-container-running-failed.yaml"),
    ),
];

impl StageSet {
    /// Every set.
    pub const ALL: [StageSet; 3] = [StageSet::Default, StageSet::General, StageSet::Chaos];

    /// The set's name as users write it.
    pub fn name(self) -> &'static str {
        match self {
            StageSet::Default => "default",
            StageSet::General => "general",
            StageSet::Chaos => "chaos",
        }
    }

    /// The set's files: (file name, YAML text), ready to write out or apply.
    pub fn files(self) -> &'static [(&'static str, &'static str)] {
        match self {
            StageSet::Default => DEFAULT,
            StageSet::General => GENERAL,
            StageSet::Chaos => CHAOS,
        }
    }

    /// The set's stages, decoded.
    pub fn stages(self) -> Result<Vec<Stage>, KubeletError> {
        self.files()
            .iter()
            .map(|(_, text)| parse_stage(text))
            .collect()
    }
}

/// The stages installed in every cluster.
pub fn default_stages() -> Result<Vec<Stage>, KubeletError> {
    StageSet::Default.stages()
}

/// Decodes one Stage from YAML.
pub fn parse_stage(text: &str) -> Result<Stage, KubeletError> {
    serde_saphyr::from_str(text).map_err(|e| KubeletError::StageYaml(e.to_string()))
}

/// Decodes every Stage of a multi-document YAML stream.
pub fn parse_stages(text: &str) -> Result<Vec<Stage>, KubeletError> {
    serde_saphyr::from_multiple(text).map_err(|e| KubeletError::StageYaml(e.to_string()))
}

#[cfg(test)]
mod golden;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::{CompiledStage, STAGE_API_VERSION, STAGE_KIND};

    #[test]
    fn every_shipped_stage_decodes_and_compiles() {
        for set in StageSet::ALL {
            for (file, text) in set.files() {
                let stage =
                    parse_stage(text).unwrap_or_else(|e| panic!("{}/{file}: {e}", set.name()));
                assert_eq!(stage.api_version.as_deref(), Some(STAGE_API_VERSION));
                assert_eq!(stage.kind.as_deref(), Some(STAGE_KIND));
                assert_eq!(format!("{}.yaml", stage.metadata.name), *file);
                assert!(stage.spec.selector.is_some(), "{file}");
                CompiledStage::new(stage).unwrap_or_else(|e| panic!("{file}: {e}"));
            }
        }
    }

    #[test]
    fn the_default_pod_stages_read_a_few_fields_of_a_pod() {
        let mut fields = crate::stage::ReadFields::none();
        for stage in StageSet::Default.stages().expect("decodes") {
            if stage.spec.resource_ref.kind == "Pod" {
                CompiledStage::new(stage)
                    .expect("compiles")
                    .read_fields(&mut fields);
            }
        }
        let mut want = crate::stage::ReadFields::none();
        for path in [
            ["metadata", "deletionTimestamp"],
            ["metadata", "ownerReferences"],
            ["status", "phase"],
            ["status", "conditions"],
        ] {
            want.add(&path);
        }
        assert_eq!(fields, want);
    }

    #[test]
    fn every_status_template_parses() {
        let renderer = crate::template::Renderer::new();
        for set in StageSet::ALL {
            for stage in set.stages().expect("decodes") {
                if let Some(next) = &stage.spec.next
                    && !next.status_template.is_empty()
                {
                    renderer
                        .template(&next.status_template)
                        .unwrap_or_else(|e| panic!("{}: {e}", stage.metadata.name));
                }
            }
        }
    }

    #[test]
    fn multi_document_streams_decode() {
        let text = StageSet::Chaos
            .files()
            .iter()
            .map(|(_, t)| *t)
            .collect::<Vec<_>>()
            .join("\n---\n");
        let stages = parse_stages(&text).expect("decodes");
        assert_eq!(stages.len(), 3);
        assert!(parse_stage("spec: [").is_err());
    }
}
