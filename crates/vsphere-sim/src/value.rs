//! vSphere values: managed object references, data objects, arrays, enums and scalars, and
//! their SOAP encoding.
//!
//! A value is written either as a field of a data object (`<name>…</name>`, arrays as
//! repeated elements) or where the schema says `xsd:anyType` (PropertyCollector's `val`,
//! `Fetch`'s result), which needs an `xsi:type` on everything.

use chrono::{DateTime, SecondsFormat, Utc};
use std::borrow::Cow;
use std::fmt::Write;
use std::sync::Arc;

/// A managed object reference (`<obj type="VirtualMachine">vm-42</obj>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Moref {
    /// The type, borrowed from [`MANAGED_TYPES`] when it is one of them (see [`type_name`]).
    pub ty: Name,
    pub value: String,
}

impl Moref {
    pub fn new(ty: &str, value: &str) -> Self {
        Moref {
            ty: type_name(ty),
            value: value.to_string(),
        }
    }
}

/// Kept (see `persist`) as `["Type", "value"]`.
impl serde::Serialize for Moref {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (&*self.ty, &self.value).serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Moref {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (ty, value) = <(String, String)>::deserialize(d)?;
        Ok(Moref::new(&ty, &value))
    }
}

/// The managed object types the simulator has or clients name.
pub const MANAGED_TYPES: &[&str] = &[
    "VirtualMachine",
    "Folder",
    "Datacenter",
    "Datastore",
    "HostSystem",
    "ResourcePool",
    "ClusterComputeResource",
    "ComputeResource",
    "Network",
    "DistributedVirtualPortgroup",
    "VmwareDistributedVirtualSwitch",
    "DistributedVirtualSwitch",
    "OpaqueNetwork",
    "VirtualApp",
    "StoragePod",
    "Task",
    "VirtualMachineSnapshot",
    "ContainerView",
    "ListView",
    "InventoryView",
    "PropertyCollector",
    "PropertyFilter",
    "ServiceInstance",
    "SessionManager",
    "AuthorizationManager",
    "ViewManager",
    "SearchIndex",
    "CustomFieldsManager",
    "EventManager",
    "TaskManager",
    "EventHistoryCollector",
    "TaskHistoryCollector",
    "HostDatastoreBrowser",
    "HostStorageSystem",
    "FileManager",
    "VirtualDiskManager",
    "OvfManager",
    "LicenseManager",
    "ManagedEntity",
];

/// A type name, borrowed when it is a known managed object type: every reference carries
/// one, and a VM holds dozens of references, so a heap string each was memory and, when
/// listing thousands, a cache miss per comparison.
pub fn type_name(ty: &str) -> Name {
    match MANAGED_TYPES.iter().find(|t| **t == ty) {
        Some(t) => Cow::Borrowed(t),
        None => Cow::Owned(ty.to_string()),
    }
}

impl std::fmt::Display for Moref {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.ty, self.value)
    }
}

/// A field, property or type name. Nearly every one is a literal of the schema, kept
/// borrowed: a VM holds hundreds of them, and a heap string each was most of its memory.
pub type Name = Cow<'static, str>;

pub use crate::data::Data;

