//! ksim-store: the versioned object store behind ksim's API server.
