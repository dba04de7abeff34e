//! Sets of IP addresses, as the in-cluster IPAM provider reckons a pool: the addresses a pool
//! lists (single addresses, CIDRs, `from-to` ranges), less the excluded ones, the subnet's
//! network and broadcast addresses and the gateway; which of them are free; how many.
//!
//! Written here rather than taken from a crate: none in the tree does set arithmetic over
//! address ranges (upstream uses Go's `netipx.IPSetBuilder`), and a pool is a handful of
//! ranges, so a sorted list of inclusive ranges is all it takes.

use std::net::IpAddr;

/// One address as a number, with its family: IPv4 and IPv6 never overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Addr {
    pub v6: bool,
    pub value: u128,
}

impl Addr {
    pub fn of(ip: IpAddr) -> Addr {
        match ip {
            IpAddr::V4(a) => Addr {
                v6: false,
                value: u32::from(a) as u128,
            },
            IpAddr::V6(a) => Addr {
                v6: true,
                value: u128::from(a),
            },
        }
    }

    pub fn ip(self) -> IpAddr {
        match self.v6 {
            false => IpAddr::V4((self.value as u32).into()),
            true => IpAddr::V6(self.value.into()),
        }
    }

    /// The address's width in bits (32 or 128).
    pub fn width(self) -> u32 {
        if self.v6 {
            128
        } else {
            32
        }
    }
}

/// An address, strictly as Go's `netip.ParseAddr` takes it (no leading zeros in IPv4).
pub fn parse_ip(s: &str) -> Result<Addr, String> {
    s.parse::<IpAddr>()
        .map(Addr::of)
        .map_err(|_| format!("{s:?} is not a valid IP address"))
}

/// The first and last address of the subnet of `addr` with `prefix` bits.
pub fn subnet(addr: Addr, prefix: u32) -> Result<(Addr, Addr), String> {
    if prefix > addr.width() {
        return Err(format!("prefix {prefix} is too long for {}", addr.ip()));
    }
    let host_bits = addr.width() - prefix;
    let host_mask: u128 = if host_bits == 128 {
        u128::MAX
    } else {
        (1u128 << host_bits) - 1
    };
    let first = addr.value & !host_mask;
    let last = first | host_mask;
    Ok((
        Addr {
            value: first,
            ..addr
        },
        Addr {
            value: last,
            ..addr
        },
    ))
}

/// A set of addresses: sorted, merged, inclusive ranges.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IpSet {
    ranges: Vec<(Addr, Addr)>,
}

impl IpSet {
    /// The set of one pool entry: an address, a CIDR (the whole subnet it names) or a
    /// `from-to` range of one family.
    pub fn of_entry(entry: &str) -> Result<IpSet, String> {
        let invalid = || format!("{entry:?} is not a valid IP, range, nor CIDR");
        let (from, to) = if let Some((from, to)) = entry.split_once('-') {
            let (from, to) = (
                parse_ip(from).map_err(|_| invalid())?,
                parse_ip(to).map_err(|_| invalid())?,
            );
            if from.v6 != to.v6 || from > to {
                return Err(invalid());
            }
            (from, to)
        } else if let Some((addr, bits)) = entry.split_once('/') {
            let addr = parse_ip(addr).map_err(|_| invalid())?;
            let bits: u32 = bits.parse().map_err(|_| invalid())?;
            subnet(addr, bits).map_err(|_| invalid())?
        } else {
            let a = parse_ip(entry).map_err(|_| invalid())?;
            (a, a)
        };
        let mut set = IpSet::default();
        set.add(from, to);
        Ok(set)
    }

