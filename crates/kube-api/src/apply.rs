//! Server-side apply and field ownership: `managedFields` entries per manager (`Apply` and
//! `Update` operations, `FieldsV1` sets), conflicts when an applier claims a field another
//! manager set to a different value (409 unless `force=true`), and removal of fields an
//! applier stopped applying.
//!
//! Paths follow FieldsV1: `f:name` for a field, `k:{"name":"web"}` for a list item by its
//! merge key, `v:"x"` for a member of a primitive set. List semantics come from the same
//! table as strategic merge patch for built-in kinds, and from the CRD schema's
//! `x-kubernetes-list-type` / `x-kubernetes-list-map-keys` for custom ones (atomic where the
//! schema says nothing), so two managers can each own their own `conditions` items of a
//! custom object, as kube-apiserver lets them.

use crate::schema::{ListMerge, Node, Schema};
use crate::strategic::{list_key, ListKind};
use crate::values::At;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

/// One path into an object, as FieldsV1 segments.
pub type FieldPath = Vec<String>;

/// How an object's lists merge and are owned.
#[derive(Debug, Clone, Copy)]
pub enum Lists<'a> {
    /// A built-in kind: strategic merge keys.
    Builtin,
    /// A custom kind: its version's schema, when it has one.
    Custom(Option<&'a Schema>),
}

/// The set of leaf paths an object (an applied configuration, or a change) sets.
pub fn field_set(object: &Value, lists: Lists<'_>) -> BTreeSet<FieldPath> {
    from_fields_v1(&Value::Object(field_tree(object, None, lists)))
}

/// The paths of `new` whose value differs from `old`'s (what an update changes): the paths
/// of [`field_set`], less those where both agree, found without visiting what is equal.
pub fn changed_fields(old: &Value, new: &Value, lists: Lists<'_>) -> BTreeSet<FieldPath> {
    from_fields_v1(&Value::Object(field_tree(new, Some(old), lists)))
}

/// A FieldsV1 tree: a node's fields by segment (`f:name`, `k:{..}`, `v:..`), `{}` for a leaf,
/// and `.` in a node that is itself a path and has fields under it (a list item). Writes
/// build and compare these trees as they are stored; paths are listed only where a write
/// has to take fields from another manager or drop fields it no longer applies.
type Tree = Map<String, Value>;

/// The FieldsV1 tree of `object`'s paths, less those at which `old` (when given) holds the
/// same value.
fn field_tree(object: &Value, old: Option<&Value>, lists: Lists<'_>) -> Tree {
    let mut out = Tree::new();
    let Some(m) = object.as_object() else {
        return out;
    };
    for (k, v) in m {
        if matches!(k.as_str(), "apiVersion" | "kind") {
            continue;
        }
        let old = old.and_then(|o| o.get(k));
        if k == "metadata" {
            if let Some(owned) = metadata_tree(v, old) {
                out.insert("f:metadata".into(), owned);
            }
            continue;
        }
        let node = match lists {
            Lists::Builtin => builtin_tree(v, old, "", k),
            Lists::Custom(schema) => custom_tree(v, old, schema.and_then(|s| s.root().field(k))),
        };
        if let Some(node) = node {
            out.insert(format!("f:{k}"), node);
        }
    }
    out
}

/// Of metadata, only labels and annotations are owned.
fn metadata_tree(meta: &Value, old: Option<&Value>) -> Option<Value> {
    let mut out = Tree::new();
    for part in ["labels", "annotations"] {
        let Some(Value::Object(entries)) = meta.get(part) else {
            continue;
        };
        let before = old.and_then(|o| o.get(part));
        let changed: Tree = entries
            .iter()
            .filter(|(ek, ev)| before.and_then(|b| b.get(ek.as_str())) != Some(*ev))
            .map(|(ek, _)| (format!("f:{ek}"), leaf()))
            .collect();
        if !changed.is_empty() {
            out.insert(format!("f:{part}"), Value::Object(changed));
        }
    }
    node(out)
}

/// A path with nothing under it.
fn leaf() -> Value {
    Value::Object(Map::new())
}

/// A node holding `fields`, or nothing when no field under it is a path.
fn node(fields: Tree) -> Option<Value> {
    (!fields.is_empty()).then_some(Value::Object(fields))
}

/// The nodes of an object's fields, each from `child` (field name, value); fields without
/// a path under them are left out.
fn fields_tree(object: &Map<String, Value>, child: impl Fn(&str, &Value) -> Option<Value>) -> Tree {
    object
        .iter()
        .filter_map(|(k, v)| Some((format!("f:{k}"), child(k, v)?)))
        .collect()
}

/// A list item's node: the item itself (`.`) and its fields (none when it is no object).
fn item_node(fields: Option<Tree>) -> Value {
    let mut item = fields.unwrap_or_default();
    item.insert(".".into(), leaf());
    Value::Object(item)
}

/// Puts `node` at `key`, joining it with what is there (two items with one key).
fn insert_node(tree: &mut Tree, key: String, node: Value) {
    match (tree.get_mut(&key), node) {
        (Some(Value::Object(there)), Value::Object(more)) => union(there, &more),
        (_, node) => {
            tree.insert(key, node);
        }
    }
}

