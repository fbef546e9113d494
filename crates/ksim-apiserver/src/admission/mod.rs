//! Defaulting and validation of objects on create and update, as kube-apiserver does them.
