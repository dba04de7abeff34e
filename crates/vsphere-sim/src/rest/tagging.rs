//! The tagging service (`/rest/com/vmware/cis/tagging/...`, `/api/cis/tagging/...`):
//! categories (cardinality, associable types), tags in them, and tags attached to inventory
//! objects. CAPV reads failure domains from `k8s-region` / `k8s-zone` tags this way.
//!
//! vCenter's rules: names are unique (a category's among categories, a tag's within its
//! category); a SINGLE-cardinality category allows one of its tags per object; a category
//! with associable types takes only objects of those types; deleting a category deletes its
//! tags, and deleting a tag detaches it everywhere.

use super::sim::Sim;
use super::wire::{spec, text, Answer, Form, Request};
use crate::value::Moref;
use http::Method;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Category {
    name: String,
    description: String,
    cardinality: String,
    associable_types: Vec<String>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Tag {
    name: String,
    description: String,
    category: String,
}

/// A simulator's categories, tags and attachments, by ID.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Tagging {
    categories: BTreeMap<String, Category>,
    tags: BTreeMap<String, Tag>,
    /// Each tag's objects, as (type, value).
    attached: BTreeMap<String, BTreeSet<Moref>>,
}

/// Which tagging resource a path names, with its ID if it names one.
pub(super) fn route(form: Form, path: &str) -> Option<(&str, Option<&str>)> {
    let rest = match form {
        Form::Rest => path.strip_prefix("/com/vmware/cis/tagging/")?,
        Form::Api => path.strip_prefix("/cis/tagging/")?,
    };
    // `/rest` names an object `id:<id>`; `/api` names it bare.
    let (kind, id) = match rest.split_once('/') {
        Some((kind, id)) => (kind, Some(id.strip_prefix("id:").unwrap_or(id))),
        None => (rest, None),
    };
    matches!(kind, "category" | "tag" | "tag-association").then_some((kind, id))
}

