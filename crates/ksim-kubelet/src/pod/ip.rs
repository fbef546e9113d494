//! Pod IP allocation: one pool per podCIDR handing out addresses in order, taking back
//! released ones first; per pod, the same IPs on every ask until the pod is released.
//! hostNetwork pods get their node's IPs.

use std::collections::BTreeSet;
use std::net::IpAddr;

use crate::error::KubeletError;

// Keyed by the cluster's own names and UIDs: foldhash rather than SipHash
// (every pod of a restored cluster goes through these maps at the start).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;

/// The CIDR pods get IPs from when their node has no podCIDR (KWOK's default).
pub const DEFAULT_POD_CIDR: &str = "10.0.0.1/24";

/// The addresses of one CIDR.
#[derive(Clone, Debug)]
pub struct IpPool {
    cidr: String,
    network: u128,
    ipv4: bool,
    /// Offsets (from the network address) that may be handed out: `first..=last`.
    first: u128,
    last: u128,
    /// Next never-used offset (`None` past the end).
    next: Option<u128>,
    /// Released offsets, handed out again lowest first.
    released: BTreeSet<u128>,
    /// Offsets in use.
    used: BTreeSet<u128>,
}

impl IpPool {
    /// A pool over `cidr` (`10.0.3.0/24`, `fd00::/64`); host bits of the address are ignored.
    /// The network address (and the IPv4 broadcast address) is never handed out.
    pub fn new(cidr: &str) -> Result<Self, KubeletError> {
        let invalid = |reason: &str| KubeletError::InvalidCidr {
            cidr: cidr.to_owned(),
            reason: reason.to_owned(),
        };
        let (addr, prefix) = cidr
            .split_once('/')
            .ok_or_else(|| invalid("missing prefix length"))?;
        let addr: IpAddr = addr.parse().map_err(|_| invalid("invalid address"))?;
        let prefix: u32 = prefix
            .parse()
            .map_err(|_| invalid("invalid prefix length"))?;
        let (bits, value, ipv4) = match addr {
            IpAddr::V4(v4) => (32u32, u128::from(u32::from(v4)), true),
            IpAddr::V6(v6) => (128u32, u128::from(v6), false),
        };
        if prefix > bits {
            return Err(invalid("prefix length too long"));
        }
        let host_bits = bits - prefix;
        let size: u128 = if host_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << host_bits) - 1
        };
        let network = value & !size;
        let (first, last) = match (ipv4, host_bits) {
            (_, 0) => (0, 0),
            (true, 1) => (0, 1),
            (true, _) => (1, size - 1),
            (false, _) => (1, size),
        };
        Ok(Self {
            cidr: cidr.to_owned(),
            network,
            ipv4,
            first,
            last,
            next: Some(first),
            released: BTreeSet::new(),
            used: BTreeSet::new(),
        })
    }

    /// The CIDR as given.
    pub fn cidr(&self) -> &str {
        &self.cidr
    }

    fn address(&self, offset: u128) -> IpAddr {
        let value = self.network | offset;
        if self.ipv4 {
            IpAddr::from(u32::try_from(value).unwrap_or(u32::MAX).to_be_bytes())
        } else {
            IpAddr::from(value.to_be_bytes())
        }
    }

    fn offset(&self, ip: &str) -> Option<u128> {
        let value = match ip.parse::<IpAddr>().ok()? {
            IpAddr::V4(v4) if self.ipv4 => u128::from(u32::from(v4)),
            IpAddr::V6(v6) if !self.ipv4 => u128::from(v6),
            _ => return None,
        };
        let offset = value.checked_sub(self.network)?;
        (self.first..=self.last).contains(&offset).then_some(offset)
    }

    /// Whether `ip` is an address this pool hands out.
    pub fn contains(&self, ip: &str) -> bool {
        self.offset(ip).is_some()
    }

    /// Hands out an address: a released one first, else the next unused one.
    pub fn allocate(&mut self) -> Result<String, KubeletError> {
        if let Some(offset) = self.released.pop_first() {
            self.used.insert(offset);
            return Ok(self.address(offset).to_string());
        }
        while let Some(offset) = self.next.filter(|o| *o <= self.last) {
            self.next = offset.checked_add(1);
            if self.used.insert(offset) {
                return Ok(self.address(offset).to_string());
            }
        }
        Err(KubeletError::PoolExhausted {
            cidr: self.cidr.clone(),
        })
    }

    /// Takes `ip` back; addresses outside the pool are ignored.
    pub fn release(&mut self, ip: &str) {
        if let Some(offset) = self.offset(ip)
            && self.used.remove(&offset)
        {
            self.released.insert(offset);
        }
    }

    /// Records that `ip` is in use (a pod that had it before the simulator started).
    pub fn mark_used(&mut self, ip: &str) {
        if let Some(offset) = self.offset(ip) {
            self.released.remove(&offset);
            self.used.insert(offset);
        }
    }

    /// How many addresses are in use.
    pub fn in_use(&self) -> usize {
        self.used.len()
    }
}

