//! Data objects (`VirtualMachineConfigInfo`, `VirtualDisk`, …): a type name and fields in
//! schema order, stored either whole or as the few fields that differ from another object
//! of the same type and fields (its base).
//!
//! Ten thousand VMs hold ten thousand config, summary and device objects that differ from one
//! another in a handful of fields (name, UUIDs, paths, MAC address); storing only those was
//! most of the memory a VM costs. Which object a new one is stored against is the
//! inventory's choice ([`Bases`]); everything here reads and writes both forms alike.

use crate::value::{Name, Val};
use std::sync::Arc;

/// A data object: its vSphere type name and its fields in schema order.
#[derive(Debug, Clone)]
pub struct Data {
    pub ty: Name,
    fields: Fields,
}

#[derive(Debug, Clone)]
enum Fields {
    Own(Vec<(Name, Val)>),
    /// The fields of `base` (whose fields are its own), with the values at some of its
    /// positions replaced.
    Over {
        base: Arc<Data>,
        changed: Vec<(u32, Val)>,
    },
}

impl PartialEq for Data {
    fn eq(&self, other: &Self) -> bool {
        self.ty == other.ty
            && self.len() == other.len()
            && self.fields().zip(other.fields()).all(|(a, b)| a == b)
    }
}

impl Data {
    pub fn new(ty: impl Into<Name>) -> Self {
        Data {
            ty: ty.into(),
            fields: Fields::Own(Vec::new()),
        }
    }

    /// A data object of `ty` with `fields`, in that order (as a store gives them back).
    pub fn from_fields(ty: impl Into<Name>, fields: Vec<(Name, Val)>) -> Self {
        Data {
            ty: ty.into(),
            fields: Fields::Own(fields),
        }
    }

    /// Adds a field (builder style).
    pub fn with(mut self, name: impl Into<Name>, value: impl Into<Val>) -> Self {
        self.set(name, value);
        self
    }