pub(super) fn handle(
    sim: &Sim<'_, Tagging>,
    form: Form,
    req: &Request<'_>,
    kind: &str,
    id: Option<&str>,
) -> Answer {
    let body = match super::wire::json_body(form, req.body) {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    let id = id.map(percent_decode);
    let mut t = sim.own_state();
    // Objects deleted since (a destroyed VM) lose their tags, as vCenter drops them.
    sim.with_inventory(|inv| {
        for objects in t.attached.values_mut() {
            objects.retain(|m| inv.get(m).is_some());
        }
    });
    match (kind, req.method, id.as_deref(), req.action) {
        ("category", &Method::POST, None, None) => {
            t.create_category(form, spec(&body, "create_spec"))
        }
        ("category", &Method::GET, None, None) => {
            Answer::value(form, 200, json!(t.categories.keys().collect::<Vec<_>>()))
        }
        ("category", &Method::GET, Some(id), None) => t.get_category(form, id),
        ("category", &Method::PATCH, Some(id), None) => {
            t.update_category(form, id, spec(&body, "update_spec"))
        }
        ("category", &Method::DELETE, Some(id), None) => t.delete_category(form, id),
        ("tag", &Method::POST, None, None) => t.create_tag(form, spec(&body, "create_spec")),
        ("tag", &Method::GET, None, None) => {
            Answer::value(form, 200, json!(t.tags.keys().collect::<Vec<_>>()))
        }
        ("tag", &Method::GET, Some(id), None) => t.get_tag(form, id),
        ("tag", &Method::PATCH, Some(id), None) => {
            t.update_tag(form, id, spec(&body, "update_spec"))
        }
        ("tag", &Method::DELETE, Some(id), None) => t.delete_tag(form, id),
        ("tag", &Method::POST, Some(category), Some("list-tags-for-category")) => {
            t.tags_for_category(form, category)
        }
        ("tag-association", &Method::POST, tag, Some(action)) => {
            drop(t);
            associate(sim, form, tag, action, &body)
        }
        _ => Answer::not_found(form, req.path),
    }
}

/// The ID a successful create answered (in the `/api` spelling: the bare JSON string).
fn created_id(answer: Answer) -> Result<String, Answer> {
    match serde_json::from_str::<String>(&answer.body) {
        Ok(id) if answer.status < 300 => Ok(id),
        _ => Err(answer),
    }
}

fn percent_decode(s: &str) -> String {
    s.replace("%3A", ":").replace("%3a", ":")
}

fn category_json(id: &str, c: &Category) -> Value {
    json!({"id": id, "name": c.name, "description": c.description, "cardinality": c.cardinality,
           "associable_types": c.associable_types, "used_by": []})
}

fn tag_json(id: &str, t: &Tag) -> Value {
    json!({"id": id, "name": t.name, "description": t.description, "category_id": t.category, "used_by": []})
}

impl Tagging {
    fn create_category(&mut self, form: Form, spec: &Value) -> Answer {
        let name = text(spec, "name");
        if name.is_empty() {
            return Answer::invalid(form, "Category name is required.");
        }
        let cardinality = text(spec, "cardinality");
        if cardinality != "SINGLE" && cardinality != "MULTIPLE" {
            return Answer::invalid(
                form,
                &format!("Invalid cardinality {cardinality:?}: SINGLE or MULTIPLE."),
            );
        }
        if self.categories.values().any(|c| c.name == name) {
            return Answer::already_exists(
                form,
                &format!("Category with name {name} already exists."),
            );
        }
        let associable_types = super::wire::strings(spec, "associable_types");
        let id = format!(
            "urn:vmomi:InventoryServiceCategory:{}:GLOBAL",
            uuid::Uuid::new_v4()
        );
        let category = Category {
            name,
            description: text(spec, "description"),
            cardinality,
            associable_types,
        };
        self.categories.insert(id.clone(), category);
        Answer::value(form, if form == Form::Api { 201 } else { 200 }, json!(id))
    }

    fn get_category(&self, form: Form, id: &str) -> Answer {
        match self.categories.get(id) {
            Some(c) => Answer::value(form, 200, category_json(id, c)),
            None => Answer::missing(form, "Category", id),
        }
    }

    fn update_category(&mut self, form: Form, id: &str, spec: &Value) -> Answer {
        let name = text(spec, "name");
        if !name.is_empty()
            && self
                .categories
                .iter()
                .any(|(other, c)| other != id && c.name == name)
        {
            return Answer::already_exists(
                form,
                &format!("Category with name {name} already exists."),
            );
        }
        let Some(c) = self.categories.get_mut(id) else {
            return Answer::missing(form, "Category", id);
        };
        if !name.is_empty() {
            c.name = name;
        }
        if let Some(d) = spec.get("description").and_then(Value::as_str) {
            c.description = d.to_string();
        }
        match text(spec, "cardinality").as_str() {
            "" => {}
            "SINGLE" | "MULTIPLE" => c.cardinality = text(spec, "cardinality"),
            other => {
                return Answer::invalid(
                    form,
                    &format!("Invalid cardinality {other:?}: SINGLE or MULTIPLE."),
                )
            }
        }
        // Associable types may only grow (vCenter refuses to remove one).
        for ty in spec
            .get("associable_types")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(ty) = ty
                .as_str()
                .filter(|ty| !c.associable_types.iter().any(|t| t == ty))
            {
                c.associable_types.push(ty.to_string());
            }
        }
        Answer::empty(if form == Form::Api { 204 } else { 200 })
    }

    fn delete_category(&mut self, form: Form, id: &str) -> Answer {
        if self.categories.remove(id).is_none() {
            return Answer::missing(form, "Category", id);
        }
        let tags: Vec<String> = self
            .tags
            .iter()
            .filter(|(_, t)| t.category == id)
            .map(|(k, _)| k.clone())
            .collect();
        for tag in tags {
            self.tags.remove(&tag);
            self.attached.remove(&tag);
        }
        Answer::empty(if form == Form::Api { 204 } else { 200 })
    }

    fn create_tag(&mut self, form: Form, spec: &Value) -> Answer {
        let name = text(spec, "name");
        let category = text(spec, "category_id");
        if name.is_empty() {
            return Answer::invalid(form, "Tag name is required.");
        }
        if !self.categories.contains_key(&category) {
            return Answer::missing(form, "Category", &category);
        }
        if self
            .tags
            .values()
            .any(|t| t.category == category && t.name == name)
        {
            return Answer::already_exists(
                form,
                &format!("Tag with name {name} already exists in category {category}."),
            );
        }
        let id = format!(
            "urn:vmomi:InventoryServiceTag:{}:GLOBAL",
            uuid::Uuid::new_v4()
        );
        self.tags.insert(
            id.clone(),
            Tag {
                name,
                description: text(spec, "description"),
                category,
            },
        );
        Answer::value(form, if form == Form::Api { 201 } else { 200 }, json!(id))
    }

    fn get_tag(&self, form: Form, id: &str) -> Answer {
        match self.tags.get(id) {
            Some(t) => Answer::value(form, 200, tag_json(id, t)),
            None => Answer::missing(form, "Tag", id),
        }
    }

    fn update_tag(&mut self, form: Form, id: &str, spec: &Value) -> Answer {
        let name = text(spec, "name");
        let Some(category) = self.tags.get(id).map(|t| t.category.clone()) else {
            return Answer::missing(form, "Tag", id);
        };
        if !name.is_empty()
            && self
                .tags
                .iter()
                .any(|(other, t)| other != id && t.category == category && t.name == name)
        {
            return Answer::already_exists(
                form,
                &format!("Tag with name {name} already exists in category {category}."),
            );
        }
        if let Some(t) = self.tags.get_mut(id) {
            if !name.is_empty() {
                t.name = name;
            }
            if let Some(d) = spec.get("description").and_then(Value::as_str) {
                t.description = d.to_string();
            }
        }
        Answer::empty(if form == Form::Api { 204 } else { 200 })
    }

    fn delete_tag(&mut self, form: Form, id: &str) -> Answer {
        if self.tags.remove(id).is_none() {
            return Answer::missing(form, "Tag", id);
        }
        self.attached.remove(id);
        Answer::empty(if form == Form::Api { 204 } else { 200 })
    }

    fn tags_for_category(&self, form: Form, category: &str) -> Answer {
        if !self.categories.contains_key(category) {
            return Answer::missing(form, "Category", category);
        }
        let ids: Vec<&String> = self
            .tags
            .iter()
            .filter(|(_, t)| t.category == category)
            .map(|(k, _)| k)
            .collect();
        Answer::value(form, 200, json!(ids))
    }

    /// Attaches `tag` to `object` under its category's rules; `Err` is the refusal.
    fn attach(&mut self, form: Form, tag: &str, object: &Moref) -> Result<(), Answer> {
        let Some(t) = self.tags.get(tag) else {
            return Err(Answer::missing(form, "Tag", tag));
        };
        let Some(category) = self.categories.get(&t.category) else {
            return Err(Answer::missing(form, "Category", &t.category));
        };
        if !category.associable_types.is_empty()
            && !category.associable_types.iter().any(|t| *t == object.ty)
        {
            return Err(Answer::invalid(
                form,
                &format!(
                    "Tag {tag} cannot be attached to an object of type {}.",
                    object.ty
                ),
            ));
        }
        if category.cardinality == "SINGLE" {
            let other = self.tags.iter().any(|(id, other)| {
                id != tag
                    && other.category == t.category
                    && self.attached.get(id).is_some_and(|o| o.contains(object))
            });
            if other {
                return Err(Answer::invalid(
                    form,
                    &format!(
                        "Object {} already has a tag of the single-cardinality category {}.",
                        object.value, category.name
                    ),
                ));
            }
        }
        self.attached
            .entry(tag.to_string())
            .or_default()
            .insert(object.clone());
        Ok(())
    }

    /// Attaches the tag `tag` of category `category` to `object`, creating the category (single
    /// cardinality, associable with `types`) and the tag when there are none of those names:
    /// what the library's provisioning calls (`Simulator::attach_tag`) do at once.
    pub(crate) fn ensure_attached(
        &mut self,
        category: &str,
        types: &[String],
        tag: &str,
        object: &Moref,
    ) -> Result<(), String> {
        let form = Form::Api;
        let refused = |a: Answer| a.body;
        let category_id = match self.categories.iter().find(|(_, c)| c.name == category) {
            Some((id, _)) => id.clone(),
            None => {
                let spec = json!({"name": category, "cardinality": "SINGLE",
                                  "associable_types": types, "description": ""});
                created_id(self.create_category(form, &spec)).map_err(refused)?
            }
        };
        let tag_id = match self
            .tags
            .iter()
            .find(|(_, t)| t.category == category_id && t.name == tag)
        {
            Some((id, _)) => id.clone(),
            None => {
                let spec = json!({"name": tag, "category_id": category_id, "description": ""});
                created_id(self.create_tag(form, &spec)).map_err(refused)?
            }
        };
        self.attach(form, &tag_id, object).map_err(refused)
    }

    fn attached_tags(&self, object: &Moref) -> Vec<&String> {
        self.attached
            .iter()
            .filter(|(_, objects)| objects.contains(object))
            .map(|(tag, _)| tag)
            .collect()
    }
}

