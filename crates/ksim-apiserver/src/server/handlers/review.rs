//! Authentication and authorization reviews (`kubectl auth can-i`,
//! `kubectl auth whoami`): answered, never stored. ksim has no
//! authentication or authorization, so every request is allowed and made by
//! the cluster administrator.

use super::*;

/// Who every request is made by.
const USERNAME: &str = "kubernetes-admin";
const GROUPS: &[&str] = &["kubeadm:cluster-admins", "system:authenticated"];

impl ResourceRequest {
    /// Answers a review with the status kube-apiserver would give an
    /// administrator.
    pub(super) fn review(&self, body: &[u8]) -> Result<Response, ApiError> {
        let mut review = codec::decode_object(&self.headers, body)?;
        self.check_body(&mut review, false)?;
        let user = json!({"username": USERNAME, "groups": GROUPS});
        review["status"] = match self.resource().kind.as_str() {
            "SelfSubjectReview" => json!({"userInfo": user}),
            "TokenReview" => {
                json!({"authenticated": true, "user": user, "audiences": review["spec"]["audiences"]})
            }
            "SelfSubjectRulesReview" => json!({
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": false,
            }),
            _ => json!({"allowed": true, "reason": "ksim allows every request"}),
        };
        if let Some(metadata) = review["metadata"].as_object_mut() {
            metadata.insert("creationTimestamp".into(), Value::Null);
        }
        Ok(codec::respond_value(
            StatusCode::CREATED,
            Output::Json,
            &review,
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::resources::{built_in_resources, is_review, verbs};

    #[test]
    fn reviews_are_create_only() {
        let resources = built_in_resources();
        let review = resources
            .iter()
            .find(|r| r.plural == "selfsubjectaccessreviews")
            .expect("served");
        assert!(is_review(review));
        assert_eq!(verbs(review), ["create"]);
        let pods = resources
            .iter()
            .find(|r| r.plural == "pods")
            .expect("served");
        assert!(!is_review(pods));
    }
}