/// The node of `v`'s paths (at a field named `name` of a field named `parent`), less what
/// `old`, the value at the same place in an older object, already holds; `None` when there
/// is none.
fn builtin_tree(v: &Value, old: Option<&Value>, parent: &str, name: &str) -> Option<Value> {
    if old == Some(v) {
        return None;
    }
    match v {
        Value::Object(m) if !m.is_empty() => node(fields_tree(m, |k, child| {
            builtin_tree(child, old.and_then(|o| o.get(k)), name, k)
        })),
        Value::Array(items) => match list_key(parent, name) {
            ListKind::Key(key) => {
                let mut out = Tree::new();
                for item in items {
                    let Some(id) = item.get(key) else { continue };
                    let before = old
                        .and_then(Value::as_array)
                        .and_then(|a| a.iter().find(|o| o.get(key) == Some(id)));
                    if before == Some(item) {
                        continue;
                    }
                    let fields = item.as_object().map(|m| {
                        fields_tree(m, |k, child| {
                            builtin_tree(child, before.and_then(|b| b.get(k)), name, k)
                        })
                    });
                    insert_node(
                        &mut out,
                        format!("k:{}", json!({ key: id })),
                        item_node(fields),
                    );
                }
                node(out)
            }
            ListKind::Union => set_tree(items, old),
            ListKind::Replace => Some(leaf()),
        },
        _ => Some(leaf()),
    }
}

/// [`builtin_tree`] for a custom object, following its schema node by node (`None` once the
/// schema says nothing more, where every list is atomic).
fn custom_tree(v: &Value, old: Option<&Value>, schema: Option<&Node>) -> Option<Value> {
    if old == Some(v) {
        return None;
    }
    match v {
        Value::Object(m) if !m.is_empty() => node(fields_tree(m, |k, child| {
            custom_tree(
                child,
                old.and_then(|o| o.get(k)),
                schema.and_then(|n| n.field(k)),
            )
        })),
        Value::Array(items) => match schema.map(Node::list_merge) {
            Some(ListMerge::Map(keys)) => {
                let item_schema = schema.and_then(Node::items);
                let mut out = Tree::new();
                for item in items {
                    let Some(id) = map_item_id(item, keys) else {
                        continue;
                    };
                    let before = old.and_then(Value::as_array).and_then(|a| {
                        a.iter()
                            .find(|o| keys.iter().all(|k| o.get(k) == item.get(k)))
                    });
                    if before == Some(item) {
                        continue;
                    }
                    let fields = item.as_object().map(|m| {
                        fields_tree(m, |k, child| {
                            let old = before.and_then(|b| b.get(k));
                            custom_tree(child, old, item_schema.and_then(|n| n.field(k)))
                        })
                    });
                    insert_node(&mut out, format!("k:{id}"), item_node(fields));
                }
                node(out)
            }
            Some(ListMerge::Set) => set_tree(items, old),
            _ => Some(leaf()),
        },
        _ => Some(leaf()),
    }
}

/// The members of a primitive set that `old` lacks.
fn set_tree(items: &[Value], old: Option<&Value>) -> Option<Value> {
    let before = old.and_then(Value::as_array);
    node(
        items
            .iter()
            .filter(|item| !before.is_some_and(|b| b.contains(item)))
            .map(|item| (format!("v:{item}"), leaf()))
            .collect(),
    )
}

/// Adds `more`'s paths to `tree` (what [`from_fields_v1`] reads back is the union).
fn union(tree: &mut Tree, more: &Tree) {
    for (k, v) in more {
        match (tree.get_mut(k.as_str()), v) {
            (Some(Value::Object(there)), Value::Object(m)) => union(there, m),
            (Some(_), _) => {}
            (None, v) => {
                tree.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Whether a FieldsV1 node is itself a path (as [`from_fields_v1`] lists it).
fn is_path(node: &Value) -> bool {
    node.as_object()
        .is_some_and(|m| m.contains_key(".") || m.keys().all(|k| k == "."))
}

/// The paths both trees hold, in order (the same order as a [`BTreeSet`] of them).
fn common(a: &Value, b: &Tree) -> Vec<FieldPath> {
    fn go(a: &Value, b: &Tree, path: &mut FieldPath, out: &mut Vec<FieldPath>) {
        for (k, bv) in b {
            let Some(av) = a.get(k.as_str()).filter(|_| k != ".") else {
                continue;
            };
            path.push(k.clone());
            if is_path(av) && is_path(bv) {
                out.push(path.clone());
            }
            if let Some(bm) = bv.as_object() {
                go(av, bm, path, out);
            }
            path.pop();
        }
    }
    let mut out = Vec::new();
    go(a, b, &mut Vec::new(), &mut out);
    out
}

/// A `map` list item's identity, its key fields as one JSON object (`{"type":"Ready"}`), as
/// FieldsV1 names the item; `None` for an item without the keys.
fn map_item_id(item: &Value, keys: &[String]) -> Option<Value> {
    let mut id = Map::new();
    for k in keys {
        id.insert(k.clone(), item.get(k)?.clone());
    }
    Some(Value::Object(id))
}

/// Merges an applied configuration into a custom object: objects field by field (`null`
/// removes), `map` lists item by item, `set` lists by union, other lists replaced.
fn merge_custom(target: &mut Value, patch: &Value, node: Option<&Node>) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let Some(t) = target.as_object_mut() else {
                return;
            };
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                    continue;
                }
                let slot = t.entry(k.clone()).or_insert(Value::Null);
                merge_custom(slot, v, node.and_then(|n| n.field(k)));
            }
        }
        Value::Array(items) => match node.map(Node::list_merge) {
            Some(ListMerge::Map(keys)) => {
                let mut current = match target.take() {
                    Value::Array(a) => a,
                    _ => Vec::new(),
                };
                let item_node = node.and_then(Node::items);
                for item in items {
                    let id = map_item_id(item, keys);
                    let found = id.as_ref().and_then(|id| {
                        current
                            .iter()
                            .position(|c| map_item_id(c, keys).as_ref() == Some(id))
                    });
                    match found {
                        Some(i) => merge_custom(&mut current[i], item, item_node),
                        None => current.push(item.clone()),
                    }
                }
                *target = Value::Array(current);
            }
            Some(ListMerge::Set) => {
                let mut current = match target.take() {
                    Value::Array(a) => a,
                    _ => Vec::new(),
                };
                for v in items {
                    if !current.contains(v) {
                        current.push(v.clone());
                    }
                }
                *target = Value::Array(current);
            }
            _ => *target = patch.clone(),
        },
        other => *target = other.clone(),
    }
}

