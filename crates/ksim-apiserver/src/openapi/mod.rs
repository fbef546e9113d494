//! The OpenAPI v3 documents (`/openapi/v3`), generated from the k8s-openapi types and CRDs, and server-side field validation.
