//! Label and field selectors: parsing and matching.