/// An `object_id` (`{"type": "VirtualMachine", "id": "vm-42"}`) as a reference.
fn object_of(v: &Value) -> Option<Moref> {
    Some(Moref::new(v.get("type")?.as_str()?, v.get("id")?.as_str()?))
}

fn object_json(m: &Moref) -> Value {
    json!({"type": m.ty, "id": m.value})
}

/// The tag-association actions. Lock order: the tagging state, then the inventory (read to
/// check that an object exists); nothing takes them the other way round.
fn associate(
    sim: &Sim<'_, Tagging>,
    form: Form,
    tag: Option<&str>,
    action: &str,
    body: &Value,
) -> Answer {
    let exists = |m: &Moref| sim.with_inventory(|inv| inv.get(m).is_some());
    let object = body.get("object_id").and_then(object_of);
    let tag_ids: Vec<String> = super::wire::strings(body, "tag_ids")
        .iter()
        .map(|t| percent_decode(t))
        .collect();
    let no_object = || Answer::invalid(form, "object_id is required.");
    let unknown = |m: &Moref| Answer::missing(form, "Object", &m.value);
    let mut t = sim.own_state();
    let ok = || Answer::empty(if form == Form::Api { 204 } else { 200 });
    match (action, tag.map(percent_decode)) {
        ("attach", Some(tag)) => match object {
            None => no_object(),
            Some(m) if !exists(&m) => unknown(&m),
            Some(m) => t.attach(form, &tag, &m).map_or_else(|e| e, |()| ok()),
        },
        ("detach", Some(tag)) => match object {
            None => no_object(),
            Some(m) => {
                if let Some(objects) = t.attached.get_mut(&tag) {
                    objects.remove(&m);
                }
                ok()
            }
        },
        ("attach-tag-to-multiple-objects", Some(tag)) => {
            let objects: Vec<Moref> = body
                .get("object_ids")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(object_of)
                .collect();
            for m in &objects {
                if !exists(m) {
                    return unknown(m);
                }
                if let Err(e) = t.attach(form, &tag, m) {
                    return e;
                }
            }
            ok()
        }
        ("attach-multiple-tags-to-object" | "detach-multiple-tags-from-object", None) => {
            let Some(m) = object else { return no_object() };
            if !exists(&m) {
                return unknown(&m);
            }
            let mut errors = Vec::new();
            for tag in &tag_ids {
                if action.starts_with("attach") {
                    if let Err(e) = t.attach(form, tag, &m) {
                        errors.push(serde_json::from_str::<Value>(&e.body).unwrap_or(Value::Null));
                    }
                } else if let Some(objects) = t.attached.get_mut(tag) {
                    objects.remove(&m);
                }
            }
            Answer::value(
                form,
                200,
                json!({"success": errors.is_empty(), "error_messages": errors}),
            )
        }
        (list, tag) if list.starts_with("list-") => listing(
            &t,
            form,
            list,
            tag.as_deref(),
            object.as_ref(),
            &tag_ids,
            body,
        ),
        _ => Answer::not_found(form, action),
    }
}

