//! Strategic merge patch. Interim version: a JSON merge patch (RFC 7386);
//! the strategy-aware one lands next.

use serde_json::Value;

/// Applies a strategic merge patch to `original`, an object of `definition`.
pub fn strategic_merge_patch(
    _definition: &str,
    original: &Value,
    patch: &Value,
) -> Result<Value, crate::Error> {
    if !patch.is_object() {
        return Err(crate::Error::InvalidPatch(
            "strategic merge patch must be a JSON object".into(),
        ));
    }
    let mut result = original.clone();
    merge(&mut result, patch);
    Ok(result)
}

fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(target), Some(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(key);
                } else {
                    merge(target.entry(key.clone()).or_insert(Value::Null), value);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}
