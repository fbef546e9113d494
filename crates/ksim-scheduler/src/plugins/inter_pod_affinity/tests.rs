//! Tests of InterPodAffinity.