/// Any vSphere value.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Str(String),
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Time(DateTime<Utc>),
    /// An enum value with its enum type name (`VirtualMachinePowerState`).
    Enum(&'static str, Name),
    Mor(Moref),
    /// Shared copy-on-write: VMs built from one model or cloned from one template hold the
    /// same devices, guest and statistics objects, so one copy serves them all until a
    /// mutation (through [`Val::data_mut`], which copies only what is shared) sets it apart.
    Data(Arc<Data>),
    /// A list, with the wire name of its item type (`string`, `ManagedObjectReference`,
    /// `VirtualDevice`), which names the `ArrayOf…` type.
    Array(&'static str, Vec<Val>),
    /// A value in a field the schema declares `xsd:anyType` (`TaskInfo.result`,
    /// `OptionValue.value`): written with its `xsi:type` wherever it appears.
    Any(Box<Val>),
}

/// Marks a value as sitting in an `xsd:anyType` field.
pub fn any(v: impl Into<Val>) -> Val {
    Val::Any(Box::new(v.into()))
}

impl From<&str> for Val {
    fn from(s: &str) -> Self {
        Val::Str(s.to_string())
    }
}
impl From<String> for Val {
    fn from(s: String) -> Self {
        Val::Str(s)
    }
}
impl From<bool> for Val {
    fn from(b: bool) -> Self {
        Val::Bool(b)
    }
}
impl From<i32> for Val {
    fn from(n: i32) -> Self {
        Val::Int(n)
    }
}
impl From<i64> for Val {
    fn from(n: i64) -> Self {
        Val::Long(n)
    }
}
impl From<Moref> for Val {
    fn from(m: Moref) -> Self {
        Val::Mor(m)
    }
}
impl From<Data> for Val {
    fn from(d: Data) -> Self {
        Val::Data(Arc::new(d))
    }
}
impl From<DateTime<Utc>> for Val {
    fn from(t: DateTime<Utc>) -> Self {
        Val::Time(t)
    }
}

/// A list of references.
pub fn mor_array(items: impl IntoIterator<Item = Moref>) -> Val {
    Val::Array(
        "ManagedObjectReference",
        items.into_iter().map(Val::Mor).collect(),
    )
}

/// A list of strings.
pub fn string_array<S: Into<String>>(items: impl IntoIterator<Item = S>) -> Val {
    Val::Array(
        "string",
        items.into_iter().map(|s| Val::Str(s.into())).collect(),
    )
}

impl Val {
    /// The `xsi:type` of the value where the schema allows any type.
    pub fn xsi_type(&self) -> Name {
        match self {
            Val::Str(_) => "xsd:string".into(),
            Val::Bool(_) => "xsd:boolean".into(),
            Val::Int(_) => "xsd:int".into(),
            Val::Long(_) => "xsd:long".into(),
            Val::Double(_) => "xsd:double".into(),
            Val::Time(_) => "xsd:dateTime".into(),
            Val::Enum(ty, _) => (*ty).into(),
            Val::Mor(_) => "ManagedObjectReference".into(),
            Val::Data(d) => d.ty.clone(),
            Val::Any(inner) => inner.xsi_type(),
            Val::Array(item, _) => {
                let mut chars = item.chars();
                let first = chars.next().map(|c| c.to_ascii_uppercase()).unwrap_or('X');
                format!("ArrayOf{first}{}", chars.as_str()).into()
            }
        }
    }

    /// The value at a dotted path (`runtime.powerState`) inside this value.
    pub fn path(&self, path: &str) -> Option<&Val> {
        path.split('.')
            .filter(|s| !s.is_empty())
            .try_fold(self, |v, seg| match v {
                Val::Data(d) => d.get(seg),
                Val::Any(inner) => match &**inner {
                    Val::Data(d) => d.get(seg),
                    _ => None,
                },
                _ => None,
            })
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Val::Str(s) => Some(s),
            Val::Enum(_, s) => Some(s),
            Val::Any(inner) => inner.as_str(),
            _ => None,
        }
    }

    /// The data object this value is, if it is one.
    pub fn as_data(&self) -> Option<&Data> {
        match self {
            Val::Data(d) => Some(d),
            _ => None,
        }
    }

    /// The data object this value is, to change: a copy of it first when others share it.
    pub fn data_mut(&mut self) -> Option<&mut Data> {
        match self {
            Val::Data(d) => Some(Arc::make_mut(d)),
            _ => None,
        }
    }

    /// Gives back the spare capacity of the lists this value alone holds (fields and array
    /// items), whose growth by doubling left up to half of each unused; shared objects are
    /// left as they are.
    pub fn compact(&mut self) {
        match self {
            Val::Data(d) => {
                if let Some(d) = Arc::get_mut(d) {
                    d.compact();
                }
            }
            Val::Array(_, items) => {
                items.shrink_to_fit();
                items.iter_mut().for_each(Val::compact);
            }
            Val::Any(inner) => inner.compact(),
            _ => {}
        }
    }

    /// Whether two values are equal, comparing data objects by identity (shallow: for
    /// telling which fields of a new object differ from its base's, children done first).
    pub fn same(&self, other: &Val) -> bool {
        match (self, other) {
            (Val::Data(a), Val::Data(b)) => Arc::ptr_eq(a, b),
            (Val::Array(ta, a), Val::Array(tb, b)) => {
                ta == tb && a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
            }
            (Val::Any(a), Val::Any(b)) => a.same(b),
            (a, b) => a == b,
        }
    }

    pub fn as_mor(&self) -> Option<&Moref> {
        match self {
            Val::Mor(m) => Some(m),
            Val::Any(inner) => inner.as_mor(),
            _ => None,
        }
    }

    /// The references a value holds (itself, or the items of a reference list).
    /// The references in a reference or an array of them, borrowed.
    pub fn mor_refs(&self) -> Vec<&Moref> {
        match self {
            Val::Mor(m) => vec![m],
            Val::Array(_, items) => items.iter().filter_map(Val::as_mor).collect(),
            _ => Vec::new(),
        }
    }

    pub fn morefs(&self) -> Vec<Moref> {
        self.mor_refs().into_iter().cloned().collect()
    }
}

