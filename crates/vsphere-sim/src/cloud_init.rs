//! What a guest's cloud-init makes of its VM's `guestinfo.metadata` (cloud-init's VMware
//! datasource, which CAPV and most vSphere automation write): the static addresses of each
//! NIC, matched by MAC address in the metadata's network config (version 2, `ethernets`).
//! A guest that boots reports those addresses in `guest.net` instead of one from the
//! network's DHCP pool, as a real guest configured statically does.
//!
//! Metadata encoded as `base64` (or `b64`) and plain text are read; `gzip+base64` is not
//! (no gzip decoder in the simulator's dependencies), and such a guest keeps DHCP.

use crate::value::Val;
use base64::Engine;
use std::collections::HashMap;

/// The static addresses (without their prefix length) of each NIC the metadata in
/// `extra_config` (a VM's `config.extraConfig`) configures, by lower-case MAC address.
pub(crate) fn static_addresses(extra_config: Option<&Val>) -> HashMap<String, Vec<String>> {
    let Some(Val::Array(_, options)) = extra_config else {
        return HashMap::new();
    };
    let value_of = |key: &str| {
        options
            .iter()
            .find(|o| o.path("key").and_then(Val::as_str) == Some(key))
            .and_then(|o| o.path("value"))
            .and_then(Val::as_str)
    };
    let Some(metadata) = value_of("guestinfo.metadata") else {
        return HashMap::new();
    };
    let text = match value_of("guestinfo.metadata.encoding").unwrap_or("") {
        "" => Some(metadata.to_string()),
        "base64" | "b64" => base64::engine::general_purpose::STANDARD
            .decode(metadata.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
        _ => None,
    };
    text.map(|t| parse(&t)).unwrap_or_default()
}

/// [`static_addresses`] of the metadata's text (YAML, or JSON).
fn parse(text: &str) -> HashMap<String, Vec<String>> {
    let Ok(doc) = serde_yaml::from_str::<serde_json::Value>(text) else {
        return HashMap::new();
    };
    let Some(ethernets) = doc
        .pointer("/network/ethernets")
        .and_then(|e| e.as_object())
    else {
        return HashMap::new();
    };
    let mut out = HashMap::new();
    for nic in ethernets.values() {
        let Some(mac) = nic.pointer("/match/macaddress").and_then(|m| m.as_str()) else {
            continue;
        };
        let addresses: Vec<String> = nic
            .get("addresses")
            .and_then(|a| a.as_array())
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str())
            .map(|a| a.split('/').next().unwrap_or(a).to_string())
            .filter(|a| a.parse::<std::net::IpAddr>().is_ok())
            .collect();
        if !addresses.is_empty() {
            out.insert(mac.to_ascii_lowercase(), addresses);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{any, Data};

    fn extra(pairs: &[(&str, &str)]) -> Val {
        Val::Array(
            "OptionValue",
            pairs
                .iter()
                .map(|(k, v)| {
                    Val::from(
                        Data::new("OptionValue")
                            .with("key", *k)
                            .with("value", any(*v)),
                    )
                })
                .collect(),
        )
    }

    const METADATA: &str = "instance-id: \"vm1\"\nnetwork:\n  version: 2\n  ethernets:\n    id0:\n      match:\n        macaddress: \"00:50:56:AA:BB:CC\"\n      dhcp4: false\n      addresses:\n      - \"10.10.0.7/24\"\n      - \"fd00::7/64\"\n    id1:\n      match:\n        macaddress: \"00:50:56:aa:bb:cd\"\n      dhcp4: true\n";

    #[test]
    fn static_addresses_are_read_per_mac_from_base64_metadata() {
        let encoded = base64::engine::general_purpose::STANDARD.encode(METADATA);
        let ec = extra(&[
            ("guestinfo.metadata", &encoded),
            ("guestinfo.metadata.encoding", "base64"),
        ]);
        let got = static_addresses(Some(&ec));
        assert_eq!(
            got.get("00:50:56:aa:bb:cc").cloned(),
            Some(vec!["10.10.0.7".to_string(), "fd00::7".to_string()])
        );
        // A DHCP NIC has no static address.
        assert_eq!(got.len(), 1);
    }

    #[test]
    fn plain_metadata_is_read_and_unknown_encodings_are_not() {
        assert_eq!(
            static_addresses(Some(&extra(&[("guestinfo.metadata", METADATA)]))).len(),
            1
        );
        let gz = extra(&[
            ("guestinfo.metadata", "H4sI"),
            ("guestinfo.metadata.encoding", "gzip+base64"),
        ]);
        assert!(static_addresses(Some(&gz)).is_empty());
        assert!(static_addresses(None).is_empty());
    }
}
