//! ksim-testutils: helpers for ksim's tests (builders, harnesses, kubectl driver).
