//! Server-side apply. Interim version: the applied configuration is merged
//! into the live object with no field ownership; managedFields land next.

use serde_json::Value;

/// One server-side apply request.
pub struct ApplyRequest<'a> {
    pub definition: Option<&'a str>,
    pub live: Option<&'a Value>,
    pub applied: &'a Value,
    pub manager: &'a str,
    pub force: bool,
    pub api_version: &'a str,
    pub now: &'a str,
}

/// What an apply produced.
pub enum ApplyOutcome {
    Applied(Value),
    Conflicts(Vec<FieldConflict>),
}

/// A field owned by another manager with another value.
pub struct FieldConflict {
    pub manager: String,
    pub api_version: String,
    pub field: String,
}

/// Applies `request.applied` onto `request.live`.
pub fn server_side_apply(request: &ApplyRequest) -> Result<ApplyOutcome, crate::Error> {
    let Some(live) = request.live else {
        return Ok(ApplyOutcome::Applied(request.applied.clone()));
    };
    let merged = crate::patch::strategic_merge_patch(
        request.definition.unwrap_or_default(),
        live,
        request.applied,
    )?;
    Ok(ApplyOutcome::Applied(merged))
}

/// Records the fields a non-apply write changed. Interim: nothing.
pub fn track_update(
    _definition: Option<&str>,
    _old: Option<&Value>,
    _new: &mut Value,
    _manager: &str,
    _api_version: &str,
    _now: &str,
) {
}

/// kube-apiserver's 409 message for conflicts.
pub fn conflict_message(conflicts: &[FieldConflict]) -> String {
    let fields: Vec<String> = conflicts
        .iter()
        .map(|c| {
            format!(
                "conflict with \"{}\" using {}: {}",
                c.manager, c.api_version, c.field
            )
        })
        .collect();
    format!(
        "Apply failed with {} conflict{}: {}",
        conflicts.len(),
        if conflicts.len() == 1 { "" } else { "s" },
        fields.join("\n")
    )
}
