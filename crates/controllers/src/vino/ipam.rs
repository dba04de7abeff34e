//! ViNO's address management over an `IPPool`, with upstream's rules: a pool per subnet, its
//! MAC prefix fixed once made; a static range per network, from which each host's bridge
//! and each VM interface get the lowest free address and the pool's next MAC; a DHCP area cut
//! into blocks of 2^bitStep addresses, one per host. An owner (`allocatedTo`) always gets
//! back what it was given, so a reconcile can run any number of times; nothing is released.
//! Pure functions over the pool's spec, so the controller reads, changes and writes a pool
//! in one step. IPv4 only: upstream's IPv6 handling keeps only a /64's upper half, which no
//! sample uses.

use super::types::{AllocatedIp, AllocatedRange, IPPoolSpec, Network, Range};
use std::net::Ipv4Addr;

/// The MAC a pool starts from when its network names none.
pub const DEFAULT_MAC_PREFIX: &str = "02:00:00:00:00:00";

/// The IPPool of `subnet`: `ippool-` and the subnet with `-` for `.`, `:` and `/`.
pub fn pool_name(subnet: &str) -> String {
    let tail: String = subnet
        .chars()
        .map(|c| if matches!(c, '.' | ':' | '/') { '-' } else { c })
        .collect();
    format!("ippool-{tail}")
}

/// A new pool for `network`'s subnet.
pub fn new_pool(network: &Network) -> Result<IPPoolSpec, String> {
    subnet(&network.subnet)?;
    let prefix = mac_prefix(network);
    parse_mac(&prefix)?;
    Ok(IPPoolSpec {
        subnet: network.subnet.clone(),
        mac_prefix: prefix.clone(),
        next_mac: prefix,
        ..IPPoolSpec::default()
    })
}

fn mac_prefix(network: &Network) -> String {
    network
        .mac_prefix
        .clone()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| DEFAULT_MAC_PREFIX.to_string())
}

/// Adds `network`'s static range to `pool` if it is not there; refuses a changed MAC prefix.
pub fn register(pool: &mut IPPoolSpec, network: &Network) -> Result<Range, String> {
    if pool.mac_prefix != mac_prefix(network) {
        return Err("Cannot change immutable field `macPrefix`".into());
    }
    let range = Range {
        start: network.static_allocation_start.clone(),
        stop: network.static_allocation_stop.clone(),
    };
    let (start, stop) = (ip(&range.start)?, ip(&range.stop)?);
    if start > stop {
        return Err(format!(
            "static range [{}, {}]: start is after stop",
            range.start, range.stop
        ));
    }
    if !pool.ranges.contains(&range) {
        pool.ranges.push(range.clone());
    }
    Ok(range)
}

/// An address and MAC from `range` for `owner`: what it had, or the range's lowest address
/// no one holds and the pool's next MAC.
pub fn allocate(pool: &mut IPPoolSpec, range: &Range, owner: &str) -> Result<AllocatedIp, String> {
    if let Some(had) = pool.allocated_ips.iter().find(|a| a.allocated_to == owner) {
        return Ok(had.clone());
    }
    let (start, stop) = (u32::from(ip(&range.start)?), u32::from(ip(&range.stop)?));
    let held: std::collections::HashSet<u32> = pool
        .allocated_ips
        .iter()
        .filter_map(|a| a.ip.parse::<Ipv4Addr>().ok().map(u32::from))
        .collect();
    let free = (start..=stop).find(|a| !held.contains(a)).ok_or_else(|| {
        format!(
            "IPAM range [{},{}] in subnet {} is exhausted",
            range.start, range.stop, pool.subnet
        )
    })?;
    let mac = parse_mac(&pool.next_mac)?;
    let given = AllocatedIp {
        ip: Ipv4Addr::from(free).to_string(),
        mac: format_mac(mac),
        allocated_to: owner.to_string(),
    };
    pool.next_mac = format_mac(mac + 1);
    pool.allocated_ips.push(given.clone());
    Ok(given)
}

/// `host`'s DHCP block of `network`: the one it holds, or the first no host holds. The area
/// is cut into blocks the first time a host asks.
pub fn host_block(pool: &mut IPPoolSpec, network: &Network, host: &str) -> Result<Range, String> {
    if pool.allocated_ranges.is_empty() {
        pool.allocated_ranges = blocks(network)?;
    }
    if let Some(had) = pool
        .allocated_ranges
        .iter()
        .find(|r| r.allocated_to == host)
    {
        return Ok(Range {
            start: had.start.clone(),
            stop: had.stop.clone(),
        });
    }
    let free = pool
        .allocated_ranges
        .iter_mut()
        .find(|r| r.allocated_to.is_empty())
        .ok_or_else(|| format!("No free ranges available for host {host}"))?;
    free.allocated_to = host.to_string();
    Ok(Range {
        start: free.start.clone(),
        stop: free.stop.clone(),
    })
}

/// The DHCP area's whole blocks of 2^bitStep addresses (4 when unset).
fn blocks(network: &Network) -> Result<Vec<AllocatedRange>, String> {
    let (Some(start), Some(stop)) = (
        network.dhcp_allocation_start.as_deref(),
        network.dhcp_allocation_stop.as_deref(),
    ) else {
        return Err(format!(
            "network {} has no DHCP allocation range",
            network.name
        ));
    };
    let (start, stop) = (u32::from(ip(start)?), u32::from(ip(stop)?));
    let step = match network.instance_subnet_bit_step {
        Some(s) if s > 0 => s,
        _ => 4,
    };
    if step > 24 {
        return Err(format!("instanceSubnetBitStep {step} is too large"));
    }
    let size = 1u32 << step;
    let mut out = Vec::new();
    let mut first = start;
    while let Some(last) = first.checked_add(size - 1).filter(|l| *l <= stop) {
        out.push(AllocatedRange {
            allocated_to: String::new(),
            start: Ipv4Addr::from(first).to_string(),
            stop: Ipv4Addr::from(last).to_string(),
        });
        match last.checked_add(1) {
            Some(next) => first = next,
            None => break,
        }
    }
    Ok(out)
}