/// The value at a path, if the object has it.
pub fn value_at<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = object;
    for seg in path {
        if let Some(f) = seg.strip_prefix("f:") {
            cur = cur.get(f)?;
        } else if let Some(k) = seg.strip_prefix("k:") {
            let wanted: Map<String, Value> = serde_json::from_str(k).ok()?;
            cur = cur
                .as_array()?
                .iter()
                .find(|item| wanted.iter().all(|(key, val)| item.get(key) == Some(val)))?;
        } else if let Some(v) = seg.strip_prefix("v:") {
            let wanted: Value = serde_json::from_str(v).ok()?;
            cur = cur.as_array()?.iter().find(|item| **item == wanted)?;
        } else {
            return None;
        }
    }
    Some(cur)
}

/// Removes the value at a path (a field, a keyed item, a set member).
pub fn remove_at(object: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = object;
    for seg in parents {
        let next = if let Some(f) = seg.strip_prefix("f:") {
            cur.get_mut(f)
        } else if let Some(k) = seg.strip_prefix("k:") {
            let wanted: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            cur.as_array_mut().and_then(|a| {
                a.iter_mut()
                    .find(|item| wanted.iter().all(|(key, val)| item.get(key) == Some(val)))
            })
        } else {
            None
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(k) = last.strip_prefix("k:") {
        let wanted: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
        if let Some(a) = cur.as_array_mut() {
            a.retain(|item| !wanted.iter().all(|(key, val)| item.get(key) == Some(val)));
        }
    } else if let Some(v) = last.strip_prefix("v:") {
        if let (Ok(wanted), Some(a)) = (serde_json::from_str::<Value>(v), cur.as_array_mut()) {
            a.retain(|item| *item != wanted);
        }
    }
}

/// FieldsV1 JSON for a set of paths.
pub fn to_fields_v1(set: &BTreeSet<FieldPath>) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut cur = &mut root;
        for (i, seg) in path.iter().enumerate() {
            // Looked up before inserting: most segments are there already, and `entry`
            // would want the key copied even then.
            if !cur.contains_key(seg.as_str()) {
                cur.insert(seg.clone(), json!({}));
            }
            let Some(entry) = cur.get_mut(seg.as_str()) else {
                break;
            };
            if seg.starts_with("k:") && i + 1 == path.len() {
                if let Some(m) = entry.as_object_mut() {
                    m.entry(".").or_insert_with(|| json!({}));
                }
            }
            cur = match entry.as_object_mut() {
                Some(m) => m,
                None => break,
            };
        }
    }
    Value::Object(root)
}

/// Paths of a FieldsV1 value.
pub fn from_fields_v1(v: &Value) -> BTreeSet<FieldPath> {
    fn go(v: &Value, path: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
        let Some(m) = v.as_object() else { return };
        let children: Vec<(&String, &Value)> =
            m.iter().filter(|(k, _)| k.as_str() != ".").collect();
        if (children.is_empty() || m.contains_key(".")) && !path.is_empty() {
            out.insert(path.clone());
        }
        for (k, child) in children {
            path.push(k.clone());
            go(child, path, out);
            path.pop();
        }
    }
    let mut out = BTreeSet::new();
    go(v, &mut Vec::new(), &mut out);
    out
}