/// Escapes text for XML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape_into(&mut out, s);
    out
}

/// Appends `s` to `out`, escaped for XML. Most text (names, references, enums) has nothing
/// to escape and is copied whole: a response of ten thousand VMs writes tens of thousands of
/// such strings, and one allocation each was a measurable part of listing them.
pub fn escape_into(out: &mut String, s: &str) {
    if !s
        .bytes()
        .any(|b| matches!(b, b'&' | b'<' | b'>' | b'"' | b'\''))
    {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
}

/// Appends the text of a scalar value; false for a value that is not one.
fn write_scalar(out: &mut String, v: &Val) -> bool {
    match v {
        Val::Str(s) => escape_into(out, s),
        Val::Enum(_, s) => escape_into(out, s),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Val::Long(n) => {
            let _ = write!(out, "{n}");
        }
        Val::Double(n) => {
            let _ = write!(out, "{n}");
        }
        Val::Time(t) => out.push_str(&t.to_rfc3339_opts(SecondsFormat::Micros, true)),
        Val::Mor(m) => escape_into(out, &m.value),
        _ => return false,
    }
    true
}

/// Opens element `name`, with `xsi:type` when asked or when the value is a data object.
fn open_element(out: &mut String, name: &str, value: &Val, typed: bool) {
    out.push('<');
    out.push_str(name);
    if typed || matches!(value, Val::Data(_)) {
        out.push_str(" xsi:type=\"");
        escape_into(out, &value.xsi_type());
        out.push('"');
    }
}

fn close_element(out: &mut String, name: &str) {
    out.push_str("</");
    out.push_str(name);
    out.push('>');
}

/// Writes `value` as element `name`. `typed` adds `xsi:type` (anyType positions); data
/// objects always carry it, since their fields may be declared as a base type.
pub fn write_element(out: &mut String, name: &str, value: &Val, typed: bool) {
    if let Val::Any(inner) = value {
        return write_element(out, name, inner, true);
    }
    open_element(out, name, value, typed);
    match value {
        Val::Mor(m) => {
            out.push_str(" type=\"");
            escape_into(out, &m.ty);
            out.push_str("\">");
            escape_into(out, &m.value);
        }
        Val::Data(d) => {
            out.push('>');
            write_fields(out, d);
        }
        Val::Array(item, items) => {
            // Only in anyType positions is an array one element (`ArrayOfX` of `<X>`s); as a
            // field it is repeated elements, written by `write_fields`.
            out.push('>');
            for v in items {
                write_element(out, item, v, matches!(v, Val::Data(_)));
            }
        }
        scalar => {
            out.push('>');
            write_scalar(out, scalar);
        }
    }
    close_element(out, name);
}

/// Writes the fields of a data object; list fields as repeated elements.
pub fn write_fields(out: &mut String, data: &Data) {
    for (name, value) in data.fields() {
        match value {
            Val::Array(_, items) => {
                for item in items {
                    write_element(out, name, item, false);
                }
            }
            v => write_element(out, name, v, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_types_are_borrowed_and_others_kept() {
        assert!(matches!(
            type_name("VirtualMachine"),
            Cow::Borrowed("VirtualMachine")
        ));
        assert!(matches!(
            Moref::new("Folder", "group-d1").ty,
            Cow::Borrowed("Folder")
        ));
        let custom = type_name("SomethingNew");
        assert!(matches!(custom, Cow::Owned(_)));
        assert_eq!(custom, "SomethingNew");
        assert_eq!(
            Moref::new("SomethingNew", "x"),
            Moref::new("SomethingNew", "x")
        );
    }

    #[test]
    fn any_typed_values_carry_xsi_types() {
        let mut out = String::new();
        write_element(&mut out, "val", &Val::Str("a&b".into()), true);
        assert_eq!(out, r#"<val xsi:type="xsd:string">a&amp;b</val>"#);
        out.clear();
        write_element(
            &mut out,
            "val",
            &mor_array([Moref::new("Folder", "group-v3")]),
            true,
        );
        assert_eq!(
            out,
            r#"<val xsi:type="ArrayOfManagedObjectReference"><ManagedObjectReference type="Folder">group-v3</ManagedObjectReference></val>"#
        );
    }

    #[test]
    fn data_fields_repeat_list_elements() {
        let d = Data::new("GuestNicInfo")
            .with("network", "VM Network")
            .with("ipAddress", string_array(["10.0.0.1", "fe80::1"]));
        let mut out = String::new();
        write_element(&mut out, "net", &Val::from(d), false);
        assert_eq!(
            out,
            r#"<net xsi:type="GuestNicInfo"><network>VM Network</network><ipAddress>10.0.0.1</ipAddress><ipAddress>fe80::1</ipAddress></net>"#
        );
    }

    #[test]
    fn compact_gives_back_spare_capacity_of_unshared_lists_only() {
        let grown = || {
            let mut d = Data::new("T");
            for i in 0..5 {
                d.set(format!("f{i}"), i);
            }
            d
        };
        let inner = grown();
        assert!(inner.capacity() > 5);
        let shared = Val::from(grown());
        let mut v = Val::from(
            Data::new("Outer")
                .with("own", inner)
                .with("shared", shared.clone()),
        );
        v.compact();
        let capacity = |v: Option<&Val>| v.and_then(Val::as_data).map(Data::capacity);
        assert_eq!(capacity(v.path("own")), Some(5));
        assert!(
            capacity(v.path("shared")) > Some(5),
            "a shared object is left alone"
        );
    }

    #[test]
    fn data_mut_copies_a_shared_object_before_changing_it() {
        let a = Val::from(Data::new("T").with("x", 1));
        let mut b = a.clone();
        b.data_mut().unwrap().set("x", 2);
        assert_eq!(a.path("x"), Some(&Val::Int(1)));
        assert_eq!(b.path("x"), Some(&Val::Int(2)));
    }

    #[test]
    fn paths_walk_nested_data() {
        let v = Val::from(Data::new("VirtualMachineSummary").with(
            "runtime",
            Data::new("VirtualMachineRuntimeInfo").with(
                "powerState",
                Val::Enum("VirtualMachinePowerState", "poweredOn".into()),
            ),
        ));
        assert_eq!(
            v.path("runtime.powerState").and_then(Val::as_str),
            Some("poweredOn")
        );
        assert!(v.path("runtime.nothing").is_none());
    }
}
