//! How a vSphere value is written to the durable store and read back: JSON that keeps what
//! the SOAP encoding needs and plain JSON would lose (an `int` apart from a `long`, an enum's
//! type, a reference's type, a data object's type and field order, an array's item type, an
//! `xsd:anyType` slot).
//!
//! Strings, booleans and `int`s are written bare, as most values are one of them; every
//! other value is a one-key object naming its kind:
//! `{"l": 5}` long, `{"d": 1.5}` double, `{"t": "2026-…Z"}` time, `{"e": ["Type", "value"]}`
//! enum, `{"m": ["Type", "value"]}` reference, `{"o": "Type", "f": ["name", v, …]}` data
//! object (fields flat, in order), `{"a": "item", "v": […]}` array, `{"any": v}`.
//!
//! Names read back (types, field names, enum values) are interned: the simulator keeps them
//! as `&'static str`, as the literals of the schema they nearly always are, so ten thousand
//! VMs read back hold one copy of each name, as ten thousand VMs generated do.

use crate::data::Data;
use crate::value::{type_name, Moref, Name, Val};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

/// A stored value that is not one this codec writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a stored vSphere value cannot be read: {0}")]
pub struct Corrupt(pub String);

/// The stored form of `v`.
pub fn encode(v: &Val) -> Value {
    match v {
        Val::Str(s) => Value::String(s.clone()),
        Val::Bool(b) => Value::Bool(*b),
        Val::Int(n) => json!(n),
        Val::Long(n) => json!({"l": n}),
        Val::Double(d) => json!({"d": d}),
        Val::Time(t) => json!({"t": t.to_rfc3339_opts(SecondsFormat::AutoSi, true)}),
        Val::Enum(ty, value) => json!({"e": [ty, value]}),
        Val::Mor(m) => json!({"m": [m.ty, m.value]}),
        Val::Data(d) => encode_data(d),
        Val::Array(item, items) => {
            json!({"a": item, "v": items.iter().map(encode).collect::<Vec<_>>()})
        }
        Val::Any(inner) => json!({"any": encode(inner)}),
    }
}

/// The stored form of a data object (a managed object's properties are one).
pub fn encode_data(d: &Data) -> Value {
    encode_data_with(d, |_, _| None)
}

/// [`encode_data`], with the stored form of some fields given by `special` (`None`: the
/// usual one), as a keeper stores long lists apart.
pub fn encode_data_with(d: &Data, mut special: impl FnMut(&str, &Val) -> Option<Value>) -> Value {
    let mut fields = Vec::with_capacity(d.len() * 2);
    for (name, value) in d.fields() {
        fields.push(Value::String(name.to_string()));
        fields.push(special(name, value).unwrap_or_else(|| encode(value)));
    }
    json!({"o": d.ty, "f": fields})
}

/// A value read back from its stored form.
pub fn decode(v: &Value) -> Result<Val, Corrupt> {
    match v {
        Value::String(s) => Ok(Val::Str(s.clone())),
        Value::Bool(b) => Ok(Val::Bool(*b)),
        Value::Number(n) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Val::Int)
            .ok_or_else(|| Corrupt(format!("{n} is not an int"))),
        Value::Object(o) => decode_tagged(o),
        other => Err(Corrupt(format!("unexpected {other}"))),
    }
}

fn decode_tagged(o: &Map<String, Value>) -> Result<Val, Corrupt> {
    if let Some(fields) = o.get("f") {
        return Ok(Val::Data(Arc::new(decode_fields(o.get("o"), fields)?)));
    }
    if let Some(items) = o.get("v") {
        let item = intern(text(o.get("a"), "an array's item type")?);
        let items = items
            .as_array()
            .ok_or_else(|| Corrupt("an array's items are not a list".into()))?
            .iter()
            .map(decode)
            .collect::<Result<_, _>>()?;
        return Ok(Val::Array(item, items));
    }
    let Some((tag, value)) = o.iter().next().filter(|_| o.len() == 1) else {
        return Err(Corrupt(format!(
            "unknown value {}",
            Value::Object(o.clone())
        )));
    };
    match tag.as_str() {
        "l" => value.as_i64().map(Val::Long),
        "d" => value.as_f64().map(Val::Double),
        "t" => value
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| Val::Time(t.with_timezone(&Utc))),
        "e" => pair(value).map(|(ty, v)| Val::Enum(intern(ty), name(v))),
        "m" => pair(value).map(|(ty, v)| Val::Mor(Moref::new(ty, v))),
        "any" => return Ok(Val::Any(Box::new(decode(value)?))),
        _ => None,
    }
    .ok_or_else(|| Corrupt(format!("{tag}: {value} cannot be read")))
}