/// A path in kube-apiserver's conflict notation (`.spec.replicas`).
pub fn display(path: &[String]) -> String {
    path.iter()
        .map(|seg| {
            if let Some(f) = seg.strip_prefix("f:") {
                format!(".{f}")
            } else if let Some(k) = seg.strip_prefix("k:") {
                // As kube-apiserver prints an item's keys: `[name="web",port=80]`.
                let keys: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
                let pairs: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("[{}]", pairs.join(","))
            } else if let Some(v) = seg.strip_prefix("v:") {
                format!("[={v}]")
            } else {
                seg.clone()
            }
        })
        .collect()
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
pub struct Managed {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub fields: BTreeSet<FieldPath>,
}

pub fn read_managed(object: &Value) -> Vec<Managed> {
    object
        .at("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| Managed {
                    manager: e
                        .get("manager")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    operation: e
                        .get("operation")
                        .and_then(Value::as_str)
                        .unwrap_or("Update")
                        .to_string(),
                    api_version: e
                        .get("apiVersion")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    time: e
                        .get("time")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    subresource: e
                        .get("subresource")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Who a `managedFields` entry names, and when.
struct Header<'a> {
    manager: &'a str,
    operation: &'a str,
    api_version: &'a str,
    time: &'a str,
    /// `""` for the main resource.
    subresource: &'a str,
}

impl Header<'_> {
    /// The entry, owning the paths of a FieldsV1 tree.
    fn entry(&self, fields_v1: Value) -> Value {
        let mut e = json!({
            "manager": self.manager, "operation": self.operation, "apiVersion": self.api_version,
            "time": self.time, "fieldsType": "FieldsV1", "fieldsV1": fields_v1,
        });
        if !self.subresource.is_empty() {
            e["subresource"] = json!(self.subresource);
        }
        e
    }
}

fn set_entries(object: &mut Value, entries: Vec<Value>) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

/// An object's `managedFields` entries as stored. Writes read them as JSON and parse the
/// fields of only the entries they change: most writes leave most managers alone.
/// Keeps `old`'s managedFields (their times) on `new` when, after the kind's defaults, the
/// two differ in nothing else. An apply that sets a write-only field (a Secret's
/// `stringData`, which the defaults fold into `data`) merges into an object that looks
/// changed until then; kube-apiserver stores nothing for it, and neither do we.
pub fn keep_times_if_unchanged(old: &Value, new: &mut Value) {
    if !same_but_managed(new, old) {
        return;
    }
    let untimed = |v: &Value| -> Vec<Value> {
        entries_of(v)
            .iter()
            .map(|e| {
                let mut e = e.clone();
                if let Some(o) = e.as_object_mut() {
                    o.remove("time");
                }
                e
            })
            .collect()
    };
    if untimed(old) == untimed(new) {
        set_entries(new, entries_of(old).to_vec());
    }
}

fn entries_of(object: &Value) -> &[Value] {
    object
        .at("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn entry_str<'a>(e: &'a Value, key: &str) -> &'a str {
    e.get(key).and_then(Value::as_str).unwrap_or("")
}

/// An entry's operation (`Update` when it names none, as [`read_managed`] reads it).
fn entry_operation(e: &Value) -> &str {
    e.get("operation")
        .and_then(Value::as_str)
        .unwrap_or("Update")
}

/// Whether an entry's FieldsV1 holds `path`, read from its JSON tree directly (as
/// [`from_fields_v1`] would list it).
fn entry_holds(e: &Value, path: &[String]) -> bool {
    let mut cur = match e.get("fieldsV1") {
        Some(v) => v,
        None => return false,
    };
    for seg in path {
        match cur.get(seg) {
            Some(next) => cur = next,
            None => return false,
        }
    }
    !path.is_empty() && is_path(cur)
}

/// `e` without `paths` (`None` when nothing is left of it).
fn entry_without(e: &Value, paths: &[FieldPath]) -> Option<Value> {
    if paths.is_empty() {
        return Some(e.clone());
    }
    let mut fields = e.get("fieldsV1").map(from_fields_v1).unwrap_or_default();
    for p in paths {
        fields.remove(p);
    }
    if fields.is_empty() {
        return None;
    }
    // The entry's header copied, not its old field tree (replaced at once).
    let mut entry: serde_json::Map<String, Value> = e
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != "fieldsV1")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    entry.insert("fieldsV1".into(), to_fields_v1(&fields));
    Some(Value::Object(entry))
}

/// Records that `manager` changed the fields that differ between `old` and `new` (an
/// `Update`), taking them from whoever owned them: `new`'s `managedFields` become `old`'s
/// with that change (whatever the client sent).
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: &str,
    api_version: &str,
    now: &str,
    lists: Lists<'_>,
) {
    let entries = old.map(entries_of).unwrap_or(&[]);
    let changed = field_tree(new, old, lists);
    if changed.is_empty() {
        set_entries(new, entries.to_vec());
        return;
    }
    // A manager's writes through a subresource are an entry apart from its writes through
    // the main resource, as kube-apiserver keeps them.
    let mine = |e: &Value| {
        entry_str(e, "manager") == manager
            && entry_operation(e) == "Update"
            && entry_str(e, "subresource") == subresource
    };
    let mut out = Vec::with_capacity(entries.len() + 1);
    let mut found = false;
    for e in entries {
        if mine(e) && !found {
            found = true;
            // The changed paths join the manager's tree where it stands (not listed out of it
            // and rebuilt: most updates change a few fields of a large set).
            let mut e = e.clone();
            if !e.get("fieldsV1").is_some_and(Value::is_object) {
                e["fieldsV1"] = leaf();
            }
            if let Some(Value::Object(tree)) = e.get_mut("fieldsV1") {
                union(tree, &changed);
            }
            e["time"] = json!(now);
            out.push(e);
            continue;
        }
        let taken = e
            .get("fieldsV1")
            .map(|fields| common(fields, &changed))
            .unwrap_or_default();
        out.extend(entry_without(e, &taken));
    }
    if !found {
        let header = Header {
            manager,
            operation: "Update",
            api_version,
            time: now,
            subresource,
        };
        out.push(header.entry(Value::Object(changed)));
    }
    set_entries(new, out);
}

/// The outcome of an apply: the merged object, nothing to change, or the conflicting
/// (manager, path) pairs.
pub enum Applied {
    Merged(Value),
    /// The apply changes neither the object nor who owns what: no write at all, as in
    /// kube-apiserver (the entry keeps its time, the object its resourceVersion, so
    /// controllers that apply status on every reconcile do not wake each other forever).
    Unchanged,
    Conflicts(Vec<(String, String)>),
}

/// Who applies, and how.
#[derive(Debug, Clone, Copy)]
pub struct Applier<'a> {
    pub manager: &'a str,
    /// `""` for the main resource, `"status"` for the status subresource: one manager's
    /// applies to each are owned apart, as kube-apiserver records them.
    pub subresource: &'a str,
    /// Take fields other managers own instead of reporting conflicts.
    pub force: bool,
    /// The time recorded in `managedFields`.
    pub now: &'a str,
    /// How the kind's lists merge.
    pub lists: Lists<'a>,
}

impl Applier<'_> {
    /// The applier's managedFields entry, owning `fields_v1` of an object at `api_version`.
    fn entry(&self, api_version: &str, fields_v1: Value) -> Value {
        let header = Header {
            manager: self.manager,
            operation: "Apply",
            api_version,
            time: self.now,
            subresource: self.subresource,
        };
        header.entry(fields_v1)
    }
}

