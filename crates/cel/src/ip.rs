//! Kubernetes' CEL IP and CIDR libraries: `ip(s)`, `isIP(s)`, `ip.isCanonical(s)`, an
//! address's `family`, `isUnspecified`, `isLoopback`, `isLinkLocalMulticast`,
//! `isLinkLocalUnicast` and `isGlobalUnicast`; `cidr(s)`, `isCIDR(s)`, a prefix's
//! `containsIP`, `containsCIDR`, `ip`, `masked` and `prefixLength`. Parsing is as strict as
//! kube-apiserver's (Go's netip): no zones, no IPv4-mapped IPv6, no leading zeros.
//!
//! Addresses and prefixes travel as typed values (see `typed` in the parent module): an
//! address's text is its canonical form (so `==` compares addresses, not spellings), a
//! prefix's is `address/length`, the address as written.

use super::{typed, typed_text, Answer, Cel};
use cel::extractors::{Arguments, This};
use cel::{ExecutionError, FunctionContext};
use std::net::IpAddr;
use std::sync::Arc;

const IP_KEY: &str = "@ip";
const CIDR_KEY: &str = "@cidr";
/// What the variable `ip` holds, so that `ip.isCanonical(s)` has a receiver.
const LIBRARY_KEY: &str = "@ip-library";

/// Registers the libraries' functions, and the `ip` receiver of `ip.isCanonical`.
pub(super) fn register(ctx: &mut cel::Context<'static>) {
    ctx.add_variable_from_value("ip", typed(LIBRARY_KEY, String::new()));
    // `ip("…")` parses an address; `cidr("…").ip()` is a prefix's address.
    ctx.add_function(
        "ip",
        |ftx: &FunctionContext, Arguments(args): Arguments| match (&ftx.this, &args[..]) {
            (Some(this), []) => {
                let (addr, _) = prefix(ftx, this)?;
                Ok(address_cel(addr))
            }
            (None, [Cel::String(s)]) => parse_ip(s).map(address_cel).map_err(|e| ftx.error(e)),
            _ => Err(ftx.error("no such overload")),
        },
    );
    ctx.add_function("isIP", |s: Arc<String>| parse_ip(&s).is_ok());
    ctx.add_function(
        "isCanonical",
        |ftx: &FunctionContext, This(lib): This<Cel>, s: Arc<String>| {
            if typed_text(&lib, LIBRARY_KEY).is_none() {
                return Err(ftx.error("no such overload"));
            }
            let addr = parse_ip(&s).map_err(|e| ftx.error(e))?;
            Ok::<_, ExecutionError>(Cel::Bool(addr.to_string() == *s))
        },
    );
    ctx.add_function("family", |ftx: &FunctionContext, This(a): This<Cel>| {
        Ok::<_, ExecutionError>(Cel::Int(if address(ftx, &a)?.is_ipv4() { 4 } else { 6 }))
    });
    for (name, test) in [
        (
            "isUnspecified",
            IpAddr::is_unspecified as fn(&IpAddr) -> bool,
        ),
        ("isLoopback", IpAddr::is_loopback),
        ("isLinkLocalMulticast", link_local_multicast),
        ("isLinkLocalUnicast", link_local_unicast),
        ("isGlobalUnicast", global_unicast),
    ] {
        ctx.add_function(name, move |ftx: &FunctionContext, This(a): This<Cel>| {
            Ok::<_, ExecutionError>(Cel::Bool(test(&address(ftx, &a)?)))
        });
    }
    ctx.add_function("cidr", |ftx: &FunctionContext, s: Arc<String>| {
        parse_cidr(&s).map(prefix_cel).map_err(|e| ftx.error(e))
    });
    ctx.add_function("isCIDR", |s: Arc<String>| parse_cidr(&s).is_ok());
    ctx.add_function("containsIP", contains_ip);
    ctx.add_function("containsCIDR", contains_cidr);
    ctx.add_function("masked", |ftx: &FunctionContext, This(p): This<Cel>| {
        let (addr, bits) = prefix(ftx, &p)?;
        Ok::<_, ExecutionError>(prefix_cel((mask(addr, bits), bits)))
    });
    ctx.add_function(
        "prefixLength",
        |ftx: &FunctionContext, This(p): This<Cel>| {
            Ok::<_, ExecutionError>(Cel::Int(i64::from(prefix(ftx, &p)?.1)))
        },
    );
}

/// The functions these libraries add, for the list of functions rules may call.
pub(super) const FUNCTIONS: [&str; 15] = [
    "ip",
    "isIP",
    "isCanonical",
    "family",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "cidr",
    "isCIDR",
    "containsIP",
    "containsCIDR",
    "masked",
    "prefixLength",
];

fn address_cel(addr: IpAddr) -> Cel {
    typed(IP_KEY, addr.to_string())
}

fn prefix_cel((addr, bits): (IpAddr, u8)) -> Cel {
    typed(CIDR_KEY, format!("{addr}/{bits}"))
}

fn address(ftx: &FunctionContext, v: &Cel) -> Result<IpAddr, ExecutionError> {
    typed_text(v, IP_KEY)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| ftx.error("no such overload: not an IP address"))
}