/// Pod IPs for every node: pools by CIDR, IPs by pod key (e.g. the pod's UID).
/// An address goes back to its pool only when no pod holds it any more: a
/// pod written with an IP another pod shows too (a snapshot restore writing
/// the pods' saved IPs while the simulator starts pods) holds it as well,
/// and either one giving it up leaves it taken by the other.
#[derive(Clone, Debug)]
pub struct PodIpAllocator {
    default_cidr: String,
    pools: HashMap<String, IpPool>,
    pods: HashMap<String, Vec<(String, String)>>,
    /// The pod keys holding each address, by (CIDR, address).
    holders: HashMap<(String, String), Vec<String>>,
}

impl Default for PodIpAllocator {
    fn default() -> Self {
        Self::new(DEFAULT_POD_CIDR)
    }
}

impl PodIpAllocator {
    /// An allocator using `default_cidr` for nodes without a podCIDR.
    pub fn new(default_cidr: &str) -> Self {
        Self {
            default_cidr: default_cidr.to_owned(),
            pools: HashMap::default(),
            pods: HashMap::default(),
            holders: HashMap::default(),
        }
    }

    /// Records that `pod_key` holds `ip` of `cidr`.
    fn hold(&mut self, pod_key: &str, cidr: &str, ip: &str) {
        let holders = self
            .holders
            .entry((cidr.to_owned(), ip.to_owned()))
            .or_default();
        if !holders.iter().any(|h| h == pod_key) {
            holders.push(pod_key.to_owned());
        }
    }

    /// `pod_key` no longer holds `ip` of `cidr`; the address goes back to
    /// its pool once no pod holds it.
    fn release_held(&mut self, pod_key: &str, cidr: &str, ip: &str) {
        let key = (cidr.to_owned(), ip.to_owned());
        let Some(holders) = self.holders.get_mut(&key) else {
            return;
        };
        holders.retain(|h| h != pod_key);
        if holders.is_empty() {
            self.holders.remove(&key);
            if let Some(pool) = self.pools.get_mut(cidr) {
                pool.release(ip);
            }
        }
    }

    fn pool(&mut self, cidr: &str) -> Result<&mut IpPool, KubeletError> {
        if !self.pools.contains_key(cidr) {
            self.pools.insert(cidr.to_owned(), IpPool::new(cidr)?);
        }
        self.pools
            .get_mut(cidr)
            .ok_or_else(|| KubeletError::InvalidCidr {
                cidr: cidr.to_owned(),
                reason: "pool vanished".into(),
            })
    }

    fn cidrs<'a>(&'a self, node_pod_cidrs: &'a [String]) -> Vec<&'a str> {
        if node_pod_cidrs.is_empty() {
            vec![self.default_cidr.as_str()]
        } else {
            node_pod_cidrs.iter().map(String::as_str).collect()
        }
    }

    /// The IPs of pod `pod_key` on a node with `node_pod_cidrs` (spec.podCIDRs, or
    /// spec.podCIDR alone) and addresses `node_ips`: the node's IPs for hostNetwork
    /// pods; else one IP per CIDR, the same ones on every call until released.
    pub fn pod_ips(
        &mut self,
        pod_key: &str,
        node_pod_cidrs: &[String],
        host_network: bool,
        node_ips: &[String],
    ) -> Result<Vec<String>, KubeletError> {
        if host_network {
            return Ok(node_ips.to_vec());
        }
        if let Some(ips) = self.pods.get(pod_key) {
            return Ok(ips.iter().map(|(_, ip)| ip.clone()).collect());
        }
        let cidrs: Vec<String> = self
            .cidrs(node_pod_cidrs)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let mut taken: Vec<(String, String)> = Vec::new();
        for cidr in &cidrs {
            match self.pool(cidr).and_then(IpPool::allocate) {
                Ok(ip) => taken.push((cidr.clone(), ip)),
                Err(err) => {
                    for (cidr, ip) in &taken {
                        if let Some(pool) = self.pools.get_mut(cidr) {
                            pool.release(ip);
                        }
                    }
                    return Err(err);
                }
            }
        }
        let ips = taken.iter().map(|(_, ip)| ip.clone()).collect();
        for (cidr, ip) in &taken {
            self.hold(pod_key, cidr, ip);
        }
        self.pods.insert(pod_key.to_owned(), taken);
        Ok(ips)
    }

