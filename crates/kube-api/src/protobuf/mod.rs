//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`)
//! into the JSON form the rest of the server works on.
//!
//! kubectl's typed clients (`kubectl create namespace|configmap|deployment|…`, `kubectl run`)
//! and client-go programs send protobuf. Kubernetes wraps each object in a `runtime.Unknown`
//! envelope after the magic `k8s\0`; the object itself is a proto2 message whose field
//! numbers and JSON names are listed in [`schema`].
//!
//! Written here because no crate fits: the `k8s-pb` crate decodes into prost structs, but
//! those carry Rust field names, not the JSON names the API needs, and have no JSON encoding.
//! `k8s-pb` is used in the tests as an independent encoder to check the schema.
//!
//! A field the schema does not list is refused with a message naming it (never dropped
//! silently); JSON covers every field of every kind.

mod schema;

use base64::Engine;
use chrono::{DateTime, SecondsFormat, Utc};
use schema::{Field, Message, Ty};
use serde_json::{Map, Value};
use thiserror::Error;

/// The media type of Kubernetes protobuf.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Why a protobuf body could not be decoded.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProtoError {
    #[error("protobuf body does not start with the Kubernetes magic number")]
    NoMagic,
    #[error("truncated or malformed protobuf")]
    Malformed,
    #[error("protobuf content encoding {0:?} is not supported")]
    Encoding(String),
    #[error(
        "protobuf bodies of kind {0:?} are not supported by this server; send application/json"
    )]
    UnsupportedKind(String),
    #[error("protobuf field {number} of {message} is not supported by this server; send application/json")]
    UnknownField { message: &'static str, number: u32 },
    #[error("protobuf field {field} of {message} has the wrong wire type")]
    WireType {
        message: &'static str,
        field: &'static str,
    },
    #[error("invalid UTF-8 in protobuf string field")]
    Utf8,
    #[error("embedded JSON in protobuf field is invalid: {0}")]
    Json(String),
}

/// A decoded object: `apiVersion` and `kind` from the envelope, the rest from the message.
pub fn decode(body: &[u8]) -> Result<Value, ProtoError> {
    let rest = body.strip_prefix(b"k8s\0").ok_or(ProtoError::NoMagic)?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    let mut reader = Reader(rest);
    while let Some((number, wire)) = reader.key()? {
        match (number, wire) {
            (1, 2) => {
                let mut tm = Reader(reader.bytes()?);
                while let Some((n, w)) = tm.key()? {
                    match (n, w) {
                        (1, 2) => api_version = tm.string()?,
                        (2, 2) => kind = tm.string()?,
                        _ => tm.skip(w)?,
                    }
                }
            }
            (2, 2) => raw = reader.bytes()?,
            (3, 2) => {
                let encoding = reader.string()?;
                if !encoding.is_empty() {
                    return Err(ProtoError::Encoding(encoding));
                }
            }
            (_, w) => reader.skip(w)?,
        }
    }
    let message = schema::for_kind(&api_version, &kind)
        .ok_or_else(|| ProtoError::UnsupportedKind(kind.clone()))?;
    let mut object = Map::new();
    if !api_version.is_empty() {
        object.insert("apiVersion".into(), Value::String(api_version));
    }
    if !kind.is_empty() {
        object.insert("kind".into(), Value::String(kind));
    }
    decode_into(raw, message, &mut object)?;
    Ok(Value::Object(object))
}

/// A cursor over protobuf wire data.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, ProtoError> {
        let mut value = 0u64;
        for i in 0..10 {
            let (&b, rest) = self.0.split_first().ok_or(ProtoError::Malformed)?;
            self.0 = rest;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtoError::Malformed)
    }

    /// The next field's number and wire type, or `None` at the end.
    fn key(&mut self) -> Result<Option<(u32, u8)>, ProtoError> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| ProtoError::Malformed)?;
        if number == 0 {
            return Err(ProtoError::Malformed);
        }
        Ok(Some((number, (key & 7) as u8)))
    }

    fn bytes(&mut self) -> Result<&'a [u8], ProtoError> {
        let len = usize::try_from(self.varint()?).map_err(|_| ProtoError::Malformed)?;
        if len > self.0.len() {
            return Err(ProtoError::Malformed);
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(head)
    }

    fn string(&mut self) -> Result<String, ProtoError> {
        std::str::from_utf8(self.bytes()?)
            .map(str::to_string)
            .map_err(|_| ProtoError::Utf8)
    }

    fn skip(&mut self, wire: u8) -> Result<(), ProtoError> {
        let n = match wire {
            0 => {
                self.varint()?;
                return Ok(());
            }
            1 => 8,
            2 => {
                self.bytes()?;
                return Ok(());
            }
            5 => 4,
            _ => return Err(ProtoError::Malformed),
        };
        if self.0.len() < n {
            return Err(ProtoError::Malformed);
        }
        self.0 = &self.0[n..];
        Ok(())
    }
}