fn prefix(ftx: &FunctionContext, v: &Cel) -> Result<(IpAddr, u8), ExecutionError> {
    typed_text(v, CIDR_KEY)
        .and_then(|s| parse_cidr(s).ok())
        .ok_or_else(|| ftx.error("no such overload: not a CIDR"))
}

/// An address as kube-apiserver's `ip()` takes it.
pub fn parse_ip(s: &str) -> Result<IpAddr, String> {
    if s.contains('%') {
        return Err(format!("IP address with zone value is not allowed: {s}"));
    }
    let addr: IpAddr = s
        .parse()
        .map_err(|_| format!("IP Address {s:?} parse error during conversion from string"))?;
    match addr {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => {
            Err(format!("IPv4-mapped IPv6 address is not allowed: {s}"))
        }
        _ => Ok(addr),
    }
}

/// A prefix (`address/length`) as kube-apiserver's `cidr()` takes it.
pub fn parse_cidr(s: &str) -> Result<(IpAddr, u8), String> {
    let invalid = || format!("network address parse error during conversion from string: {s:?}");
    let (addr, bits) = s.split_once('/').ok_or_else(invalid)?;
    let addr = parse_ip(addr)?;
    let leading_zero = bits.len() > 1 && bits.starts_with('0');
    let bits: u8 = match bits.parse() {
        Ok(b) if !leading_zero && bits.bytes().all(|c| c.is_ascii_digit()) => b,
        _ => return Err(invalid()),
    };
    if bits > width(addr) {
        return Err(invalid());
    }
    Ok((addr, bits))
}

fn width(addr: IpAddr) -> u8 {
    if addr.is_ipv4() {
        32
    } else {
        128
    }
}

/// `addr` with every bit past the first `bits` cleared.
fn mask(addr: IpAddr, bits: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let keep = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & keep).into())
        }
        IpAddr::V6(v6) => {
            let keep = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & keep).into())
        }
    }
}

fn contains_ip(ftx: &FunctionContext, This(p): This<Cel>, Arguments(args): Arguments) -> Answer {
    let (net, bits) = prefix(ftx, &p)?;
    let addr = match &args[..] {
        [Cel::String(s)] => parse_ip(s).map_err(|e| ftx.error(e))?,
        [other] => address(ftx, other)?,
        _ => return Err(ftx.error("expected one argument")),
    };
    let same_family = addr.is_ipv4() == net.is_ipv4();
    Ok(Cel::Bool(
        same_family && mask(addr, bits) == mask(net, bits),
    ))
}

fn contains_cidr(ftx: &FunctionContext, This(p): This<Cel>, Arguments(args): Arguments) -> Answer {
    let (net, bits) = prefix(ftx, &p)?;
    let (other, other_bits) = match &args[..] {
        [Cel::String(s)] => parse_cidr(s).map_err(|e| ftx.error(e))?,
        [other] => prefix(ftx, other)?,
        _ => return Err(ftx.error("expected one argument")),
    };
    let same_family = other.is_ipv4() == net.is_ipv4();
    Ok(Cel::Bool(
        same_family && bits <= other_bits && mask(other, bits) == mask(net, bits),
    ))
}

fn link_local_multicast(addr: &IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    }
}

fn link_local_unicast(addr: &IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// Go's notion: private and unique-local addresses count; the unspecified, loopback,
/// multicast, link-local and IPv4 broadcast addresses do not.
fn global_unicast(addr: &IpAddr) -> bool {
    let broadcast = matches!(addr, IpAddr::V4(v4) if v4.is_broadcast());
    !(addr.is_unspecified()
        || addr.is_loopback()
        || addr.is_multicast()
        || link_local_unicast(addr)
        || broadcast)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_as_strictly_as_kube_apiserver_parses_them() {
        assert!(parse_ip("192.168.0.1").is_ok());
        assert!(parse_ip("2001:db8::1").is_ok());
        for bad in [
            "192.168.0.01",
            "::ffff:1.2.3.4",
            "fe80::1%eth0",
            "1.2.3",
            "",
            "1.2.3.4/8",
        ] {
            assert!(parse_ip(bad).is_err(), "{bad:?} parsed");
        }
        assert!(parse_cidr("10.0.0.0/8").is_ok());
        for bad in [
            "10.0.0.0/33",
            "10.0.0.0/08",
            "10.0.0.0",
            "10.0.0.0/",
            "::/129",
        ] {
            assert!(parse_cidr(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn address_classes_follow_go() {
        let class = |s: &str| {
            let a: IpAddr = s.parse().unwrap();
            (
                link_local_multicast(&a),
                link_local_unicast(&a),
                global_unicast(&a),
            )
        };
        assert_eq!(class("224.0.0.251"), (true, false, false));
        assert_eq!(class("ff02::fb"), (true, false, false));
        assert_eq!(class("169.254.1.1"), (false, true, false));
        assert_eq!(class("fe80::1"), (false, true, false));
        assert_eq!(class("10.0.0.1"), (false, false, true));
        assert_eq!(class("fd00::1"), (false, false, true));
        assert_eq!(class("255.255.255.255"), (false, false, false));
        assert_eq!(
            mask("10.1.2.3".parse().unwrap(), 8),
            "10.0.0.0".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            mask("10.1.2.3".parse().unwrap(), 0),
            "0.0.0.0".parse::<IpAddr>().unwrap()
        );
    }
}