/// Applies `config` for `applier` onto `current` (or creates from it).
pub fn apply(
    current: Option<&Value>,
    config: &Value,
    applier: &Applier<'_>,
) -> Result<Applied, String> {
    let Applier {
        manager,
        subresource,
        force,
        lists,
        ..
    } = *applier;
    let api_version = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let wanted = field_tree(config, None, lists);
    let Some(current) = current else {
        let mut created = config.clone();
        let entries = match wanted.is_empty() {
            true => Vec::new(),
            false => vec![applier.entry(api_version, Value::Object(wanted))],
        };
        set_entries(&mut created, entries);
        return Ok(Applied::Merged(created));
    };
    let entries = entries_of(current);
    let own = |e: &Value| {
        entry_str(e, "manager") == manager
            && entry_operation(e) == "Apply"
            && entry_str(e, "subresource") == subresource
    };
    // Conflicts: fields others own whose value this apply would change.
    let mut taken: Vec<(usize, FieldPath)> = Vec::new();
    for (i, e) in entries.iter().enumerate().filter(|(_, e)| !own(e)) {
        let held = e.get("fieldsV1").map(|f| common(f, &wanted));
        for path in held.into_iter().flatten() {
            if !same_at(current, config, &path) {
                taken.push((i, path));
            }
        }
    }
    if !taken.is_empty() && !force {
        let conflicts = taken
            .iter()
            .map(|(i, p)| (entry_str(&entries[*i], "manager").to_string(), display(p)))
            .collect();
        return Ok(Applied::Conflicts(conflicts));
    }
    let mut merged = current.clone();
    merge(&mut merged, config, lists)?;
    let wanted = Value::Object(wanted);
    let previous = entries
        .iter()
        .find(|e| own(e))
        .and_then(|e| e.get("fieldsV1"));
    // An apply that sets the same fields as the last one (new values, most often) has
    // nothing to drop: the trees are compared as they are, not listed.
    let same_fields = match previous {
        Some(previous) if *previous != wanted => {
            drop_unapplied(&mut merged, entries, &own, previous, &wanted)
        }
        previous => previous.is_some(),
    };
    if taken.is_empty() && same_fields && same_but_managed(&merged, current) {
        return Ok(Applied::Unchanged);
    }
    // Ownership: this manager now owns exactly what it applied; forced fields leave others.
    let mut out = Vec::with_capacity(entries.len() + 1);
    for (i, e) in entries.iter().enumerate().filter(|(_, e)| !own(e)) {
        let lost: Vec<FieldPath> = taken
            .iter()
            .filter(|(j, _)| *j == i)
            .map(|(_, p)| p.clone())
            .collect();
        out.extend(entry_without(e, &lost));
    }
    if wanted.as_object().is_some_and(|w| !w.is_empty()) {
        out.push(applier.entry(api_version, wanted));
    }
    set_entries(&mut merged, out);
    Ok(Applied::Merged(merged))
}

/// Removes from `merged` the fields the applier applied before (`previous`) and no longer
/// applies (`wanted`), but for those another manager owns; says whether both trees hold the
/// same paths after all (written otherwise).
fn drop_unapplied(
    merged: &mut Value,
    entries: &[Value],
    own: &dyn Fn(&Value) -> bool,
    previous: &Value,
    wanted: &Value,
) -> bool {
    let (previous, wanted) = (from_fields_v1(previous), from_fields_v1(wanted));
    for path in previous.difference(&wanted) {
        let owned_elsewhere = entries.iter().any(|e| !own(e) && entry_holds(e, path));
        // A path that now leads to fields applied (a list once owned whole, now by item after
        // its schema gave it keys) is not the manager's to remove.
        let still_applied = wanted
            .range(path.clone()..)
            .next()
            .is_some_and(|w| w.starts_with(path));
        if !owned_elsewhere && !still_applied {
            remove_at(merged, path);
        }
    }
    previous == wanted
}

/// Merges an applied configuration into `target`: strategic merge for built-in kinds, the
/// schema's list types for custom ones.
fn merge(target: &mut Value, config: &Value, lists: Lists<'_>) -> Result<(), String> {
    let config = strip_managed(config);
    match lists {
        Lists::Builtin => crate::strategic::apply(target, &config)?,
        Lists::Custom(schema) => {
            let Some(fields) = config.as_object() else {
                return Err("the applied configuration is not an object".into());
            };
            let Some(target) = target.as_object_mut() else {
                return Err("the object is not an object".into());
            };
            for (k, v) in fields {
                if v.is_null() {
                    target.remove(k);
                    continue;
                }
                let slot = target.entry(k.clone()).or_insert(Value::Null);
                if k == "metadata" {
                    json_patch::merge(slot, v);
                } else {
                    merge_custom(slot, v, schema.and_then(|s| s.root().field(k)));
                }
            }
        }
    }
    Ok(())
}

/// Whether two objects are the same but for their `managedFields`, compared in place.
fn same_but_managed(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let meta = |m: &Map<String, Value>| {
        m.get("metadata")
            .and_then(Value::as_object)
            .map(|m| m.iter().filter(|(k, _)| *k != "managedFields").count())
    };
    a.len() == b.len()
        && meta(a) == meta(b)
        && a.iter().all(|(k, v)| match (k.as_str(), b.get(k)) {
            (_, None) => false,
            ("metadata", Some(w)) => match (v.as_object(), w.as_object()) {
                (Some(x), Some(y)) => x
                    .iter()
                    .filter(|(k, _)| *k != "managedFields")
                    .all(|(k, v)| y.get(k) == Some(v)),
                _ => v == w,
            },
            (_, Some(w)) => v == w,
        })
}

/// Whether two objects agree at `path`. For a list item (a `k:` path) that is its being
/// there: its fields are paths of their own, so two managers that set different fields of
/// one item both keep owning the item.
fn same_at(a: &Value, b: &Value, path: &[String]) -> bool {
    match path.last() {
        Some(seg) if seg.starts_with("k:") => {
            value_at(a, path).is_some() == value_at(b, path).is_some()
        }
        _ => value_at(a, path) == value_at(b, path),
    }
}