fn wire_error(message: &'static Message, field: &'static Field) -> ProtoError {
    ProtoError::WireType {
        message: message.name,
        field: field.name,
    }
}

/// Decodes the fields of `message` from `data` into `out` (so inline members merge into
/// their parent's object).
fn decode_into(
    data: &[u8],
    message: &'static Message,
    out: &mut Map<String, Value>,
) -> Result<(), ProtoError> {
    let mut reader = Reader(data);
    while let Some((number, wire)) = reader.key()? {
        let field =
            message
                .fields
                .iter()
                .find(|f| f.number == number)
                .ok_or(ProtoError::UnknownField {
                    message: message.name,
                    number,
                })?;
        if field.repeated {
            // Packed numbers arrive as one length-delimited run.
            if wire == 2 && matches!(field.ty, Ty::I32 | Ty::I64 | Ty::Bool) {
                let mut packed = Reader(reader.bytes()?);
                while !packed.0.is_empty() {
                    let v = scalar_from_varint(&field.ty, packed.varint()?);
                    push(out, field.name, v);
                }
                continue;
            }
            let value = decode_value(&mut reader, wire, message, field)?;
            push(out, field.name, value.unwrap_or(Value::Null));
            continue;
        }
        if let Ty::Inline(inner) = field.ty {
            if wire != 2 {
                return Err(wire_error(message, field));
            }
            decode_into(reader.bytes()?, inner, out)?;
            continue;
        }
        if let Ty::Map(value_ty) = &field.ty {
            if wire != 2 {
                return Err(wire_error(message, field));
            }
            let (k, v) = decode_map_entry(reader.bytes()?, value_ty, message, field)?;
            let entry = out
                .entry(field.name)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(m) = entry.as_object_mut() {
                m.insert(k, v);
            }
            continue;
        }
        match decode_value(&mut reader, wire, message, field)? {
            Some(v) if keep(field, &v) => {
                out.insert(field.name.to_string(), v);
            }
            _ => {}
        }
    }
    Ok(())
}

fn push(out: &mut Map<String, Value>, name: &str, value: Value) {
    let entry = out.entry(name).or_insert_with(|| Value::Array(Vec::new()));
    if let Some(a) = entry.as_array_mut() {
        a.push(value);
    }
}

/// Go's `omitempty`: zero scalars are left out unless the Go field is a pointer.
fn keep(field: &Field, value: &Value) -> bool {
    if field.pointer {
        return true;
    }
    match value {
        Value::String(s) => !s.is_empty(),
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_i64() != Some(0),
        _ => true,
    }
}

fn scalar_from_varint(ty: &Ty, v: u64) -> Value {
    match ty {
        Ty::Bool => Value::Bool(v != 0),
        // int32 values are sign-extended to 64 bits on the wire.
        Ty::I32 => Value::from(v as i64 as i32),
        _ => Value::from(v as i64),
    }
}

