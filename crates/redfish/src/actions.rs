//! What changes a machine or its BMC's record: resets (and what a boot does: the boot
//! override taken and, when `Once`, spent; pending BIOS settings applied; secure boot as
//! set), boot options, BIOS settings, secure boot, and virtual media. Each validates the
//! whole request before it changes anything, so a refused request changes nothing.

use crate::errors::RedfishError;
use crate::machines::{Hardware, LastBoot, Machines, Media, Power, PowerOp, Record};
use crate::resources::managers::device;
use crate::resources::systems::{
    bios_defaults, BOOT_ENABLED, BOOT_MODES, BOOT_TARGETS, RESET_TYPES,
};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

const RESET: &str = "ComputerSystem.Reset";

/// `ComputerSystem.Reset` with body `body`.
pub fn reset(
    m: &dyn Machines,
    h: &Hardware,
    body: &Value,
    now: DateTime<Utc>,
) -> Result<(), RedfishError> {
    let kind = match body.get("ResetType") {
        None | Some(Value::Null) => {
            return Err(RedfishError::parameter_missing(RESET, "ResetType"))
        }
        Some(Value::String(s)) if RESET_TYPES.contains(&s.as_str()) => s.as_str(),
        Some(v) => {
            let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            return Err(RedfishError::parameter_not_in_list(&v, "ResetType", RESET));
        }
    };
    let on = h.power == Power::On;
    let op = match (kind, on) {
        ("On", false) | ("ForceRestart" | "GracefulRestart", false) => Some(PowerOp::On),
        ("PushPowerButton", false) => Some(PowerOp::On),
        ("ForceOff", true) => Some(PowerOp::Off),
        ("GracefulShutdown" | "PushPowerButton", true) => Some(PowerOp::Shutdown),
        ("ForceRestart" | "GracefulRestart", true) => Some(PowerOp::Restart),
        ("Nmi", false) => return Err(RedfishError::conflict("a machine that is off takes no NMI")),
        _ => None,
    };
    let Some(op) = op else {
        return Ok(());
    };
    if matches!(op, PowerOp::On | PowerOp::Restart) {
        let mut record = h.record.clone();
        boot(&mut record, now);
        m.keep(&h.uuid, &record)
            .map_err(|e| RedfishError::internal(&e))?;
    }
    m.power(&h.uuid, op).map_err(|e| RedfishError::internal(&e))
}

/// What a boot does to the record: the source it boots from (the override, else the disk),
/// a `Once` override spent, pending BIOS settings applied, secure boot as set.
pub fn boot(r: &mut Record, now: DateTime<Utc>) {
    let overridden = r.boot.enabled != "Disabled" && r.boot.target != "None";
    let source = if overridden {
        r.boot.target.clone()
    } else {
        "Hdd".to_string()
    };
    let image = match source.as_str() {
        "Cd" | "Floppy" => r
            .media
            .get(&source)
            .filter(|m| m.inserted && !m.image.is_empty())
            .map(|m| m.image.clone()),
        "UefiHttp" => r.boot.http_boot_uri.clone(),
        _ => None,
    };
    r.last_boot = Some(LastBoot {
        source,
        image,
        at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    });
    if r.boot.enabled == "Once" {
        r.boot.enabled = "Disabled".into();
        r.boot.target = "None".into();
    }
    let defaults = bios_defaults();
    for (k, v) in std::mem::take(&mut r.bios_pending) {
        if defaults.get(&k) == Some(&v) {
            r.bios.remove(&k);
        } else {
            r.bios.insert(k, v);
        }
    }
    r.secure_boot_current = r.secure_boot_enable;
}

