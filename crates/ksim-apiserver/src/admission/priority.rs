//! The Priority admission plugin: a new pod's `spec.priority` and
//! `spec.preemptionPolicy` come from the PriorityClass it names (or the
//! `globalDefault` class, or priority 0), an unknown class is refused with
//! 403, an update keeps the priority the pod was created with; and only one
//! PriorityClass may be the global default.
//!
//! The classes are read through [`PriorityClasses`], which the server backs
//! with its store; everything here is pure over JSON.

use serde_json::{Value, json};

use crate::ApiError;

/// The value of a pod's priority when no class is named and none is the
/// global default (`scheduling.DefaultPriorityWhenNoDefaultClassExists`).
const DEFAULT_PRIORITY: i64 = 0;

/// Where the plugin reads PriorityClasses.
pub trait PriorityClasses {
    /// The class named `name`.
    fn get(&self, name: &str) -> Option<Value>;
    /// The classes with `globalDefault: true`.
    fn global_defaults(&self) -> Vec<Value>;
}

/// The global default class: the lowest-valued one if a race left several.
fn default_class(classes: &dyn PriorityClasses) -> Option<Value> {
    classes
        .global_defaults()
        .into_iter()
        .min_by_key(|class| class["value"].as_i64().unwrap_or(0))
}

/// The name admission errors give an object: its name, else its
/// generateName (names are generated after admission), else `Unknown`.
pub(crate) fn admission_name(object: &Value) -> &str {
    let metadata = &object["metadata"];
    [&metadata["name"], &metadata["generateName"]]
        .into_iter()
        .filter_map(Value::as_str)
        .find(|name| !name.is_empty())
        .unwrap_or("Unknown")
}

