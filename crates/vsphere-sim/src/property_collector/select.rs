//! What a property filter selects and what it reads of each object: the objects its
//! traversals reach from its starting objects (each once, in traversal order), the property
//! paths its specs ask of each, and a property's value including those computed at read time.
//! RetrievePropertiesEx and the waits for updates both read through here.

use crate::call::Call;
use crate::fault::Fault;
use crate::filter_spec::{FilterSpec, Selection};
use crate::objects::{is_a, ManagedObject};
use crate::state::State;
use crate::value::{mor_array, write_element, Moref, Val};
use crate::{service_instance, session_manager, view_manager};
use std::borrow::Cow;
use std::collections::HashSet;

/// A property's value, including those computed at read time.
pub(crate) fn property<'a>(
    state: &State,
    call: &Call<'_>,
    obj: &'a ManagedObject,
    path: &str,
) -> Option<Cow<'a, Val>> {
    let (head, rest) = path.split_once('.').unwrap_or((path, ""));
    let dynamic = match (&*obj.moref.ty, head) {
        ("ContainerView", "view") => Some(mor_array(view_manager::view_contents(state, obj))),
        ("SessionManager", "currentSession") => call
            .session
            .as_ref()
            .and_then(|k| state.sessions.get(k))
            .map(|s| Val::from(session_manager::user_session(s))),
        ("SessionManager", "sessionList") => Some(session_manager::session_list(state)),
        ("ServiceInstance", "content") => Some(Val::from(service_instance::service_content(call))),
        ("ServiceInstance", "serverClock") => Some(Val::Time(call.now)),
        _ => None,
    };
    // A stored value is written straight from the inventory; only computed ones are owned.
    match dynamic {
        Some(v) if rest.is_empty() => Some(Cow::Owned(v)),
        Some(v) => v.path(rest).cloned().map(Cow::Owned),
        None => obj.path(path).map(Cow::Borrowed),
    }
}

/// Where a selection notes the objects it read to find others (see
/// `FilterReport::nodes`); a one-off retrieve notes nothing.
pub(crate) type Nodes<'n> = Option<&'n mut HashSet<String>>;

/// The objects a filter selects, in traversal order, each once.
pub(crate) fn collect(
    state: &State,
    spec: &FilterSpec,
    mut nodes: Nodes<'_>,
) -> Result<Vec<Moref>, Fault> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut walked = HashSet::new();
    for o in &spec.objects {
        if state.inventory.by_value(&o.obj.value).is_none() {
            return Err(Fault::not_found(&o.obj));
        }
        if let Some(n) = nodes.as_deref_mut() {
            // Its removal changes everything the filter selects.
            n.insert(o.obj.value.clone());
        }
        if !o.skip && seen.insert(o.obj.value.clone()) {
            out.push(o.obj.clone());
        }
        let mut walk = Walk {
            state,
            spec,
            out: &mut out,
            seen: &mut seen,
            walked: &mut walked,
            nodes: nodes.as_deref_mut(),
        };
        walk.from(&o.obj, &o.select, 0);
    }
    Ok(out)
}

/// One walk of a filter's traversals: what it found so far.
struct Walk<'a, 'n> {
    state: &'a State,
    spec: &'a FilterSpec,
    out: &'a mut Vec<Moref>,
    seen: &'a mut HashSet<String>,
    walked: &'a mut HashSet<(String, String)>,
    nodes: Nodes<'n>,
}

impl Walk<'_, '_> {
    fn from(&mut self, from: &Moref, select: &[Selection], depth: usize) {
        if depth > 64 {
            return;
        }
        let state = self.state;
        let Some(obj) = state.inventory.by_value(&from.value) else {
            return;
        };
        for sel in select {
            let t = match sel {
                Selection::Traversal(t) => t,
                Selection::Named(name) => match self.spec.named.get(name) {
                    Some(t) => t,
                    None => continue,
                },
            };
            if !is_a(&obj.moref.ty, &t.ty) {
                continue;
            }
            // Each (object, traversal) pair is walked once: specs are often recursive.
            if !self
                .walked
                .insert((obj.moref.value.clone(), format!("{}.{}", t.ty, t.path)))
            {
                continue;
            }
            let targets = match &*obj.moref.ty {
                "ContainerView" if t.path == "view" => {
                    view_manager::view_contents_noting(state, obj, self.nodes.as_deref_mut())
                }
                _ => {
                    if let Some(n) = self.nodes.as_deref_mut() {
                        n.insert(obj.moref.value.clone());
                    }
                    obj.path(&t.path).map(Val::morefs).unwrap_or_default()
                }
            };
            for target in targets {
                if state.inventory.by_value(&target.value).is_none() {
                    continue;
                }
                if !t.skip && self.seen.insert(target.value.clone()) {
                    self.out.push(target.clone());
                }
                // A traversal that selects nothing further (a view's `view`, the usual case
                // when listing thousands of VMs) needs no walk into each target.
                if !t.select.is_empty() {
                    self.from(&target, &t.select, depth + 1);
                }
            }
        }
    }
}

/// The body of one ObjectContent (its `obj` and `propSet`s), rendered.
pub(crate) fn object_content(
    state: &State,
    call: &Call<'_>,
    spec: &FilterSpec,
    m: &Moref,
) -> Option<String> {
    let obj = state.inventory.by_value(&m.value)?;
    let paths = wanted_paths(spec, obj)?;
    let mut out = String::new();
    write_element(&mut out, "obj", &Val::Mor(obj.moref.clone()), false);
    for path in paths {
        if let Some(v) = property(state, call, obj, path) {
            out.push_str("<propSet><name>");
            crate::value::escape_into(&mut out, path);
            out.push_str("</name>");
            write_element(&mut out, "val", &v, true);
            out.push_str("</propSet>");
        }
    }
    Some(out)
}

/// The property paths a filter asks of an object, each once, in the spec's order; `None`
/// when no property spec names the object's type (the object is not reported at all).
pub(crate) fn wanted_paths<'a>(
    spec: &'a FilterSpec,
    obj: &'a ManagedObject,
) -> Option<Vec<&'a str>> {
    let mut wanted = spec
        .props
        .iter()
        .filter(|p| is_a(&obj.moref.ty, &p.ty))
        .peekable();
    wanted.peek()?;
    let mut out: Vec<&str> = Vec::new();
    for p in wanted {
        let paths: Box<dyn Iterator<Item = &str>> = if p.all {
            Box::new(obj.props.keys().map(|k| k.as_ref()))
        } else {
            Box::new(p.paths.iter().map(String::as_str))
        };
        for path in paths {
            // A handful of paths per spec: a scan beats hashing each one.
            if !out.contains(&path) {
                out.push(path);
            }
        }
    }
    Some(out)
}
