//! Virtual devices built in one place, so a VM's generated NIC and one added by a
//! reconfiguration look alike (keys, unit numbers, labels, MAC addresses).

use crate::value::{Data, Moref, Val};

/// The key of a VM's first network adapter; the next ones count up from it.
pub(crate) const FIRST_NIC_KEY: i32 = 4000;

/// A MAC address in VMware's generated range (`00:50:56`), as vCenter assigns one.
pub(crate) fn generated_mac() -> String {
    let u = uuid::Uuid::new_v4().simple().to_string();
    format!("00:50:56:{}:{}:{}", &u[0..2], &u[2..4], &u[4..6])
}

/// What a network adapter is connected to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum NicBacking<'a> {
    /// A standard port group, by name and (when the inventory has it) its network object.
    Network {
        network: Option<&'a Moref>,
        device_name: &'a str,
    },
    /// A port of a distributed port group, by its switch's UUID and the port group's key.
    Portgroup {
        switch_uuid: &'a str,
        portgroup_key: &'a str,
    },
}

/// A network adapter of type `ty` (`VirtualVmxnet3`, `VirtualE1000`, …) with key `key`, on
/// the PCI controller (key 100) at the unit number vSphere gives it (the first NIC at 7),
/// with the backing vCenter reports for what it is connected to: a network backing naming
/// the port group, or a distributed port backing naming the switch and port group.
pub(crate) fn ethernet_card(
    ty: impl Into<crate::value::Name>,
    key: i32,
    backing: NicBacking<'_>,
    mac: &str,
) -> Data {
    let (backing, summary) = match backing {
        NicBacking::Network {
            network,
            device_name,
        } => {
            let mut b =
                Data::new("VirtualEthernetCardNetworkBackingInfo").with("deviceName", device_name);
            if let Some(n) = network {
                b = b.with("network", n.clone());
            }
            (b, device_name.to_string())
        }
        NicBacking::Portgroup {
            switch_uuid,
            portgroup_key,
        } => {
            let port = Data::new("DistributedVirtualSwitchPortConnection")
                .with("switchUuid", switch_uuid)
                .with("portgroupKey", portgroup_key);
            let b = Data::new("VirtualEthernetCardDistributedVirtualPortBackingInfo")
                .with("port", port);
            (b, format!("DVSwitch: {switch_uuid}"))
        }
    };
    Data::new(ty)
        .with("key", key)
        .with(
            "deviceInfo",
            Data::new("Description")
                .with(
                    "label",
                    format!("Network adapter {}", key - FIRST_NIC_KEY + 1),
                )
                .with("summary", summary),
        )
        .with("backing", backing)
        .with("controllerKey", 100i32)
        .with("unitNumber", 7 + key - FIRST_NIC_KEY)
        .with("addressType", "generated")
        .with("macAddress", mac)
}

/// The network object a NIC is connected to: its network backing's `network`, or the
/// distributed port group its port names (a port group's key is its managed object id, in
/// vCenter as here, so no lookup is needed).
pub(crate) fn nic_network(device: &Val) -> Option<Moref> {
    if let Some(Val::Mor(n)) = device.path("backing.network") {
        return Some(n.clone());
    }
    let key = device
        .path("backing.port.portgroupKey")
        .and_then(Val::as_str)?;
    Some(Moref::new("DistributedVirtualPortgroup", key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nics_count_their_labels_and_unit_numbers_from_the_first() {
        let on = NicBacking::Network {
            network: None,
            device_name: "VM Network",
        };
        let second = ethernet_card("VirtualE1000", FIRST_NIC_KEY + 1, on, "m");
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

    #[test]
    fn a_nic_on_a_distributed_port_group_names_its_port_and_network() {
        let on = NicBacking::Portgroup {
            switch_uuid: "50 1e",
            portgroup_key: "dvportgroup-9",
        };
        let nic = Val::from(ethernet_card("VirtualVmxnet3", FIRST_NIC_KEY, on, "m"));
        assert_eq!(
            nic.path("backing.port.switchUuid").and_then(Val::as_str),
            Some("50 1e")
        );
        assert_eq!(
            nic.path("deviceInfo.summary").and_then(Val::as_str),
            Some("DVSwitch: 50 1e")
        );
        assert_eq!(
            nic_network(&nic),
            Some(Moref::new("DistributedVirtualPortgroup", "dvportgroup-9"))
        );
    }
}
