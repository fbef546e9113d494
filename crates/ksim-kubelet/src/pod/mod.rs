//! Pod lifecycle helpers: IP allocation from node podCIDRs.

mod ip;

pub use ip::{DEFAULT_POD_CIDR, IpPool, PodIpAllocator};