fn strip_managed(config: &Value) -> Value {
    let mut c = config.clone();
    if let Some(meta) = c.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "managedFields",
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
        ] {
            meta.remove(k);
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by(manager: &str, force: bool) -> Applier<'_> {
        Applier {
            manager,
            subresource: "",
            force,
            now: "t",
            lists: Lists::Builtin,
        }
    }

    #[test]
    fn a_status_apply_leaves_the_same_managers_spec_alone() {
        let spec = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "k"}, "spec": {"version": "v1"}});
        let Applied::Merged(obj) = apply(None, &spec, &by("ctl", false)).unwrap() else {
            panic!()
        };
        let status = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "k"}, "status": {"ready": true}});
        let on_status = Applier {
            subresource: "status",
            ..by("ctl", false)
        };
        let Applied::Merged(obj) = apply(Some(&obj), &status, &on_status).unwrap() else {
            panic!()
        };
        assert_eq!(obj["spec"]["version"], "v1");
        assert_eq!(obj["status"]["ready"], true);
        let entries: Vec<(String, String)> = read_managed(&obj)
            .into_iter()
            .map(|m| (m.manager, m.subresource))
            .collect();
        assert_eq!(
            entries,
            vec![("ctl".into(), "".into()), ("ctl".into(), "status".into())]
        );
    }

    #[test]
    fn fields_round_trip_through_fields_v1() {
        let obj = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "b"}},
                         "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "web", "image": "x"}]}}}});
        let set = field_set(&obj, Lists::Builtin);
        let v1 = to_fields_v1(&set);
        assert_eq!(
            v1["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"]["f:image"],
            json!({})
        );
        assert_eq!(from_fields_v1(&v1), set);
    }

    #[test]
    fn conflicts_then_force_moves_ownership() {
        let base = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "1"}});
        let Applied::Merged(a) = apply(None, &base, &by("alice", false)).unwrap() else {
            panic!()
        };
        let mut bob = base.clone();
        bob["data"]["k"] = json!("2");
        match apply(Some(&a), &bob, &by("bob", false)).unwrap() {
            Applied::Conflicts(c) => {
                assert_eq!(c, vec![("alice".to_string(), ".data.k".to_string())])
            }
            _ => panic!("expected a conflict"),
        }
        let Applied::Merged(b) = apply(Some(&a), &bob, &by("bob", true)).unwrap() else {
            panic!()
        };
        assert_eq!(b["data"]["k"], "2");
        let managers: Vec<String> = read_managed(&b).iter().map(|m| m.manager.clone()).collect();
        assert_eq!(managers, vec!["bob"]);
    }

    #[test]
    fn equal_values_share_ownership_even_inside_associative_lists() {
        let config = |replicas: i64, image: &str| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                   "spec": {"replicas": replicas, "template": {"spec": {
                       "containers": [{"name": "web", "image": image}]}}}})
        };
        let Applied::Merged(a) = apply(None, &config(2, "nginx"), &by("alice", false)).unwrap()
        else {
            panic!()
        };
        // Bob applies the values Alice set: no conflict, and both own them.
        let Applied::Merged(b) = apply(Some(&a), &config(2, "nginx"), &by("bob", false)).unwrap()
        else {
            panic!("equal values must not conflict")
        };
        let image: FieldPath = [
            "f:spec",
            "f:template",
            "f:spec",
            "f:containers",
            "k:{\"name\":\"web\"}",
            "f:image",
        ]
        .map(String::from)
        .to_vec();
        let owners: Vec<String> = read_managed(&b)
            .into_iter()
            .filter(|m| m.fields.contains(&image))
            .map(|m| m.manager)
            .collect();
        assert_eq!(owners, ["alice", "bob"]);
        // A different value conflicts with the co-owner.
        match apply(Some(&b), &config(2, "httpd"), &by("bob", false)).unwrap() {
            Applied::Conflicts(c) => assert_eq!(
                c,
                vec![(
                    "alice".to_string(),
                    ".spec.template.spec.containers[name=\"web\"].image".to_string()
                )]
            ),
            _ => panic!("expected a conflict"),
        }
        // Alice stops applying the container: Bob still owns it, so it stays.
        let alice_less = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                                "spec": {"replicas": 2}});
        let Applied::Merged(c) = apply(Some(&b), &alice_less, &by("alice", false)).unwrap() else {
            panic!()
        };
        assert_eq!(
            c["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx"
        );
    }

    #[test]
    fn an_apply_that_changes_nothing_keeps_the_object_as_it_is() {
        let v1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        let Applied::Merged(obj) = apply(None, &v1, &by("m", false)).unwrap() else {
            panic!()
        };
        let later = Applier {
            now: "later",
            ..by("m", false)
        };
        assert!(
            matches!(apply(Some(&obj), &v1, &later), Ok(Applied::Unchanged)),
            "same object, same owners: no write"
        );
        let mut v2 = v1.clone();
        v2["data"]["a"] = json!("2");
        let Applied::Merged(changed) = apply(Some(&obj), &v2, &later).unwrap() else {
            panic!()
        };
        assert_eq!(read_managed(&changed)[0].time, "later");
    }

    #[test]
    fn fields_no_longer_applied_are_removed() {
        let v1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
        let Applied::Merged(obj) = apply(None, &v1, &by("m", false)).unwrap() else {
            panic!()
        };
        let v2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        let Applied::Merged(obj) = apply(Some(&obj), &v2, &by("m", false)).unwrap() else {
            panic!()
        };
        assert_eq!(obj["data"], json!({"a": "1"}));
    }

    fn conditions_schema() -> Schema {
        Schema::from_openapi(&json!({"type": "object", "properties": {"status": {"type": "object", "properties": {
            "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                           "items": {"type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "hosts": {"type": "array", "items": {"type": "string"}}}}}}))
        .unwrap()
    }

    fn status_of(manager: &str, schema: &Schema, status: Value) -> (Value, Applier<'static>) {
        let body =
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "k"}, "status": status});
        let manager: &'static str = Box::leak(manager.to_string().into_boxed_str());
        let schema: &'static Schema = Box::leak(Box::new(schema.clone()));
        (
            body,
            Applier {
                manager,
                subresource: "status",
                force: true,
                now: "t",
                lists: Lists::Custom(Some(schema)),
            },
        )
    }

    fn types(obj: &Value) -> Vec<String> {
        obj["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                format!(
                    "{}={}",
                    c["type"].as_str().unwrap(),
                    c["status"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn managers_own_their_own_items_of_a_custom_map_list() {
        let schema = conditions_schema();
        let (body, ctl) = status_of(
            "ctl",
            &schema,
            json!({"conditions": [{"type": "Ready", "status": "True"}], "hosts": ["a"], "tags": ["x"]}),
        );
        let Applied::Merged(obj) = apply(None, &body, &ctl).unwrap() else {
            panic!()
        };
        let (body, mhc) = status_of(
            "mhc",
            &schema,
            json!({"conditions": [{"type": "Healthy", "status": "False"}], "hosts": ["b"], "tags": ["y"]}),
        );
        let Applied::Merged(obj) = apply(Some(&obj), &body, &mhc).unwrap() else {
            panic!()
        };
        assert_eq!(types(&obj), ["Ready=True", "Healthy=False"]);
        assert_eq!(obj["status"]["tags"], json!(["x", "y"]), "a set is a union");
        assert_eq!(
            obj["status"]["hosts"],
            json!(["b"]),
            "an atomic list is replaced"
        );
        // The first manager applies again, its item changed: the other's item stays.
        let (body, ctl) = status_of(
            "ctl",
            &schema,
            json!({"conditions": [{"type": "Ready", "status": "False"}], "tags": ["x"]}),
        );
        let Applied::Merged(obj) = apply(Some(&obj), &body, &ctl).unwrap() else {
            panic!()
        };
        assert_eq!(types(&obj), ["Ready=False", "Healthy=False"]);
        // The second stops applying its item: only that item goes.
        let (body, mhc) = status_of("mhc", &schema, json!({"tags": ["y"]}));
        let Applied::Merged(obj) = apply(Some(&obj), &body, &mhc).unwrap() else {
            panic!()
        };
        assert_eq!(types(&obj), ["Ready=False"]);
        let owned = to_fields_v1(&read_managed(&obj)[0].fields);
        assert_eq!(
            owned["f:status"]["f:conditions"]["k:{\"type\":\"Ready\"}"]["f:status"],
            json!({})
        );
    }

    #[test]
    fn an_item_another_manager_set_otherwise_conflicts() {
        let schema = conditions_schema();
        let (body, ctl) = status_of(
            "ctl",
            &schema,
            json!({"conditions": [{"type": "Ready", "status": "True"}]}),
        );
        let Applied::Merged(obj) = apply(None, &body, &ctl).unwrap() else {
            panic!()
        };
        let (body, other) = status_of(
            "other",
            &schema,
            json!({"conditions": [{"type": "Ready", "status": "False"}]}),
        );
        let other = Applier {
            force: false,
            ..other
        };
        match apply(Some(&obj), &body, &other).unwrap() {
            Applied::Conflicts(c) => {
                assert_eq!(c[0].1, ".status.conditions[type=\"Ready\"].status")
            }
            _ => panic!("expected a conflict"),
        }
    }

    #[test]
    fn a_list_once_owned_whole_is_not_dropped_when_owned_by_item() {
        let schema = conditions_schema();
        // Written when the list was atomic: the manager owns `.status.conditions` whole.
        let (body, ctl) = status_of(
            "ctl",
            &schema,
            json!({"conditions": [{"type": "Ready", "status": "True"}]}),
        );
        let atomic = Applier {
            lists: Lists::Custom(None),
            ..ctl
        };
        let Applied::Merged(obj) = apply(None, &body, &atomic).unwrap() else {
            panic!()
        };
        let Applied::Merged(obj) = apply(Some(&obj), &body, &ctl).unwrap() else {
            panic!()
        };
        assert_eq!(types(&obj), ["Ready=True"]);
    }

    /// What an update changes, by definition: the new object's paths whose value differs.
    fn changed_by_definition(old: &Value, new: &Value, lists: Lists<'_>) -> BTreeSet<FieldPath> {
        field_set(new, lists)
            .into_iter()
            .filter(|p| value_at(old, p) != value_at(new, p))
            .collect()
    }

    #[test]
    fn changed_fields_are_the_paths_whose_value_differs() {
        let schema = conditions_schema();
        let old = json!({"metadata": {"name": "k", "labels": {"a": "1", "b": "2"}},
            "spec": {"containers": [{"name": "web", "image": "v1", "ports": [{"containerPort": 80}]},
                                    {"name": "side", "image": "s"}],
                     "finalizers": ["x", "y"], "replicas": 1},
            "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "Synced", "status": "True"}],
                       "tags": ["a"], "hosts": ["h1"], "nested": {"deep": {"x": 1}}}});
        let mut new = old.clone();
        new["metadata"]["labels"]["b"] = json!("3");
        new["metadata"]["labels"]["c"] = json!("4");
        new["spec"]["containers"][0]["image"] = json!("v2");
        new["spec"]["containers"][1]["name"] = json!("other");
        new["spec"]["finalizers"] = json!(["x", "z"]);
        new["status"]["conditions"][0]["status"] = json!("True");
        new["status"]["tags"] = json!(["a", "b"]);
        new["status"]["hosts"] = json!(["h2"]);
        new["status"]["nested"] = json!({"deep": {}});
        for lists in [
            Lists::Builtin,
            Lists::Custom(Some(&schema)),
            Lists::Custom(None),
        ] {
            let changed = changed_fields(&old, &new, lists);
            assert_eq!(
                changed,
                changed_by_definition(&old, &new, lists),
                "{lists:?}"
            );
            assert!(!changed.is_empty());
            assert!(changed_fields(&old, &old, lists).is_empty());
            assert_eq!(
                changed_fields(&json!({}), &new, lists),
                field_set(&new, lists)
            );
        }
    }

    #[test]
    fn an_entry_holds_exactly_the_paths_its_fields_list() {
        let schema = conditions_schema();
        let obj = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": {"y": 1}, "list": [1]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "tags": ["t"]}});
        let fields = field_set(&obj, Lists::Custom(Some(&schema)));
        let e = json!({"fieldsV1": to_fields_v1(&fields)});
        for p in &fields {
            assert!(entry_holds(&e, p), "{p:?}");
        }
        let parents = [
            vec!["f:spec".to_string()],
            vec!["f:spec".into(), "f:x".into()],
        ];
        for p in parents
            .iter()
            .chain([vec!["f:spec".into(), "f:z".into()]].iter())
        {
            assert!(!fields.contains(p) && !entry_holds(&e, p), "{p:?}");
        }
    }

    #[test]
    fn an_update_takes_the_fields_it_changes_from_their_owners() {
        let v1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
        let Applied::Merged(obj) = apply(None, &v1, &by("applier", false)).unwrap() else {
            panic!()
        };
        let mut edited = obj.clone();
        edited["data"]["b"] = json!("3");
        edited["data"]["c"] = json!("4");
        record_update(
            Some(&obj),
            &mut edited,
            "editor",
            "",
            "v1",
            "t2",
            Lists::Builtin,
        );
        let owners: Vec<(String, Vec<String>)> = read_managed(&edited)
            .into_iter()
            .map(|m| (m.manager, m.fields.iter().map(|p| display(p)).collect()))
            .collect();
        assert_eq!(
            owners,
            vec![
                ("applier".into(), vec![".data.a".into()]),
                ("editor".into(), vec![".data.b".into(), ".data.c".into()]),
            ]
        );
        // An update that changes nothing leaves every entry, times included, as it was.
        let mut same = edited.clone();
        record_update(
            Some(&edited),
            &mut same,
            "editor",
            "",
            "v1",
            "t3",
            Lists::Builtin,
        );
        assert_eq!(same, edited);
        // The same manager's next change joins its entry.
        let mut more = edited.clone();
        more["data"]["a"] = json!("9");
        record_update(
            Some(&edited),
            &mut more,
            "editor",
            "",
            "v1",
            "t4",
            Lists::Builtin,
        );
        let managed = read_managed(&more);
        assert_eq!(managed.len(), 1, "the applier owned only .data.a");
        assert_eq!(
            (managed[0].fields.len(), managed[0].time.as_str()),
            (3, "t4")
        );
    }

    #[test]
    fn paths_added_to_a_tree_read_back_as_the_union() {
        let path = |segs: &[&str]| segs.iter().map(|s| s.to_string()).collect::<FieldPath>();
        let before: BTreeSet<FieldPath> = [
            path(&["f:spec", "f:replicas"]),
            path(&["f:status", "f:conditions", r#"k:{"type":"Ready"}"#]),
            path(&[
                "f:status",
                "f:conditions",
                r#"k:{"type":"Ready"}"#,
                "f:status",
            ]),
        ]
        .into();
        let added: BTreeSet<FieldPath> = [
            path(&[
                "f:status",
                "f:conditions",
                r#"k:{"type":"Ready"}"#,
                "f:reason",
            ]),
            path(&["f:status", "f:conditions", r#"k:{"type":"Synced"}"#]),
            path(&["f:spec", "f:paused"]),
        ]
        .into();
        let (Value::Object(mut tree), Value::Object(more)) =
            (to_fields_v1(&before), to_fields_v1(&added))
        else {
            panic!("FieldsV1 is an object")
        };
        union(&mut tree, &more);
        let union: BTreeSet<FieldPath> = before.union(&added).cloned().collect();
        assert_eq!(from_fields_v1(&Value::Object(tree)), union);
    }

    #[test]
    fn two_trees_share_the_paths_both_sets_hold() {
        let schema = conditions_schema();
        let lists = Lists::Custom(Some(&schema));
        let mine = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": {"y": 1, "z": 2}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "True"}],
                       "tags": ["t", "u"]}});
        let theirs = json!({"metadata": {"labels": {"b": "9"}}, "spec": {"x": {"z": 3}, "w": 1},
            "status": {"conditions": [{"type": "Ready", "reason": "R"}], "tags": ["u", "v"]}});
        let tree = field_tree(&theirs, None, lists);
        let held = json!(to_fields_v1(&field_set(&mine, lists)));
        let by_sets: Vec<FieldPath> = field_set(&mine, lists)
            .intersection(&field_set(&theirs, lists))
            .cloned()
            .collect();
        assert_eq!(common(&held, &tree), by_sets);
        assert!(by_sets
            .iter()
            .any(|p| p.last().is_some_and(|s| s.starts_with("k:"))));
        // labels.b, spec.x.z, the Ready item and its key field, the set member "u".
        assert_eq!(by_sets.len(), 5, "{by_sets:?}");
    }
}
