//! A property filter's specification (`PropertyFilterSpec`), parsed once from its SOAP
//! form: which properties of which types, the objects to start from, and the traversals
//! (`TraversalSpec`, and `SelectionSpec` references to named ones) that reach further objects.
//! RetrievePropertiesEx parses one per call; CreateFilter keeps its parsed spec for every
//! later wait.

use crate::fault::Fault;
use crate::soap::Element;
use crate::value::Moref;
use std::collections::HashMap;

#[derive(Debug, Clone)]
pub(crate) struct PropertySpec {
    pub(crate) ty: String,
    pub(crate) all: bool,
    pub(crate) paths: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) enum Selection {
    Named(String),
    Traversal(Traversal),
}

#[derive(Debug, Clone)]
pub(crate) struct Traversal {
    pub(crate) ty: String,
    pub(crate) path: String,
    pub(crate) skip: bool,
    pub(crate) select: Vec<Selection>,
}

#[derive(Debug, Clone)]
pub(crate) struct ObjectSpec {
    pub(crate) obj: Moref,
    pub(crate) skip: bool,
    pub(crate) select: Vec<Selection>,
}

#[derive(Debug, Clone)]
pub(crate) struct FilterSpec {
    pub(crate) props: Vec<PropertySpec>,
    pub(crate) objects: Vec<ObjectSpec>,
    /// Named traversal specs anywhere in the filter, for SelectionSpec references.
    pub(crate) named: HashMap<String, Traversal>,
}

fn parse_selection(el: &Element, named: &mut HashMap<String, Traversal>) -> Selection {
    let is_traversal =
        el.xsi_type.as_deref() == Some("TraversalSpec") || el.child("path").is_some();
    if !is_traversal {
        return Selection::Named(el.text_of("name").unwrap_or("").to_string());
    }
    let t = Traversal {
        ty: el.text_of("type").unwrap_or("").to_string(),
        path: el.text_of("path").unwrap_or("").to_string(),
        skip: el.flag("skip").unwrap_or(false),
        select: el
            .children_named("selectSet")
            .map(|s| parse_selection(s, named))
            .collect(),
    };
    if let Some(name) = el.text_of("name").filter(|n| !n.is_empty()) {
        named.insert(name.to_string(), t.clone());
    }
    Selection::Traversal(t)
}

pub(crate) fn parse_filter(el: &Element) -> Result<FilterSpec, Fault> {
    let mut named = HashMap::new();
    let props = el
        .children_named("propSet")
        .map(|p| PropertySpec {
            ty: p.text_of("type").unwrap_or("").to_string(),
            all: p.flag("all").unwrap_or(false),
            paths: p
                .children_named("pathSet")
                .map(|c| c.text.trim().to_string())
                .collect(),
        })
        .collect();
    let mut objects = Vec::new();
    for o in el.children_named("objectSet") {
        let obj = o
            .child("obj")
            .and_then(Element::moref)
            .ok_or_else(|| Fault::invalid_argument("objectSet.obj"))?;
        objects.push(ObjectSpec {
            obj,
            skip: o.flag("skip").unwrap_or(false),
            select: o
                .children_named("selectSet")
                .map(|s| parse_selection(s, &mut named))
                .collect(),
        });
    }
    Ok(FilterSpec {
        props,
        objects,
        named,
    })
}
