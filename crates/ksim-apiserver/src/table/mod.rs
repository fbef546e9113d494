//! `meta.k8s.io/v1` Table output for `kubectl get`: the columns of every built-in kind and CRD printer columns.
