//! Pod lifecycle helpers: IP allocation.
