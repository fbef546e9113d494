//! The CustomResourceDefinitions ksim itself defines and every ksim cluster
//! serves from start: today the DistributedPodDisruptionBudget
//! (`distributedpoddisruptionbudgets.policy.ksim.io`, the budget of the
//! `dpdb` controller). The API server creates them at boot; the controller
//! prints or installs the same manifest for real clusters.

/// The `distributedpoddisruptionbudgets.policy.ksim.io` CRD manifest (JSON).
pub const DISTRIBUTED_POD_DISRUPTION_BUDGET_CRD: &str =
    include_str!("distributedpoddisruptionbudgets.json");

/// Every CRD ksim serves from start, parsed.
pub fn builtin_crds() -> Vec<serde_json::Value> {
    [DISTRIBUTED_POD_DISRUPTION_BUDGET_CRD]
        .iter()
        .map(|text| serde_json::from_str(text).expect("the built-in CRD manifests are valid JSON"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_crds_parse_and_name_themselves() {
        let crds = builtin_crds();
        assert_eq!(crds.len(), 1);
        assert_eq!(
            crds[0]["metadata"]["name"],
            "distributedpoddisruptionbudgets.policy.ksim.io"
        );
        assert_eq!(crds[0]["spec"]["names"]["shortNames"][0], "dpdb");
    }
}