/// The dotted netmask of a CIDR (`/20` is `255.255.240.0`).
pub fn netmask(cidr: &str) -> Result<String, String> {
    let (_, bits) = subnet(cidr)?;
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    Ok(Ipv4Addr::from(mask).to_string())
}

fn subnet(cidr: &str) -> Result<(Ipv4Addr, u32), String> {
    let (addr, bits) = cidr
        .split_once('/')
        .ok_or_else(|| format!("subnet {cidr:?} is not a CIDR"))?;
    let addr = ip(addr)?;
    let bits: u32 = bits
        .parse()
        .ok()
        .filter(|b| *b <= 32)
        .ok_or_else(|| format!("subnet {cidr:?} has a bad prefix length"))?;
    Ok((addr, bits))
}

fn ip(s: &str) -> Result<Ipv4Addr, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("{s:?} is not an IPv4 address (only IPv4 is supported)"))
}

fn parse_mac(s: &str) -> Result<u64, String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("{s:?} is not a MAC address"));
    }
    parts.iter().try_fold(0u64, |acc, p| {
        u8::from_str_radix(p, 16)
            .map(|b| (acc << 8) | u64::from(b))
            .map_err(|_| format!("{s:?} is not a MAC address"))
    })
}

fn format_mac(mac: u64) -> String {
    let bytes = mac.to_be_bytes();
    bytes[2..]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn management(step: Option<i64>) -> Network {
        Network {
            name: "management".into(),
            subnet: "192.168.2.0/20".into(),
            dhcp_allocation_start: Some("192.168.4.0".into()),
            dhcp_allocation_stop: Some("192.168.7.255".into()),
            instance_subnet_bit_step: step,
            static_allocation_start: "192.168.2.10".into(),
            static_allocation_stop: "192.168.2.24".into(),
            mac_prefix: Some("52:54:00:06:00:00".into()),
            ..Network::default()
        }
    }

    #[test]
    fn the_samples_bridge_and_first_vm_get_upstreams_addresses() {
        let net = management(Some(4));
        assert_eq!(pool_name(&net.subnet), "ippool-192-168-2-0-20");
        let mut pool = new_pool(&net).unwrap();
        let range = register(&mut pool, &net).unwrap();
        register(&mut pool, &net).unwrap();
        assert_eq!(pool.ranges.len(), 1, "registered once");
        let bridge = allocate(&mut pool, &range, "node1").unwrap();
        assert_eq!(
            (bridge.ip.as_str(), bridge.mac.as_str()),
            ("192.168.2.10", "52:54:00:06:00:00")
        );
        let vm = allocate(
            &mut pool,
            &range,
            "default-vino-test-cr-node1-master-0/management",
        )
        .unwrap();
        assert_eq!(
            (vm.ip.as_str(), vm.mac.as_str()),
            ("192.168.2.11", "52:54:00:06:00:01")
        );
        assert_eq!(
            allocate(&mut pool, &range, "node1").unwrap(),
            bridge,
            "kept"
        );
        assert_eq!(pool.next_mac, "52:54:00:06:00:02");
        assert_eq!(netmask(&net.subnet).unwrap(), "255.255.240.0");
        let block = host_block(&mut pool, &net, "node1").unwrap();
        assert_eq!(
            (block.start.as_str(), block.stop.as_str()),
            ("192.168.4.0", "192.168.4.15")
        );
        let second = host_block(&mut pool, &net, "node2").unwrap();
        assert_eq!(second.start, "192.168.4.16");
        assert_eq!(host_block(&mut pool, &net, "node1").unwrap(), block);
        let wide = host_block(&mut new_pool(&net).unwrap(), &management(Some(6)), "n").unwrap();
        assert_eq!(wide.stop, "192.168.4.63");
    }

    #[test]
    fn exhaustion_a_changed_prefix_and_bad_input_are_refused_with_upstreams_words() {
        let mut net = management(None);
        net.static_allocation_stop = "192.168.2.11".into();
        let mut pool = new_pool(&net).unwrap();
        let range = register(&mut pool, &net).unwrap();
        allocate(&mut pool, &range, "a").unwrap();
        allocate(&mut pool, &range, "b").unwrap();
        let full = allocate(&mut pool, &range, "c").unwrap_err();
        assert!(full.contains("is exhausted"), "{full}");
        net.mac_prefix = Some("02:00:00:00:00:00".into());
        assert!(register(&mut pool, &net).unwrap_err().contains("macPrefix"));
        let mut backwards = management(None);
        backwards.static_allocation_start = "192.168.2.30".into();
        let mut pool = new_pool(&backwards).unwrap();
        assert!(register(&mut pool, &backwards).is_err());
        let v6 = Network {
            subnet: "fd00::/64".into(),
            ..management(None)
        };
        assert!(new_pool(&v6).unwrap_err().contains("IPv4"));
        // Two hosts' worth of blocks: a third is refused.
        let mut tiny = management(Some(4));
        tiny.dhcp_allocation_stop = Some("192.168.4.40".into());
        let mut pool = new_pool(&tiny).unwrap();
        host_block(&mut pool, &tiny, "h1").unwrap();
        host_block(&mut pool, &tiny, "h2").unwrap();
        let none = host_block(&mut pool, &tiny, "h3").unwrap_err();
        assert_eq!(none, "No free ranges available for host h3");
    }
}
