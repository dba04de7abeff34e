//! A host's addresses, from the OpenStack-style network data metal3 hands to a host (the
//! `networkData` key of the Secret `spec.networkData` names): `networks` of {id, link, type,
//! ip_address, …}. SIP picks a service's address on each host by network `id`
//! (`nodeInterfaceId`). JSON or YAML, as upstream reads both.

use serde::Deserialize;

#[derive(Debug, Deserialize, Default)]
struct NetworkData {
    #[serde(default)]
    networks: Vec<Network>,
}

#[derive(Debug, Deserialize)]
struct Network {
    #[serde(default)]
    id: String,
    #[serde(default)]
    ip_address: Option<String>,
}

/// The address of network `id` in `data`, or why there is none.
pub fn address(data: &[u8], id: &str) -> Result<String, String> {
    // YAML is a superset of JSON: one parser reads both.
    let parsed: NetworkData =
        serde_yaml::from_slice(data).map_err(|e| format!("unreadable network data: {e}"))?;
    parsed
        .networks
        .into_iter()
        .find(|n| n.id == id)
        .and_then(|n| n.ip_address)
        .filter(|ip| !ip.is_empty())
        .ok_or_else(|| format!("no address on network {id:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_is_found_by_network_id_in_json_or_yaml() {
        let json = br#"{"links":[{"id":"bond0.41","type":"vlan"}],"networks":[
            {"id":"oam-ipv6","link":"bond0.41","type":"ipv6","ip_address":"fd00::1"},
            {"id":"oam-ipv4","link":"bond0.41","type":"ipv4","ip_address":"32.68.51.139","netmask":"255.255.255.128"}]}"#;
        assert_eq!(address(json, "oam-ipv4").unwrap(), "32.68.51.139");
        let yaml = b"networks:\n- id: pxe-ipv4\n  ip_address: 172.30.0.11\n";
        assert_eq!(address(yaml, "pxe-ipv4").unwrap(), "172.30.0.11");
        assert_eq!(
            address(yaml, "oam-ipv4").unwrap_err(),
            "no address on network \"oam-ipv4\""
        );
        assert!(address(b"[not: {json", "x")
            .unwrap_err()
            .starts_with("unreadable"));
    }
}