/// Admission of a new pod (`admitPod` on create): resolves its priority
/// class, refusing an unknown class and a priority or preemption policy
/// the pod sets that differs from the class's.
pub fn admit_new_pod(pod: &mut Value, classes: &dyn PriorityClasses) -> Result<(), ApiError> {
    let forbidden = |pod: &Value, why: String| {
        ApiError::forbidden(format!(
            "pods \"{}\" is forbidden: {why}",
            admission_name(pod)
        ))
    };
    let named = pod["spec"]["priorityClassName"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (class_name, priority, policy) = if named.is_empty() {
        match default_class(classes) {
            Some(class) => (
                class["metadata"]["name"].as_str().map(str::to_string),
                class["value"].as_i64().unwrap_or(0),
                class["preemptionPolicy"].as_str().map(str::to_string),
            ),
            None => (
                None,
                DEFAULT_PRIORITY,
                Some("PreemptLowerPriority".to_string()),
            ),
        }
    } else {
        match classes.get(&named) {
            Some(class) => (
                None,
                class["value"].as_i64().unwrap_or(0),
                class["preemptionPolicy"].as_str().map(str::to_string),
            ),
            None => {
                return Err(forbidden(
                    pod,
                    format!("no PriorityClass with name {named} was found"),
                ));
            }
        }
    };
    if let Some(sent) = pod["spec"]["priority"].as_i64()
        && sent != priority
    {
        return Err(forbidden(
            pod,
            format!(
                "the integer value of priority ({sent}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
            ),
        ));
    }
    if let Some(policy) = &policy
        && let Some(sent) = pod["spec"]["preemptionPolicy"].as_str()
        && sent != policy
    {
        return Err(forbidden(
            pod,
            format!(
                "the string value of PreemptionPolicy ({sent}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
            ),
        ));
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    if let Some(class_name) = class_name {
        spec.insert("priorityClassName".into(), json!(class_name));
    }
    spec.insert("priority".into(), json!(priority));
    if let Some(policy) = policy {
        spec.insert("preemptionPolicy".into(), json!(policy));
    }
    Ok(())
}

/// Admission of a pod update: the priority and preemption policy set on
/// create are kept when the update leaves them out (validation then
/// refuses any other change to them).
pub fn admit_pod_update(old: &Value, new: &mut Value) {
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for field in ["priority", "preemptionPolicy"] {
        let kept = &old["spec"][field];
        if spec.get(field).is_none_or(Value::is_null) && !kept.is_null() {
            spec.insert(field.into(), kept.clone());
        }
    }
}

/// Admission of a PriorityClass create or update: only one class may be
/// the global default.
pub fn admit_priority_class(
    class: &Value,
    creating: bool,
    classes: &dyn PriorityClasses,
) -> Result<(), ApiError> {
    if class["globalDefault"].as_bool() != Some(true) {
        return Ok(());
    }
    let name = admission_name(class);
    let Some(existing) = default_class(classes) else {
        return Ok(());
    };
    let existing_name = existing["metadata"]["name"].as_str().unwrap_or_default();
    if creating || existing_name != name {
        return Err(ApiError::forbidden(format!(
            "priorityclasses.scheduling.k8s.io \"{name}\" is forbidden: PriorityClass {existing_name} is already marked as default. Only one default can exist"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Classes(Vec<Value>);

    impl PriorityClasses for Classes {
        fn get(&self, name: &str) -> Option<Value> {
            self.0
                .iter()
                .find(|c| c["metadata"]["name"] == name)
                .cloned()
        }
        fn global_defaults(&self) -> Vec<Value> {
            self.0
                .iter()
                .filter(|c| c["globalDefault"] == true)
                .cloned()
                .collect()
        }
    }

    fn class(name: &str, value: i64, default: bool, policy: &str) -> Value {
        json!({"metadata": {"name": name}, "value": value, "globalDefault": default, "preemptionPolicy": policy})
    }

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    #[test]
    fn a_named_class_sets_priority_and_preemption_policy() {
        let classes = Classes(vec![class("high", 1000, false, "Never")]);
        let mut p = pod(json!({"priorityClassName": "high"}));
        admit_new_pod(&mut p, &classes).expect("admitted");
        assert_eq!(p["spec"]["priority"], 1000);
        assert_eq!(p["spec"]["preemptionPolicy"], "Never");
    }

    #[test]
    fn the_global_default_applies_to_pods_without_a_class() {
        let classes = Classes(vec![
            class("b", 30, true, "PreemptLowerPriority"),
            class("a", 20, true, "Never"),
        ]);
        let mut p = pod(json!({}));
        admit_new_pod(&mut p, &classes).expect("admitted");
        assert_eq!(
            p["spec"],
            json!({"priorityClassName": "a", "priority": 20, "preemptionPolicy": "Never"})
        );
        let mut p = pod(json!({}));
        admit_new_pod(&mut p, &Classes(Vec::new())).expect("admitted");
        assert_eq!(
            p["spec"],
            json!({"priority": 0, "preemptionPolicy": "PreemptLowerPriority"})
        );
    }

    #[test]
    fn unknown_classes_and_conflicting_values_are_forbidden() {
        let classes = Classes(vec![class("high", 1000, false, "Never")]);
        let mut p =
            json!({"metadata": {"generateName": "web-"}, "spec": {"priorityClassName": "nope"}});
        let error = admit_new_pod(&mut p, &classes).expect_err("unknown class");
        assert_eq!(error.code, 403);
        assert_eq!(
            error.message,
            "pods \"web-\" is forbidden: no PriorityClass with name nope was found"
        );
        let mut p = pod(json!({"priorityClassName": "high", "priority": 5}));
        let error = admit_new_pod(&mut p, &classes).expect_err("conflicting priority");
        assert_eq!(
            error.message,
            "pods \"p\" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name"
        );
        let mut p =
            pod(json!({"priorityClassName": "high", "preemptionPolicy": "PreemptLowerPriority"}));
        let error = admit_new_pod(&mut p, &classes).expect_err("conflicting policy");
        assert_eq!(
            error.message,
            "pods \"p\" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name"
        );
        let mut p = pod(json!({"priorityClassName": "high", "priority": 1000}));
        assert!(admit_new_pod(&mut p, &classes).is_ok(), "a matching value");
    }

    #[test]
    fn updates_keep_the_priority_set_on_create() {
        let old = pod(json!({"priority": 7, "preemptionPolicy": "Never"}));
        let mut new = pod(json!({}));
        admit_pod_update(&old, &mut new);
        assert_eq!(new["spec"]["priority"], 7);
        assert_eq!(new["spec"]["preemptionPolicy"], "Never");
    }

    #[test]
    fn only_one_class_is_the_global_default() {
        let classes = Classes(vec![class("a", 1, true, "Never")]);
        let second = class("b", 2, true, "Never");
        let error = admit_priority_class(&second, true, &classes).expect_err("second default");
        assert_eq!(
            error.message,
            "priorityclasses.scheduling.k8s.io \"b\" is forbidden: PriorityClass a is already marked as default. Only one default can exist"
        );
        assert!(admit_priority_class(&second, false, &classes).is_err());
        let same = class("a", 1, true, "Never");
        assert!(admit_priority_class(&same, false, &classes).is_ok());
        let plain = class("c", 1, false, "Never");
        assert!(admit_priority_class(&plain, true, &classes).is_ok());
    }
}
