//! What an OVF descriptor says of the VM it describes, as far as the simulator reads it.

/// What an OVF descriptor says of its first VirtualSystem.
#[derive(Debug, Default, PartialEq)]
pub(super) struct OvfSystem {
    pub(super) name: Option<String>,
    pub(super) cpus: Option<i64>,
    pub(super) memory_mb: Option<i64>,
}

/// Reads an OVF descriptor's VM name (`ovf:id`, or its `Name`), CPUs (resource type 3) and
/// memory (resource type 4, in its allocation units); anything unreadable is left out, so the
/// VM gets the simulator's defaults.
pub(super) fn read_ovf(bytes: &[u8]) -> OvfSystem {
    let mut out = OvfSystem::default();
    let Ok(doc) = std::str::from_utf8(bytes).map(roxmltree::Document::parse) else {
        return out;
    };
    let Ok(doc) = doc else { return out };
    let named = |n: &roxmltree::Node<'_, '_>, name: &str| n.tag_name().name() == name;
    let Some(system) = doc.descendants().find(|n| named(n, "VirtualSystem")) else {
        return out;
    };
    let child = |n: roxmltree::Node<'_, '_>, name: &str| {
        n.children()
            .find(|c| named(c, name))
            .and_then(|c| c.text())
            .map(|t| t.trim().to_string())
    };
    out.name = system
        .attributes()
        .find(|a| a.name() == "id")
        .map(|a| a.value().to_string())
        .or_else(|| child(system, "Name"));
    for item in system.descendants().filter(|n| named(n, "Item")) {
        let quantity = child(item, "VirtualQuantity").and_then(|q| q.parse::<i64>().ok());
        match child(item, "ResourceType").as_deref() {
            Some("3") => out.cpus = quantity,
            Some("4") => {
                let units = child(item, "AllocationUnits").unwrap_or_default();
                let scale = if units.contains("2^30") || units.starts_with("G") {
                    1024
                } else {
                    1
                };
                out.memory_mb = quantity.map(|q| q * scale);
            }
            _ => {}
        }
    }
    out
}