/// A data object read back from its type and flat fields.
pub fn decode_fields(ty: Option<&Value>, fields: &Value) -> Result<Data, Corrupt> {
    let ty = name(text(ty, "a data object's type")?);
    let flat = fields
        .as_array()
        .ok_or_else(|| Corrupt("a data object's fields are not a list".into()))?;
    if flat.len() % 2 != 0 {
        return Err(Corrupt(format!(
            "data object {ty}: a field without a value"
        )));
    }
    let mut out = Vec::with_capacity(flat.len() / 2);
    for pair in flat.chunks_exact(2) {
        let field = name(text(Some(&pair[0]), "a field's name")?);
        out.push((field, decode(&pair[1])?));
    }
    Ok(Data::from_fields(ty, out))
}

fn text<'a>(v: Option<&'a Value>, what: &str) -> Result<&'a str, Corrupt> {
    v.and_then(Value::as_str)
        .ok_or_else(|| Corrupt(format!("{what} is missing")))
}

fn pair(v: &Value) -> Option<(&str, &str)> {
    match v.as_array()?.as_slice() {
        [a, b] => Some((a.as_str()?, b.as_str()?)),
        _ => None,
    }
}

/// A name read back, borrowed from the managed types or the interned names.
fn name(s: &str) -> Name {
    match type_name(s) {
        Name::Borrowed(known) => Name::Borrowed(known),
        Name::Owned(_) => Name::Borrowed(intern(s)),
    }
}

/// `s` as a string that lives as long as the process, one copy per distinct text.
///
/// Why leak: the simulator's values hold names as `&'static str` (the schema's literals),
/// and the names a store holds are that same small set (types, fields, enum values), so a
/// restore adds each once, bounded by the store's own size, however often it runs.
pub fn intern(s: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(known) = names.get(s) {
        return known;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    names.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::any;

    fn round_trip(v: Val) {
        let stored = encode(&v);
        let text = serde_json::to_string(&stored).expect("JSON");
        let back = decode(&serde_json::from_str(&text).expect("JSON")).expect("readable");
        assert_eq!(back, v, "{text}");
    }

    #[test]
    fn every_kind_of_value_comes_back_as_it_was() {
        round_trip(Val::Str("vm-1".into()));
        round_trip(Val::Bool(true));
        round_trip(Val::Int(-7));
        round_trip(Val::Long(1 << 40));
        round_trip(Val::Long(3));
        round_trip(Val::Double(0.25));
        round_trip(Val::Time(
            DateTime::parse_from_rfc3339("2026-12-01T10:11:12.123456Z")
                .unwrap()
                .with_timezone(&Utc),
        ));
        round_trip(Val::Enum("VirtualMachinePowerState", "poweredOn".into()));
        round_trip(Val::Mor(Moref::new("VirtualMachine", "vm-42")));
        round_trip(Val::Mor(Moref::new("SomethingNew", "x-1")));
        round_trip(any(Val::Long(9)));
        round_trip(Val::Array(
            "ManagedObjectReference",
            vec![Val::Mor(Moref::new("Datastore", "datastore-1"))],
        ));
        let disk = Data::new("VirtualDisk")
            .with("key", 2000)
            .with("capacityInKB", Val::Long(1024))
            .with(
                "backing",
                Data::new("VirtualDiskFlatVer2BackingInfo").with("fileName", "[ds] a.vmdk"),
            );
        round_trip(Val::Data(Arc::new(disk)));
    }

    #[test]
    fn an_int_and_a_long_of_the_same_number_stay_apart() {
        assert_eq!(encode(&Val::Int(3)), json!(3));
        assert_eq!(encode(&Val::Long(3)), json!({"l": 3}));
        assert_ne!(decode(&json!({"l": 3})), decode(&json!(3)));
    }

    #[test]
    fn names_read_back_are_one_copy_each() {
        let a = intern("someFieldNotInTheSchema");
        let b = intern(&String::from("someFieldNotInTheSchema"));
        assert!(std::ptr::eq(a, b));
        assert!(matches!(name("VirtualMachine"), Name::Borrowed(_)));
    }

    #[test]
    fn what_this_codec_never_wrote_is_refused() {
        for bad in [
            json!(null),
            json!(1.5),
            json!({"q": 1}),
            json!({"o": "T", "f": ["x"]}),
            json!({"e": ["only"]}),
            json!({"t": "yesterday"}),
            json!(1u64 << 40),
        ] {
            assert!(decode(&bad).is_err(), "{bad}");
        }
    }
}