/// Decodes one value; `None` for a value that means "unset" (a zero Time).
fn decode_value(
    reader: &mut Reader<'_>,
    wire: u8,
    message: &'static Message,
    field: &'static Field,
) -> Result<Option<Value>, ProtoError> {
    let expect = |w: u8| {
        if wire == w {
            Ok(())
        } else {
            Err(wire_error(message, field))
        }
    };
    Ok(Some(match &field.ty {
        Ty::Str => {
            expect(2)?;
            Value::String(reader.string()?)
        }
        Ty::Bytes => {
            expect(2)?;
            Value::String(base64::engine::general_purpose::STANDARD.encode(reader.bytes()?))
        }
        Ty::Bool | Ty::I32 | Ty::I64 => {
            expect(0)?;
            scalar_from_varint(&field.ty, reader.varint()?)
        }
        Ty::Time => {
            expect(2)?;
            return time(reader.bytes()?);
        }
        Ty::IntOrString => {
            expect(2)?;
            int_or_string(reader.bytes()?)?
        }
        Ty::Quantity => {
            expect(2)?;
            quantity(reader.bytes()?)?
        }
        Ty::Raw => {
            expect(2)?;
            raw_json(reader.bytes()?)?
        }
        Ty::Message(inner) => {
            expect(2)?;
            let mut m = Map::new();
            decode_into(reader.bytes()?, inner, &mut m)?;
            Value::Object(m)
        }
        Ty::Skip => {
            reader.skip(wire)?;
            return Ok(None);
        }
        Ty::Inline(_) | Ty::Map(_) => return Err(wire_error(message, field)),
    }))
}

fn decode_map_entry(
    data: &[u8],
    value_ty: &Ty,
    message: &'static Message,
    field: &'static Field,
) -> Result<(String, Value), ProtoError> {
    let mut r = Reader(data);
    let mut key = String::new();
    let mut value = match value_ty {
        Ty::Bytes | Ty::Str | Ty::Quantity => Value::String(String::new()),
        _ => Value::Null,
    };
    while let Some((n, w)) = r.key()? {
        match (n, w) {
            (1, 2) => key = r.string()?,
            (2, 2) => {
                value = match value_ty {
                    Ty::Str => Value::String(r.string()?),
                    Ty::Bytes => {
                        Value::String(base64::engine::general_purpose::STANDARD.encode(r.bytes()?))
                    }
                    Ty::Quantity => quantity(r.bytes()?)?,
                    _ => return Err(wire_error(message, field)),
                }
            }
            (_, w) => r.skip(w)?,
        }
    }
    Ok((key, value))
}

fn time(data: &[u8]) -> Result<Option<Value>, ProtoError> {
    let mut r = Reader(data);
    let (mut seconds, mut nanos) = (0i64, 0i64);
    while let Some((n, w)) = r.key()? {
        match (n, w) {
            (1, 0) => seconds = r.varint()? as i64,
            (2, 0) => nanos = i64::from(r.varint()? as i64 as i32),
            (_, w) => r.skip(w)?,
        }
    }
    // An unset Time travels as an empty message (or as Go's zero time, year 1): absent.
    if seconds <= -62_135_596_800 || (seconds == 0 && nanos == 0) {
        return Ok(None);
    }
    let t: Option<DateTime<Utc>> =
        DateTime::from_timestamp(seconds, nanos.clamp(0, 999_999_999) as u32);
    Ok(t.map(|t| Value::String(t.to_rfc3339_opts(SecondsFormat::Secs, true))))
}

fn int_or_string(data: &[u8]) -> Result<Value, ProtoError> {
    let mut r = Reader(data);
    let (mut ty, mut int, mut string) = (0u64, 0i64, String::new());
    while let Some((n, w)) = r.key()? {
        match (n, w) {
            (1, 0) => ty = r.varint()?,
            (2, 0) => int = i64::from(r.varint()? as i64 as i32),
            (3, 2) => string = r.string()?,
            (_, w) => r.skip(w)?,
        }
    }
    Ok(if ty == 1 {
        Value::String(string)
    } else {
        Value::from(int)
    })
}

fn quantity(data: &[u8]) -> Result<Value, ProtoError> {
    let mut r = Reader(data);
    let mut s = String::new();
    while let Some((n, w)) = r.key()? {
        match (n, w) {
            (1, 2) => s = r.string()?,
            (_, w) => r.skip(w)?,
        }
    }
    Ok(Value::String(s))
}

fn raw_json(data: &[u8]) -> Result<Value, ProtoError> {
    let mut r = Reader(data);
    let mut raw: &[u8] = b"null";
    while let Some((n, w)) = r.key()? {
        match (n, w) {
            (1, 2) => raw = r.bytes()?,
            (_, w) => r.skip(w)?,
        }
    }
    serde_json::from_slice(raw).map_err(|e| ProtoError::Json(e.to_string()))
}