/// A PATCH of the system: only `Boot`'s override properties may change.
pub fn patch_system(m: &dyn Machines, h: &Hardware, body: &Value) -> Result<(), RedfishError> {
    let fields = object(body)?;
    for key in fields.keys() {
        match key.as_str() {
            "Boot" => {}
            k if k.starts_with('@') => {}
            "Id" | "Name" | "UUID" | "PowerState" | "Status" | "SystemType" | "Manufacturer"
            | "Model" | "SerialNumber" | "BiosVersion" | "HostName" | "ProcessorSummary"
            | "MemorySummary" | "Links" | "Actions" => {
                return Err(RedfishError::property_not_writable(key))
            }
            other => return Err(RedfishError::property_unknown(other)),
        }
    }
    let Some(boot) = fields.get("Boot") else {
        return Ok(());
    };
    let mut record = h.record.clone();
    let b = &mut record.boot;
    for (key, v) in object(boot)? {
        let s = |allowed: &[&str]| -> Result<String, RedfishError> {
            v.as_str()
                .filter(|s| allowed.contains(s))
                .map(str::to_string)
                .ok_or_else(|| RedfishError::value_not_in_list(&text(v), key))
        };
        match key.as_str() {
            "BootSourceOverrideTarget" => b.target = s(&BOOT_TARGETS)?,
            "BootSourceOverrideEnabled" => b.enabled = s(&BOOT_ENABLED)?,
            "BootSourceOverrideMode" => b.mode = s(&BOOT_MODES)?,
            "HttpBootUri" => {
                b.http_boot_uri = match v {
                    Value::Null => None,
                    Value::String(u) => Some(u.clone()),
                    _ => return Err(RedfishError::value_type(&text(v), key)),
                }
            }
            k if k.starts_with('@') => {}
            "BootSourceOverrideTarget@Redfish.AllowableValues" => {}
            other => return Err(RedfishError::property_unknown(other)),
        }
    }
    // An override set without saying for how long holds once, as BMCs do.
    if boot.get("BootSourceOverrideTarget").is_some()
        && boot.get("BootSourceOverrideEnabled").is_none()
        && b.enabled == "Disabled"
        && b.target != "None"
    {
        b.enabled = "Once".into();
    }
    if b.mode == "Legacy" && record.secure_boot_enable {
        return Err(RedfishError::conflict(
            "secure boot is enabled, which needs the UEFI boot mode",
        ));
    }
    m.keep(&h.uuid, &record)
        .map_err(|e| RedfishError::internal(&e))
}

/// A PATCH of `Bios/Settings`: `Attributes` to apply at the next boot, each one the BIOS has,
/// with a value of the type it holds.
pub fn patch_bios(m: &dyn Machines, h: &Hardware, body: &Value) -> Result<(), RedfishError> {
    let fields = object(body)?;
    if let Some(k) = fields
        .keys()
        .find(|k| *k != "Attributes" && !k.starts_with('@'))
    {
        return Err(RedfishError::property_unknown(k));
    }
    let Some(attrs) = fields.get("Attributes") else {
        return Ok(());
    };
    let defaults = bios_defaults();
    let mut record = h.record.clone();
    for (k, v) in object(attrs)? {
        let d = defaults
            .get(k)
            .ok_or_else(|| RedfishError::property_unknown(k))?;
        let same_type = matches!(
            (d, v),
            (Value::String(_), Value::String(_)) | (Value::Number(_), Value::Number(_))
        );
        if !same_type {
            return Err(RedfishError::value_type(&text(v), k));
        }
        record.bios_pending.insert(k.clone(), v.clone());
    }
    m.keep(&h.uuid, &record)
        .map_err(|e| RedfishError::internal(&e))
}

/// `Bios.ResetBios`: every attribute back to its default at the next boot.
pub fn reset_bios(m: &dyn Machines, h: &Hardware) -> Result<(), RedfishError> {
    let mut record = h.record.clone();
    record.bios_pending = bios_defaults().into_iter().collect();
    m.keep(&h.uuid, &record)
        .map_err(|e| RedfishError::internal(&e))
}

/// A PATCH of `SecureBoot`: `SecureBootEnable`, in UEFI mode only; in force from the next boot.
pub fn patch_secure_boot(m: &dyn Machines, h: &Hardware, body: &Value) -> Result<(), RedfishError> {
    let fields = object(body)?;
    let mut record = h.record.clone();
    for (k, v) in fields {
        match k.as_str() {
            "SecureBootEnable" => {
                record.secure_boot_enable = v
                    .as_bool()
                    .ok_or_else(|| RedfishError::value_type(&text(v), k))?;
            }
            "SecureBootCurrentBoot" | "SecureBootMode" | "Id" | "Name" => {
                return Err(RedfishError::property_not_writable(k))
            }
            k if k.starts_with('@') => {}
            other => return Err(RedfishError::property_unknown(other)),
        }
    }
    if record.secure_boot_enable && record.boot.mode != "UEFI" {
        return Err(RedfishError::conflict(
            "secure boot needs the UEFI boot mode",
        ));
    }
    m.keep(&h.uuid, &record)
        .map_err(|e| RedfishError::internal(&e))
}