    /// The union of `entries`' sets.
    pub fn of_entries<'a>(entries: impl IntoIterator<Item = &'a String>) -> Result<IpSet, String> {
        let mut set = IpSet::default();
        for entry in entries {
            set.add_set(&IpSet::of_entry(entry)?);
        }
        Ok(set)
    }

    /// The set's ranges, lowest first, each as `from-to` (Go's `netipx.IPRange` text).
    pub fn ranges(&self) -> Vec<String> {
        self.ranges
            .iter()
            .map(|(from, to)| format!("{}-{}", from.ip(), to.ip()))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The lowest address, if any.
    pub fn first(&self) -> Option<Addr> {
        self.ranges.first().map(|r| r.0)
    }

    /// Whether the set holds addresses of both families.
    pub fn mixed(&self) -> bool {
        self.ranges.iter().any(|r| r.0.v6) && self.ranges.iter().any(|r| !r.0.v6)
    }

    pub fn add(&mut self, from: Addr, to: Addr) {
        self.ranges.push((from, to));
        self.ranges.sort();
        let mut merged: Vec<(Addr, Addr)> = Vec::with_capacity(self.ranges.len());
        for (from, to) in self.ranges.drain(..) {
            match merged.last_mut() {
                // Overlapping or adjacent ranges of one family become one.
                Some(last)
                    if last.1.v6 == from.v6 && last.1.value.saturating_add(1) >= from.value =>
                {
                    last.1 = last.1.max(to);
                }
                _ => merged.push((from, to)),
            }
        }
        self.ranges = merged;
    }

    pub fn add_set(&mut self, other: &IpSet) {
        for &(from, to) in &other.ranges {
            self.add(from, to);
        }
    }

    pub fn remove(&mut self, from: Addr, to: Addr) {
        let mut kept = Vec::with_capacity(self.ranges.len() + 1);
        for &(a, b) in &self.ranges {
            if a.v6 != from.v6 || b < from || a > to {
                kept.push((a, b));
                continue;
            }
            if a < from {
                kept.push((
                    a,
                    Addr {
                        value: from.value - 1,
                        ..a
                    },
                ));
            }
            if b > to {
                kept.push((
                    Addr {
                        value: to.value + 1,
                        ..b
                    },
                    b,
                ));
            }
        }
        self.ranges = kept;
    }

    pub fn remove_set(&mut self, other: &IpSet) {
        for &(from, to) in &other.ranges {
            self.remove(from, to);
        }
    }

    pub fn contains(&self, a: Addr) -> bool {
        self.ranges.iter().any(|&(from, to)| from <= a && a <= to)
    }

    /// How many addresses, as Go's `int` holds them (saturated).
    pub fn count(&self) -> usize {
        let total = self.ranges.iter().fold(0u128, |sum, &(from, to)| {
            sum.saturating_add(to.value - from.value).saturating_add(1)
        });
        usize::try_from(total)
            .unwrap_or(usize::MAX)
            .min(i64::MAX as usize)
    }

    /// The lowest address of the set that `used` does not hold.
    pub fn first_free(&self, used: &IpSet) -> Option<Addr> {
        for &(from, to) in &self.ranges {
            let mut a = from;
            loop {
                if !used.contains(a) {
                    return Some(a);
                }
                // Skip past the used range that holds `a`.
                let end = used
                    .ranges
                    .iter()
                    .find(|&&(f, t)| f <= a && a <= t)
                    .map(|r| r.1)
                    .unwrap_or(a);
                if end >= to {
                    break;
                }
                a = Addr {
                    value: end.value + 1,
                    ..a
                };
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(entries: &[&str]) -> IpSet {
        let owned: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
        IpSet::of_entries(&owned).unwrap()
    }

    fn ip(s: &str) -> Addr {
        parse_ip(s).unwrap()
    }

    #[test]
    fn entries_are_addresses_cidrs_and_ranges() {
        assert_eq!(set(&["10.0.0.1"]).count(), 1);
        assert_eq!(set(&["10.0.0.0/30"]).count(), 4);
        // A CIDR names its whole subnet, wherever in it the address is.
        assert!(set(&["10.0.0.5/30"]).contains(ip("10.0.0.4")));
        assert_eq!(set(&["10.0.0.10-10.0.0.19"]).count(), 10);
        assert_eq!(set(&["fd00::1-fd00::4", "fd00::3"]).count(), 4);
        for bad in [
            "10.0.0.256",
            "10.0.0.9-10.0.0.1",
            "10.0.0.1-fd00::1",
            "10.0.0.0/33",
            "010.0.0.1",
            "x",
        ] {
            assert!(IpSet::of_entry(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ranges_merge_and_split() {
        let mut s = set(&["10.0.0.1-10.0.0.5", "10.0.0.6", "10.0.0.4-10.0.0.9"]);
        assert_eq!(s.count(), 9);
        s.remove(ip("10.0.0.3"), ip("10.0.0.4"));
        assert_eq!(s.count(), 7);
        assert!(!s.contains(ip("10.0.0.3")) && s.contains(ip("10.0.0.5")));
        // Families never mix: removing ::3 leaves 10.0.0.x alone.
        s.remove(ip("::1"), ip("::ffff:ffff"));
        assert_eq!(s.count(), 7);
    }

    #[test]
    fn the_first_free_address_skips_used_runs() {
        let pool = set(&["10.0.0.1-10.0.0.10"]);
        let used = set(&["10.0.0.1-10.0.0.3", "10.0.0.5"]);
        assert_eq!(pool.first_free(&used), Some(ip("10.0.0.4")));
        let full = set(&["10.0.0.1-10.0.0.10"]);
        assert_eq!(pool.first_free(&full), None);
    }

    #[test]
    fn subnets_and_counts_saturate() {
        let (first, last) = subnet(ip("192.168.7.77"), 24).unwrap();
        assert_eq!(
            (first.ip().to_string(), last.ip().to_string()),
            ("192.168.7.0".into(), "192.168.7.255".into())
        );
        assert_eq!(set(&["::/0"]).count(), i64::MAX as usize);
        assert!(subnet(ip("10.0.0.1"), 33).is_err());
    }
}
