//! The documents a client reads first: `/redfish` (the versions), the service root, the
//! OData service document and `$metadata` (the CSDL naming every schema the service's
//! resources use, which validators resolve against DMTF's published schemas).

use super::link;
use serde_json::{json, Value};

/// The Redfish specification version the service follows.
pub const REDFISH_VERSION: &str = "1.18.0";

/// Every schema the service's resources use: its namespace and versioned namespace.
pub const SCHEMAS: &[(&str, Option<&str>)] = &[
    ("ServiceRoot", Some("v1_16_0")),
    ("ComputerSystemCollection", None),
    ("ComputerSystem", Some("v1_20_0")),
    ("ProcessorCollection", None),
    ("Processor", Some("v1_18_0")),
    ("MemoryCollection", None),
    ("Memory", Some("v1_17_0")),
    ("StorageCollection", None),
    ("Storage", Some("v1_15_0")),
    ("DriveCollection", None),
    ("Drive", Some("v1_17_0")),
    ("EthernetInterfaceCollection", None),
    ("EthernetInterface", Some("v1_11_0")),
    ("Bios", Some("v1_2_1")),
    ("Settings", Some("v1_3_5")),
    ("SecureBoot", Some("v1_1_0")),
    ("ManagerCollection", None),
    ("Manager", Some("v1_17_0")),
    ("VirtualMediaCollection", None),
    ("VirtualMedia", Some("v1_6_0")),
    ("ChassisCollection", None),
    ("Chassis", Some("v1_23_0")),
    ("SessionService", Some("v1_1_9")),
    ("SessionCollection", None),
    ("Session", Some("v1_7_0")),
    ("AccountService", Some("v1_15_0")),
    ("ManagerAccountCollection", None),
    ("ManagerAccount", Some("v1_12_0")),
    ("RoleCollection", None),
    ("Role", Some("v1_3_2")),
    ("UpdateService", Some("v1_11_0")),
    ("SoftwareInventoryCollection", None),
    ("SoftwareInventory", Some("v1_10_0")),
    ("TaskService", Some("v1_2_0")),
    ("TaskCollection", None),
    ("Message", Some("v1_2_0")),
    ("Resource", None),
];

/// `/redfish`: the one version there is.
pub fn versions() -> Value {
    json!({"v1": format!("{}/", crate::ROOT)})
}

pub fn service_root(uuid: &str) -> Value {
    let p = |tail: &str| link(&format!("{}/{tail}", crate::ROOT));
    json!({
        "@odata.type": "#ServiceRoot.v1_16_0.ServiceRoot",
        "@odata.id": format!("{}/", crate::ROOT),
        "Id": "RootService",
        "Name": "Root Service",
        "RedfishVersion": REDFISH_VERSION,
        "UUID": uuid,
        "Product": "infrasim",
        "Vendor": "infrasim",
        "Systems": p("Systems"),
        "Chassis": p("Chassis"),
        "Managers": p("Managers"),
        "SessionService": p("SessionService"),
        "AccountService": p("AccountService"),
        "UpdateService": p("UpdateService"),
        "Tasks": p("TaskService"),
        "Links": {"Sessions": p("SessionService/Sessions")},
        "ProtocolFeaturesSupported": {
            "ExcerptQuery": false,
            "OnlyMemberQuery": false,
            "FilterQuery": false,
            "SelectQuery": false,
            "ExpandQuery": {"ExpandAll": false, "Levels": false, "Links": false, "NoLinks": false},
        },
    })
}

/// The OData service document: the root's top-level resources.
pub fn odata() -> Value {
    let entry = |name: &str, url: String| json!({"name": name, "kind": "Singleton", "url": url});
    // The service root's property names, and where each leads.
    let top = [
        ("Systems", "Systems"),
        ("Chassis", "Chassis"),
        ("Managers", "Managers"),
        ("SessionService", "SessionService"),
        ("AccountService", "AccountService"),
        ("UpdateService", "UpdateService"),
        ("Tasks", "TaskService"),
    ];
    let mut value = vec![entry("Service", format!("{}/", crate::ROOT))];
    value.extend(
        top.iter()
            .map(|(name, path)| entry(name, format!("{}/{path}", crate::ROOT))),
    );
    json!({"@odata.context": format!("{}/$metadata", crate::ROOT), "value": value})
}

/// `$metadata`: a reference per schema, and the service's entity container.
pub fn metadata() -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<edmx:Edmx xmlns:edmx=\"http://docs.oasis-open.org/odata/ns/edmx\" Version=\"4.0\">\n",
    );
    for (ns, version) in SCHEMAS {
        out.push_str(&format!(
            "  <edmx:Reference Uri=\"http://redfish.dmtf.org/schemas/v1/{ns}_v1.xml\">\n    <edmx:Include Namespace=\"{ns}\"/>\n"
        ));
        if let Some(v) = version {
            out.push_str(&format!("    <edmx:Include Namespace=\"{ns}.{v}\"/>\n"));
        }
        out.push_str("  </edmx:Reference>\n");
    }
    out.push_str(
        "  <edmx:DataServices>\n    <Schema xmlns=\"http://docs.oasis-open.org/odata/ns/edm\" Namespace=\"Service\">\n      <EntityContainer Name=\"Service\" Extends=\"ServiceRoot.v1_16_0.ServiceContainer\"/>\n    </Schema>\n  </edmx:DataServices>\n</edmx:Edmx>\n",
    );
    out
}