/// The tag-association reads: tags on an object, objects of a tag, and both in bulk.
fn listing(
    t: &Tagging,
    form: Form,
    action: &str,
    tag: Option<&str>,
    object: Option<&Moref>,
    tag_ids: &[String],
    body: &Value,
) -> Answer {
    let objects_of = |tag: &str| -> Vec<Value> {
        t.attached
            .get(tag)
            .into_iter()
            .flatten()
            .map(object_json)
            .collect()
    };
    match (action, tag) {
        ("list-attached-tags", None) => match object {
            None => Answer::invalid(form, "object_id is required."),
            Some(m) => Answer::value(form, 200, json!(t.attached_tags(m))),
        },
        ("list-attached-objects", Some(tag)) => {
            if !t.tags.contains_key(tag) {
                return Answer::missing(form, "Tag", tag);
            }
            Answer::value(form, 200, json!(objects_of(tag)))
        }
        ("list-attached-objects-on-tags", None) => {
            let out: Vec<Value> = tag_ids
                .iter()
                .filter(|id| t.tags.contains_key(*id))
                .map(|id| json!({"tag_id": id, "object_ids": objects_of(id)}))
                .collect();
            Answer::value(form, 200, json!(out))
        }
        ("list-attached-tags-on-objects", None) => {
            let out: Vec<Value> = body
                .get("object_ids")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(object_of)
                .map(|m| json!({"object_id": object_json(&m), "tag_ids": t.attached_tags(&m)}))
                .collect();
            Answer::value(form, 200, json!(out))
        }
        _ => Answer::not_found(form, action),
    }
}