/// `VirtualMedia.InsertMedia` on device `dev`.
pub fn insert_media(
    m: &dyn Machines,
    h: &Hardware,
    dev: &str,
    body: &Value,
) -> Result<(), RedfishError> {
    const ACTION: &str = "VirtualMedia.InsertMedia";
    let fields = object(body)?;
    let image = match fields.get("Image") {
        None | Some(Value::Null) => return Err(RedfishError::parameter_missing(ACTION, "Image")),
        Some(Value::String(s)) if image_url(s) => s.clone(),
        Some(v) => return Err(RedfishError::parameter_format(&text(v), "Image", ACTION)),
    };
    let flag = |name: &str| -> Result<bool, RedfishError> {
        match fields.get(name) {
            None => Ok(true),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(RedfishError::parameter_format(&text(v), name, ACTION)),
        }
    };
    let media = Media {
        image,
        inserted: flag("Inserted")?,
        write_protected: flag("WriteProtected")?,
        transfer_protocol: fields
            .get("TransferProtocolType")
            .and_then(Value::as_str)
            .map(str::to_string),
        user_name: fields
            .get("UserName")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    put_media(m, h, dev, Some(media))
}

/// `VirtualMedia.EjectMedia` on device `dev` (nothing inserted is not an error).
pub fn eject_media(m: &dyn Machines, h: &Hardware, dev: &str) -> Result<(), RedfishError> {
    put_media(m, h, dev, None)
}

/// A PATCH of a virtual media device: `Image` (null ejects), `Inserted`, `WriteProtected`.
pub fn patch_media(
    m: &dyn Machines,
    h: &Hardware,
    dev: &str,
    body: &Value,
) -> Result<(), RedfishError> {
    let fields = object(body)?;
    let mut media = h.record.media.get(dev).cloned().unwrap_or_default();
    for (k, v) in fields {
        match (k.as_str(), v) {
            ("Image", Value::Null) => media = Media::default(),
            ("Image", Value::String(s)) if image_url(s) => {
                media.image = s.clone();
                media.inserted = true;
            }
            ("Inserted", Value::Bool(b)) => media.inserted = *b,
            ("WriteProtected", Value::Bool(b)) => media.write_protected = *b,
            ("Image" | "Inserted" | "WriteProtected", _) => {
                return Err(RedfishError::value_type(&text(v), k))
            }
            (k, _) if k.starts_with('@') => {}
            (other, _) => return Err(RedfishError::property_unknown(other)),
        }
    }
    let media = (!media.image.is_empty()).then_some(media);
    put_media(m, h, dev, media)
}

fn put_media(
    m: &dyn Machines,
    h: &Hardware,
    dev: &str,
    media: Option<Media>,
) -> Result<(), RedfishError> {
    device(dev).ok_or_else(|| RedfishError::not_found(dev))?;
    let mut record = h.record.clone();
    match media {
        Some(x) => record.media.insert(dev.to_string(), x),
        None => record.media.remove(dev),
    };
    m.keep(&h.uuid, &record)
        .map_err(|e| RedfishError::internal(&e))
}

/// Whether `s` is an image URL a BMC fetches (HTTP, HTTPS, NFS or CIFS).
fn image_url(s: &str) -> bool {
    ["http://", "https://", "nfs://", "cifs://", "smb://"]
        .iter()
        .any(|scheme| s.len() > scheme.len() && s[..scheme.len()].eq_ignore_ascii_case(scheme))
}

fn object(v: &Value) -> Result<&Map<String, Value>, RedfishError> {
    v.as_object().ok_or_else(RedfishError::malformed_json)
}

/// A value as an error message shows it: strings bare, the rest as JSON.
fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}