    /// Records IPs a pod already has (found at startup, or written by another
    /// client such as a snapshot restore) so they are not handed out again;
    /// IPs the pod held before and no longer shows go back to their pools.
    pub fn mark_used(&mut self, pod_key: &str, node_pod_cidrs: &[String], ips: &[String]) {
        if let Some(previous) = self.pods.get(pod_key) {
            let stale: Vec<(String, String)> = previous
                .iter()
                .filter(|(_, ip)| !ips.contains(ip))
                .cloned()
                .collect();
            for (cidr, ip) in stale {
                self.release_held(pod_key, &cidr, &ip);
            }
        }
        let cidrs: Vec<String> = self
            .cidrs(node_pod_cidrs)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let mut kept = Vec::new();
        for (cidr, ip) in cidrs.iter().zip(ips) {
            if let Ok(pool) = self.pool(cidr)
                && pool.contains(ip)
            {
                pool.mark_used(ip);
                kept.push((cidr.clone(), ip.clone()));
            }
        }
        for (cidr, ip) in &kept {
            self.hold(pod_key, cidr, ip);
        }
        if !kept.is_empty() {
            self.pods.insert(pod_key.to_owned(), kept);
        }
    }

    /// Gives a deleted pod's IPs back to their pools.
    pub fn release(&mut self, pod_key: &str) {
        for (cidr, ip) in self.pods.remove(pod_key).unwrap_or_default() {
            self.release_held(pod_key, &cidr, &ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ip_written_over_the_allocated_one_frees_the_allocated_one() {
        let mut allocator = PodIpAllocator::new("10.0.0.0/24");
        let cidrs = vec!["10.0.2.0/24".to_string()];
        // Allocated first, then a restore writes the pod's saved IP.
        assert_eq!(
            allocator
                .pod_ips("a", &cidrs, false, &[])
                .expect("allocated"),
            ["10.0.2.1"]
        );
        allocator.mark_used("a", &cidrs, &["10.0.2.2".to_string()]);
        // The next pod gets the freed address, not a duplicate of a's.
        assert_eq!(
            allocator
                .pod_ips("b", &cidrs, false, &[])
                .expect("allocated"),
            ["10.0.2.1"]
        );
    }

    #[test]
    fn pool_hands_out_host_addresses_in_order() {
        let cases = [
            ("10.0.3.0/24", vec!["10.0.3.1", "10.0.3.2"]),
            ("10.0.3.77/24", vec!["10.0.3.1", "10.0.3.2"]),
            ("10.1.0.0/16", vec!["10.1.0.1", "10.1.0.2"]),
            ("fd00::/64", vec!["fd00::1", "fd00::2"]),
        ];
        for (cidr, want) in cases {
            let mut pool = IpPool::new(cidr).expect("valid");
            let got: Vec<String> = (0..2).map(|_| pool.allocate().expect("free")).collect();
            assert_eq!(got, want, "{cidr}");
        }
    }

    #[test]
    fn pool_is_exhausted_without_network_or_broadcast() {
        let mut pool = IpPool::new("10.0.0.0/30").expect("valid");
        assert_eq!(pool.allocate().expect("1"), "10.0.0.1");
        assert_eq!(pool.allocate().expect("2"), "10.0.0.2");
        let err = pool.allocate().expect_err("exhausted");
        assert_eq!(err.to_string(), "no IP address left in 10.0.0.0/30");
        let mut single = IpPool::new("10.0.0.9/32").expect("valid");
        assert_eq!(single.allocate().expect("one"), "10.0.0.9");
        assert!(single.allocate().is_err());
    }

    #[test]
    fn released_addresses_are_reused_first() {
        let mut pool = IpPool::new("10.0.0.0/24").expect("valid");
        let a = pool.allocate().expect("a");
        let b = pool.allocate().expect("b");
        pool.release(&a);
        pool.release("192.168.0.1");
        assert_eq!(pool.allocate().expect("reused"), a);
        assert_eq!(pool.allocate().expect("next"), "10.0.0.3");
        assert_eq!(pool.in_use(), 3);
        assert_ne!(a, b);
    }

    #[test]
    fn marked_addresses_are_skipped() {
        let mut pool = IpPool::new("10.0.0.0/24").expect("valid");
        pool.mark_used("10.0.0.1");
        pool.mark_used("10.0.0.2");
        assert_eq!(pool.allocate().expect("free"), "10.0.0.3");
    }

    #[test]
    fn bad_cidrs_are_errors() {
        for cidr in ["10.0.0.0", "10.0.0.0/33", "x/24", "10.0.0.0/x", ""] {
            assert!(IpPool::new(cidr).is_err(), "{cidr}");
        }
        let mut allocator = PodIpAllocator::new("bogus");
        assert!(allocator.pod_ips("p", &[], false, &[]).is_err());
    }

    #[test]
    fn pods_keep_their_ips_and_release_them_on_delete() {
        let mut allocator = PodIpAllocator::default();
        let cidrs = vec!["10.0.5.0/24".to_owned()];
        let a = allocator.pod_ips("a", &cidrs, false, &[]).expect("a");
        assert_eq!(a, vec!["10.0.5.1"]);
        assert_eq!(
            allocator.pod_ips("a", &cidrs, false, &[]).expect("again"),
            a
        );
        let b = allocator.pod_ips("b", &cidrs, false, &[]).expect("b");
        assert_eq!(b, vec!["10.0.5.2"]);
        allocator.release("a");
        assert_eq!(allocator.pod_ips("c", &cidrs, false, &[]).expect("c"), a);
    }

    #[test]
    fn host_network_pods_get_node_ips_and_nodes_without_cidr_use_default() {
        let mut allocator = PodIpAllocator::default();
        let node_ips = vec!["10.200.0.7".to_owned()];
        assert_eq!(
            allocator.pod_ips("h", &[], true, &node_ips).expect("host"),
            node_ips
        );
        assert_eq!(
            allocator
                .pod_ips("p", &[], false, &node_ips)
                .expect("default"),
            vec!["10.0.0.1"]
        );
    }

    #[test]
    fn dual_stack_nodes_give_one_ip_per_cidr() {
        let mut allocator = PodIpAllocator::default();
        let cidrs = vec!["10.0.1.0/24".to_owned(), "fd00:1::/64".to_owned()];
        assert_eq!(
            allocator.pod_ips("p", &cidrs, false, &[]).expect("dual"),
            vec!["10.0.1.1", "fd00:1::1"]
        );
    }

    #[test]
    fn existing_pod_ips_are_marked_at_startup() {
        let mut allocator = PodIpAllocator::default();
        let cidrs = vec!["10.0.2.0/24".to_owned()];
        allocator.mark_used("old", &cidrs, &["10.0.2.1".to_owned()]);
        assert_eq!(
            allocator.pod_ips("old", &cidrs, false, &[]).expect("kept"),
            vec!["10.0.2.1"]
        );
        assert_eq!(
            allocator.pod_ips("new", &cidrs, false, &[]).expect("next"),
            vec!["10.0.2.2"]
        );
        allocator.release("old");
        assert_eq!(
            allocator
                .pod_ips("newer", &cidrs, false, &[])
                .expect("reused"),
            vec!["10.0.2.1"]
        );
    }

    #[test]
    fn an_ip_two_pods_show_stays_taken_until_both_let_go() {
        let mut allocator = PodIpAllocator::default();
        let cidrs = vec!["10.0.2.0/24".to_owned()];
        // The simulator starts pod a and hands it the first address...
        let given = allocator.pod_ips("a", &cidrs, false, &[]).expect("a");
        assert_eq!(given, ["10.0.2.1"]);
        // ...which a restore then writes as pod b's saved IP; pod a shows
        // it too for a moment, then its own saved IP.
        allocator.mark_used("b", &cidrs, &["10.0.2.1".to_owned()]);
        allocator.mark_used("a", &cidrs, &["10.0.2.1".to_owned()]);
        allocator.mark_used("a", &cidrs, &["10.0.2.7".to_owned()]);
        assert_eq!(
            allocator.pod_ips("c", &cidrs, false, &[]).expect("c"),
            ["10.0.2.2"],
            "b still holds 10.0.2.1"
        );
        allocator.release("a");
        assert_eq!(
            allocator.pod_ips("d", &cidrs, false, &[]).expect("d"),
            ["10.0.2.7"],
            "a gave back only what it held"
        );
        allocator.release("b");
        assert_eq!(
            allocator.pod_ips("e", &cidrs, false, &[]).expect("e"),
            ["10.0.2.1"]
        );
    }

    #[test]
    fn failed_multi_cidr_allocation_returns_what_it_took() {
        let mut allocator = PodIpAllocator::default();
        let cidrs = vec!["10.0.9.0/24".to_owned(), "10.0.0.5/32".to_owned()];
        allocator
            .pod_ips("first", &cidrs, false, &[])
            .expect("fits");
        assert!(allocator.pod_ips("second", &cidrs, false, &[]).is_err());
        allocator.release("first");
        assert_eq!(
            allocator
                .pod_ips("third", &cidrs, false, &[])
                .expect("fits again"),
            vec!["10.0.9.1", "10.0.0.5"]
        );
    }
}