    /// How many fields the object has.
    pub fn len(&self) -> usize {
        match &self.fields {
            Fields::Own(fields) => fields.len(),
            Fields::Over { base, .. } => base.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The fields, in order.
    pub fn fields(&self) -> impl Iterator<Item = (&Name, &Val)> {
        let (own, over): (&[(Name, Val)], _) = match &self.fields {
            Fields::Own(fields) => (fields, None),
            Fields::Over { base, changed } => (base.own(), Some(changed)),
        };
        own.iter().enumerate().map(move |(i, (n, v))| {
            let changed = over.and_then(|c| c.iter().find(|(j, _)| *j as usize == i));
            (n, changed.map_or(v, |(_, v)| v))
        })
    }

    /// The fields of an object stored whole (a base's; see [`Data::over`]).
    fn own(&self) -> &[(Name, Val)] {
        match &self.fields {
            Fields::Own(fields) => fields,
            Fields::Over { .. } => &[],
        }
    }

    fn position(&self, name: &str) -> Option<usize> {
        match &self.fields {
            Fields::Own(fields) => fields.iter().position(|(n, _)| n == name),
            Fields::Over { base, .. } => base.position(name),
        }
    }

    /// Changes the fields as a list of their own (made from the base's and the changes when
    /// stored over a base), for the changes a base cannot express: a field added or removed.
    fn with_own<R>(&mut self, change: impl FnOnce(&mut Vec<(Name, Val)>) -> R) -> R {
        let mut fields = match std::mem::replace(&mut self.fields, Fields::Own(Vec::new())) {
            Fields::Own(fields) => fields,
            Fields::Over { base, changed } => base
                .own()
                .iter()
                .enumerate()
                .map(|(i, (n, v))| {
                    let changed = changed.iter().find(|(j, _)| *j as usize == i);
                    (n.clone(), changed.map_or(v, |(_, v)| v).clone())
                })
                .collect(),
        };
        let out = change(&mut fields);
        self.fields = Fields::Own(fields);
        out
    }

    /// Sets a field, replacing an existing one in place.
    pub fn set(&mut self, name: impl Into<Name>, value: impl Into<Val>) {
        let (name, value) = (name.into(), value.into());
        match self.get_mut(&name) {
            Some(v) => *v = value,
            None => self.with_own(|fields| fields.push((name, value))),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Val> {
        match &self.fields {
            Fields::Own(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            Fields::Over { base, changed } => {
                let i = base.position(name)?;
                match changed.iter().find(|(j, _)| *j as usize == i) {
                    Some((_, v)) => Some(v),
                    None => base.own().get(i).map(|(_, v)| v),
                }
            }
        }
    }

    /// A field to change. Over a base, the field becomes one of the object's changes.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Val> {
        let i = self.position(name)?;
        match &mut self.fields {
            Fields::Own(fields) => fields.get_mut(i).map(|(_, v)| v),
            Fields::Over { base, changed } => {
                let at = match changed.iter().position(|(j, _)| *j as usize == i) {
                    Some(at) => at,
                    None => {
                        let v = base.own().get(i)?.1.clone();
                        changed.push((i as u32, v));
                        changed.len() - 1
                    }
                };
                changed.get_mut(at).map(|(_, v)| v)
            }
        }
    }

    /// The data object in field `name`, to change (copied first when shared).
    pub fn data_mut(&mut self, name: &str) -> Option<&mut Data> {
        self.get_mut(name).and_then(Val::data_mut)
    }

    /// Keeps the fields `keep` says yes to.
    pub fn retain(&mut self, mut keep: impl FnMut(&Name, &Val) -> bool) {
        self.with_own(|fields| fields.retain(|(n, v)| keep(n, v)));
    }

    /// See [`Val::compact`].
    pub fn compact(&mut self) {
        match &mut self.fields {
            Fields::Own(fields) => {
                fields.shrink_to_fit();
                fields.iter_mut().for_each(|(_, v)| v.compact());
            }
            Fields::Over { changed, .. } => {
                changed.shrink_to_fit();
                changed.iter_mut().for_each(|(_, v)| v.compact());
            }
        }
    }

    /// Stores the object as its differences from `base` when that saves memory: `base` has
    /// the same type and field names in the same order, its fields are its own, and at most
    /// half the values differ. Child objects count as equal only when they are the very
    /// same (shared) object, which keeps this a shallow comparison. True when it did.
    pub fn over(&mut self, base: &Arc<Data>) -> bool {
        let (Fields::Own(fields), Fields::Own(theirs)) = (&self.fields, &base.fields) else {
            return false;
        };
        if self.ty != base.ty
            || fields.len() != theirs.len()
            || fields.iter().zip(theirs).any(|((a, _), (b, _))| a != b)
        {
            return false;
        }
        let changed: Vec<(u32, Val)> = fields
            .iter()
            .zip(theirs)
            .enumerate()
            .filter(|(_, ((_, a), (_, b)))| !a.same(b))
            .map(|(i, ((_, a), _))| (i as u32, a.clone()))
            .collect();
        if changed.len() * 2 > fields.len() {
            return false;
        }
        self.fields = Fields::Over {
            base: base.clone(),
            changed,
        };
        true
    }

    /// Room for fields without growing (for tests of [`Data::compact`]).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        match &self.fields {
            Fields::Own(fields) => fields.capacity(),
            Fields::Over { changed, .. } => changed.capacity(),
        }
    }

    /// Whether the object is stored whole (and so may serve as a base).
    pub fn is_whole(&self) -> bool {
        matches!(self.fields, Fields::Own(_))
    }
}

/// The objects new ones are stored against ([`Data::over`]): one per type, the last whole
/// object of that type seen. Only types named by a literal of ours are kept, so their number
/// is bounded by the code, not by what clients send.
#[derive(Debug, Default)]
pub struct Bases(Vec<(&'static str, Arc<Data>)>);

impl Bases {
    /// Stores every object `v` alone holds against the base of its type (children first, so
    /// a parent compares its children by identity), or makes it the base of its type when it
    /// differs too much.
    pub fn share(&mut self, v: &mut Val) {
        match v {
            Val::Data(d) => {
                if let Some(d_mut) = Arc::get_mut(d) {
                    match &mut d_mut.fields {
                        Fields::Own(f) => f.iter_mut().for_each(|(_, v)| self.share(v)),
                        Fields::Over { changed, .. } => {
                            changed.iter_mut().for_each(|(_, v)| self.share(v))
                        }
                    }
                    self.share_object(d);
                }
            }
            Val::Array(_, items) => items.iter_mut().for_each(|v| self.share(v)),
            Val::Any(inner) => self.share(inner),
            _ => {}
        }
    }

    /// Shares what `d` holds (not `d` itself, kept whole) and gives back its spare capacity.
    pub fn share_within(&mut self, d: &mut Data) {
        match &mut d.fields {
            Fields::Own(f) => f.iter_mut().for_each(|(_, v)| self.share(v)),
            Fields::Over { changed, .. } => changed.iter_mut().for_each(|(_, v)| self.share(v)),
        }
        d.compact();
    }

    fn share_object(&mut self, d: &mut Arc<Data>) {
        let std::borrow::Cow::Borrowed(ty) = d.ty else {
            return;
        };
        let Some(d_mut) = Arc::get_mut(d) else {
            return;
        };
        if let Fields::Over { base, changed } = &mut d_mut.fields {
            // Fields changed back to their base's value (or set to it) need no copy.
            changed.retain(|(i, v)| base.own().get(*i as usize).is_none_or(|(_, b)| !v.same(b)));
            return;
        }
        if d_mut.is_empty() {
            return;
        }
        match self.0.iter_mut().find(|(t, _)| *t == ty) {
            Some((_, base)) if d_mut.over(base) => {}
            Some((_, base)) => *base = d.clone(),
            None => self.0.push((ty, d.clone())),
        }
    }
}

/// The properties of a managed object by name, in name order (the order of `all`
/// properties). Stored as a data object named after the object's type, so the properties of
/// ten thousand VMs are kept as the few that differ from another VM's (see [`Bases`]).
#[derive(Debug, Clone)]
pub struct Props(Arc<Data>);

impl Props {
    pub fn new(ty: Name) -> Self {
        Props(Arc::new(Data::new(ty)))
    }

    pub fn get(&self, name: &str) -> Option<&Val> {
        self.0.get(name)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut Val> {
        Arc::make_mut(&mut self.0).get_mut(name)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.0.position(name).is_some()
    }

    pub fn keys(&self) -> impl Iterator<Item = &Name> {
        self.0.fields().map(|(n, _)| n)
    }

    /// The properties as the data object they are stored as (type: the managed type).
    pub fn as_data(&self) -> &Data {
        &self.0
    }

    /// Properties kept as `data` (read back from a store), sorted by name as they are kept.
    pub fn from_data(mut data: Data) -> Self {
        data.with_own(|fields| fields.sort_by(|a, b| a.0.cmp(&b.0)));
        Props(Arc::new(data))
    }

    /// Sets a property, keeping name order; the value it replaces, if any.
    pub fn insert(&mut self, name: impl Into<Name>, value: Val) -> Option<Val> {
        let name = name.into();
        let data = Arc::make_mut(&mut self.0);
        if let Some(v) = data.get_mut(&name) {
            return Some(std::mem::replace(v, value));
        }
        data.with_own(|fields| {
            let at = fields.partition_point(|(n, _)| *n < name);
            fields.insert(at, (name, value));
        });
        None
    }

    pub fn remove(&mut self, name: &str) -> Option<Val> {
        self.0.position(name)?;
        Arc::make_mut(&mut self.0).with_own(|fields| {
            let at = fields.iter().position(|(n, _)| n == name)?;
            Some(fields.remove(at).1)
        })
    }

    /// See [`Val::compact`].
    pub fn compact(&mut self) {
        Arc::make_mut(&mut self.0).compact();
    }

    /// Shares what the properties hold (see [`Bases::share`]), the properties themselves
    /// included, and gives back spare capacity.
    pub fn share(&mut self, bases: &mut Bases) {
        let mut v = Val::Data(self.0.clone());
        // The copy in `v` would keep the object from being changed in place.
        self.0 = Arc::new(Data::new(""));
        bases.share(&mut v);
        v.compact();
        if let Val::Data(d) = v {
            self.0 = d;
        }
    }
}

impl std::ops::Index<&str> for Props {
    type Output = Val;

    /// The property `name`; panics when there is none (for tests).
    fn index(&self, name: &str) -> &Val {
        match self.get(name) {
            Some(v) => v,
            None => panic!("no property {name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(file: &str) -> Data {
        Data::new("VirtualDisk")
            .with("key", 204)
            .with("label", "Hard disk 1")
            .with("fileName", file)
            .with("unitNumber", 0)
    }

    #[test]
    fn an_object_over_a_base_reads_writes_and_compares_as_a_whole_one() {
        let base = Arc::new(disk("a.vmdk"));
        let mut d = disk("b.vmdk");
        assert!(d.over(&base));
        assert!(!d.is_whole());
        assert_eq!(d, disk("b.vmdk"));
        assert_ne!(d, disk("a.vmdk"));
        assert_eq!(d.get("fileName").and_then(Val::as_str), Some("b.vmdk"));
        assert_eq!(d.get("label").and_then(Val::as_str), Some("Hard disk 1"));
        assert_eq!(d.get("nothing"), None);
        // A change of a field the base holds stays a change; the base is untouched.
        d.set("unitNumber", 1);
        assert!(!d.is_whole());
        assert_eq!(d.get("unitNumber"), Some(&Val::Int(1)));
        assert_eq!(base.get("unitNumber"), Some(&Val::Int(0)));
        // A new field, or one removed, makes the fields its own, in the same order.
        d.set("extra", true);
        assert!(d.is_whole());
        let names: Vec<&str> = d.fields().map(|(n, _)| n.as_ref()).collect();
        assert_eq!(names, ["key", "label", "fileName", "unitNumber", "extra"]);
        d.retain(|n, _| n != "label");
        assert_eq!(d.len(), 4);
    }

    #[test]
    fn only_objects_with_the_same_fields_and_few_differences_go_over_a_base() {
        let base = Arc::new(disk("a.vmdk"));
        let mut other_type = disk("b.vmdk");
        other_type.ty = "VirtualCdrom".into();
        assert!(!other_type.over(&base));
        let mut other_fields = disk("b.vmdk").with("extra", 1);
        assert!(!other_fields.over(&base));
        let mut mostly_different = Data::new("VirtualDisk")
            .with("key", 1)
            .with("label", "x")
            .with("fileName", "b.vmdk")
            .with("unitNumber", 0);
        assert!(!mostly_different.over(&base));
        assert!(mostly_different.is_whole());
    }

    #[test]
    fn properties_keep_name_order_over_a_base_too() {
        let mut bases = Bases::default();
        let make = |name: &str| {
            let mut p = Props::new("VirtualMachine".into());
            for (n, v) in [
                ("name", name),
                ("config", "c"),
                ("guest", "g"),
                ("runtime", "r"),
            ] {
                assert!(p.insert(n, Val::from(v)).is_none());
            }
            p
        };
        let (mut first, mut second) = (make("a"), make("b"));
        first.share(&mut bases);
        second.share(&mut bases);
        assert!(
            !second.0.is_whole(),
            "stored over the first VM's properties"
        );
        let keys: Vec<&str> = second.keys().map(|k| k.as_ref()).collect();
        assert_eq!(keys, ["config", "guest", "name", "runtime"]);
        assert_eq!(second["name"].as_str(), Some("b"));
        assert_eq!(
            second
                .insert("name", "c".into())
                .and_then(|v| v.as_str().map(str::to_string)),
            Some("b".into())
        );
        assert!(second.insert("datastore", "d".into()).is_none());
        assert_eq!(
            second.remove("guest").as_ref().and_then(Val::as_str),
            Some("g")
        );
        assert!(second.remove("guest").is_none());
        assert!(!second.contains_key("guest"));
        let keys: Vec<&str> = second.keys().map(|k| k.as_ref()).collect();
        assert_eq!(keys, ["config", "datastore", "name", "runtime"]);
        assert_eq!(first["name"].as_str(), Some("a"));
    }

    #[test]
    fn bases_share_objects_of_one_type_and_leave_others_whole() {
        let mut bases = Bases::default();
        let mut first = Val::from(disk("a.vmdk"));
        let mut second = Val::from(disk("b.vmdk"));
        let mut owned_type = Val::from(Data::new(String::from("Custom")).with("x", 1));
        bases.share(&mut first);
        bases.share(&mut second);
        bases.share(&mut owned_type);
        let whole = |v: &Val| v.as_data().map(Data::is_whole);
        assert_eq!(whole(&first), Some(true));
        assert_eq!(whole(&second), Some(false));
        assert_eq!(
            second.path("fileName").and_then(Val::as_str),
            Some("b.vmdk")
        );
        assert_eq!(whole(&owned_type), Some(true));
        assert_eq!(bases.0.len(), 1, "types of clients are never kept");
    }
}
