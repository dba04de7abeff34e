//! Virtual devices built in one place, so a VM's generated NIC and one added by a
//! reconfiguration look alike (keys, unit numbers, labels, MAC addresses).

use crate::value::{Data, Moref};

/// The key of a VM's first network adapter; the next ones count up from it.
pub(crate) const FIRST_NIC_KEY: i32 = 4000;

/// A MAC address in VMware's generated range (`00:50:56`), as vCenter assigns one.
pub(crate) fn generated_mac() -> String {
    let u = uuid::Uuid::new_v4().simple().to_string();
    format!("00:50:56:{}:{}:{}", &u[0..2], &u[2..4], &u[4..6])
}

/// A network adapter of type `ty` (`VirtualVmxnet3`, `VirtualE1000`, …) with key `key`, on
/// the PCI controller (key 100) at the unit number vSphere gives it (the first NIC at 7),
/// backed by `network` under the port group name `device_name`.
pub(crate) fn ethernet_card(
    ty: impl Into<crate::value::Name>,
    key: i32,
    network: Option<Moref>,
    device_name: &str,
    mac: &str,
) -> Data {
    let mut backing =
        Data::new("VirtualEthernetCardNetworkBackingInfo").with("deviceName", device_name);
    if let Some(n) = network {
        backing = backing.with("network", n);
    }
    Data::new(ty)
        .with("key", key)
        .with(
            "deviceInfo",
            Data::new("Description")
                .with(
                    "label",
                    format!("Network adapter {}", key - FIRST_NIC_KEY + 1),
                )
                .with("summary", device_name),
        )
        .with("backing", backing)
        .with("controllerKey", 100i32)
        .with("unitNumber", 7 + key - FIRST_NIC_KEY)
        .with("addressType", "generated")
        .with("macAddress", mac)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Val;

    #[test]
    fn nics_count_their_labels_and_unit_numbers_from_the_first() {
        let second = ethernet_card("VirtualE1000", FIRST_NIC_KEY + 1, None, "VM Network", "m");
        assert_eq!(second.get("unitNumber"), Some(&Val::Int(8)));
        assert_eq!(
            second
                .get("deviceInfo")
                .and_then(|d| d.path("label"))
                .and_then(Val::as_str),
            Some("Network adapter 2")
        );
        assert!(generated_mac().starts_with("00:50:56:"));
    }
}
