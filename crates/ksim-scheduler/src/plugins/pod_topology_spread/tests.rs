//! Tests of PodTopologySpread.
