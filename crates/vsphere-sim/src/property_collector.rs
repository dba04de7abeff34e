//! PropertyCollector: RetrieveProperties, RetrievePropertiesEx with `maxObjects` paging,
//! ContinueRetrievePropertiesEx, CancelRetrievePropertiesEx; TraversalSpec and named
//! SelectionSpec recursion; nested property paths; and `Fetch`, the one-property read
//! pyvmomi uses for attribute access.
//!
//! The collectors' state (`Collectors`: paged results still to hand out, property filters,
//! what each collector last reported, cancelled waits) lives here; every piece of it belongs
//! to a session, and `drop_session` forgets a session's at logout.

use crate::call::Call;
use crate::fault::Fault;
use crate::objects::{is_a, refs, ManagedObject};
use crate::soap::Element;
use crate::state::collectors::{CollectorKey, Filter, FilterValues};
use crate::state::State;
use crate::value::{mor_array, write_element, Moref, Val};
use crate::{service_instance, session_manager, view_manager};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone)]
struct PropertySpec {
    ty: String,
    all: bool,
    paths: Vec<String>,
}

#[derive(Debug, Clone)]
enum Selection {
    Named(String),
    Traversal(Traversal),
}

#[derive(Debug, Clone)]
struct Traversal {
    ty: String,
    path: String,
    skip: bool,
    select: Vec<Selection>,
}

#[derive(Debug, Clone)]
struct ObjectSpec {
    obj: Moref,
    skip: bool,
    select: Vec<Selection>,
}

#[derive(Debug, Clone)]
struct FilterSpec {
    props: Vec<PropertySpec>,
    objects: Vec<ObjectSpec>,
    /// Named traversal specs anywhere in the filter, for SelectionSpec references.
    named: HashMap<String, Traversal>,
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

fn parse_filter(el: &Element) -> Result<FilterSpec, Fault> {
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

/// The objects a filter selects, in traversal order, each once.
fn collect(state: &State, spec: &FilterSpec) -> Result<Vec<Moref>, Fault> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut walked = HashSet::new();
    for o in &spec.objects {
        if state.inventory.by_value(&o.obj.value).is_none() {
            return Err(Fault::not_found(&o.obj));
        }
        if !o.skip && seen.insert(o.obj.value.clone()) {
            out.push(o.obj.clone());
        }
        walk(
            state,
            spec,
            &o.obj,
            &o.select,
            &mut out,
            &mut seen,
            &mut walked,
            0,
        );
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn walk(
    state: &State,
    spec: &FilterSpec,
    from: &Moref,
    select: &[Selection],
    out: &mut Vec<Moref>,
    seen: &mut HashSet<String>,
    walked: &mut HashSet<(String, String)>,
    depth: usize,
) {
    if depth > 64 {
        return;
    }
    let Some(obj) = state.inventory.by_value(&from.value) else {
        return;
    };
    for sel in select {
        let t = match sel {
            Selection::Traversal(t) => t,
            Selection::Named(name) => match spec.named.get(name) {
                Some(t) => t,
                None => continue,
            },
        };
        if !is_a(&obj.moref.ty, &t.ty) {
            continue;
        }
        // Each (object, traversal) pair is walked once: specs are often recursive.
        if !walked.insert((obj.moref.value.clone(), format!("{}.{}", t.ty, t.path))) {
            continue;
        }
        let targets = match &*obj.moref.ty {
            "ContainerView" if t.path == "view" => view_manager::view_contents(state, obj),
            _ => obj.path(&t.path).map(Val::morefs).unwrap_or_default(),
        };
        for target in targets {
            if state.inventory.by_value(&target.value).is_none() {
                continue;
            }
            if !t.skip && seen.insert(target.value.clone()) {
                out.push(target.clone());
            }
            // A traversal that selects nothing further (a view's `view`, the usual case
            // when listing thousands of VMs) needs no walk into each target.
            if !t.select.is_empty() {
                walk(
                    state,
                    spec,
                    &target,
                    &t.select,
                    out,
                    seen,
                    walked,
                    depth + 1,
                );
            }
        }
    }
}

/// The body of one ObjectContent (its `obj` and `propSet`s), rendered.
fn object_content(state: &State, call: &Call<'_>, spec: &FilterSpec, m: &Moref) -> Option<String> {
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
fn wanted_paths<'a>(spec: &'a FilterSpec, obj: &'a ManagedObject) -> Option<Vec<&'a str>> {
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

fn retrieve(state: &State, call: &Call<'_>, args: &Element) -> Result<Vec<String>, Fault> {
    let mut results = Vec::new();
    let mut seen = HashSet::new();
    for spec_el in args.children_named("specSet") {
        let spec = parse_filter(spec_el)?;
        for m in collect(state, &spec)? {
            if seen.contains(&m.value) {
                continue;
            }
            if let Some(rendered) = object_content(state, call, &spec, &m) {
                seen.insert(m.value.clone());
                results.push(rendered);
            }
        }
    }
    Ok(results)
}

/// Renders one page of a RetrieveResult, keeping the rest under a token.
fn page(state: &mut State, call: &Call<'_>, mut objects: Vec<String>, page_size: usize) -> String {
    if objects.is_empty() {
        return String::new();
    }
    let rest = if page_size > 0 && objects.len() > page_size {
        objects.split_off(page_size)
    } else {
        Vec::new()
    };
    let mut out = String::from("<returnval>");
    if !rest.is_empty() {
        let session = call.session.clone().unwrap_or_default();
        let token = state.collectors.keep_pending(session, page_size, rest);
        out.push_str(&format!("<token>{token}</token>"));
    }
    for o in objects {
        out.push_str("<objects>");
        out.push_str(&o);
        out.push_str("</objects>");
    }
    out.push_str("</returnval>");
    out
}

pub(crate) fn dispatch(
    state: &mut State,
    call: &mut Call<'_>,
    _this: &Moref,
    method: &str,
    args: &Element,
) -> Option<Result<String, Fault>> {
    Some(match method {
        "RetrieveProperties" | "RetrieveContents" => retrieve(state, call, args).map(|r| {
            r.iter()
                .map(|o| format!("<returnval>{o}</returnval>"))
                .collect::<String>()
        }),
        "RetrievePropertiesEx" => {
            let max = args
                .child("options")
                .and_then(|o| o.text_of("maxObjects"))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .unwrap_or(0);
            retrieve(state, call, args).map(|r| page(state, call, r, max))
        }
        "ContinueRetrievePropertiesEx" => {
            let token = args.text_of("token").unwrap_or("").trim().to_string();
            let session = call.session.clone().unwrap_or_default();
            match state.collectors.take_pending(&token) {
                Some(p) if p.session == session => {
                    let size = p.page;
                    Ok(page(state, call, p.remaining, size))
                }
                _ => Err(Fault::invalid_argument("token")),
            }
        }
        "CancelRetrievePropertiesEx" => {
            let token = args.text_of("token").unwrap_or("").trim().to_string();
            state.collectors.take_pending(&token);
            Ok(String::new())
        }
        _ => return None,
    })
}

/// `Fetch`: one property of one object; a list comes back as repeated `returnval`s.
pub(crate) fn fetch(
    state: &State,
    call: &Call<'_>,
    this: &Moref,
    args: &Element,
) -> Result<String, Fault> {
    let prop = args.text_of("prop").unwrap_or("").trim();
    let obj = state
        .inventory
        .by_value(&this.value)
        .ok_or_else(|| Fault::not_found(this))?;
    let value = property(state, call, obj, prop).map(Cow::into_owned);
    let mut out = String::new();
    match value {
        None => {
            if obj.moref == refs::service_instance() && prop.is_empty() {
                return Err(Fault::invalid_property(prop));
            }
        }
        Some(Val::Array(_, items)) => {
            for item in &items {
                write_element(&mut out, "returnval", item, !matches!(item, Val::Mor(_)));
            }
        }
        Some(v) => write_element(&mut out, "returnval", &v, true),
    }
    Ok(out)
}

/// How long a call may wait: `maxWaitSeconds` for WaitForUpdatesEx (none: forever), zero for
/// everything else.
pub(crate) fn max_wait(req: &crate::soap::Request) -> Option<chrono::Duration> {
    match req.method.as_str() {
        "WaitForUpdatesEx" => req
            .args
            .child("options")
            .and_then(|o| o.text_of("maxWaitSeconds"))
            .and_then(|s| s.trim().parse::<i64>().ok())
            .map(|s| chrono::Duration::seconds(s.max(0))),
        "WaitForUpdates" => None,
        _ => Some(chrono::Duration::zero()),
    }
}

/// A PropertyFilter's own method: DestroyPropertyFilter.
pub(crate) fn dispatch_filter(
    state: &mut State,
    _call: &mut Call<'_>,
    this: &Moref,
    method: &str,
    _args: &Element,
) -> Option<Result<String, Fault>> {
    match method {
        "DestroyPropertyFilter" => Some(destroy_filter(state, this)),
        _ => None,
    }
}

pub(crate) fn destroy_filter(state: &mut State, this: &Moref) -> Result<String, Fault> {
    state.collectors.destroy_filter(&this.value);
    state.inventory.remove(this);
    Ok(String::new())
}

/// The collector methods that create filters and wait for updates.
pub(crate) fn wait_methods(
    state: &mut State,
    call: &Call<'_>,
    collector: &Moref,
    method: &str,
    args: &Element,
    expired: bool,
) -> Option<Result<crate::call::Flow, Fault>> {
    use crate::call::Flow;
    let session = call.session.clone().unwrap_or_default();
    Some(match method {
        "CreateFilter" => {
            let Some(spec) = args.child("spec") else {
                return Some(Err(Fault::invalid_argument("spec")));
            };
            // Validate now, as vCenter does: a bad object is the caller's fault.
            if let Err(f) = parse_filter(spec).and_then(|s| collect(state, &s)) {
                return Some(Err(f));
            }
            let n = state.inventory.next_value("filter");
            let value = format!("session[{session}]{n}");
            let mut f = ManagedObject::new("PropertyFilter", &value);
            f.set(
                "partialUpdates",
                args.flag("partialUpdates").unwrap_or(false),
            );
            state.inventory.insert(f);
            state.collectors.add_filter(
                value.clone(),
                Filter {
                    session: session.clone(),
                    collector: collector.value.clone(),
                    spec: spec.clone(),
                },
            );
            let mut out = String::new();
            write_element(
                &mut out,
                "returnval",
                &Val::Mor(Moref::new("PropertyFilter", &value)),
                false,
            );
            Ok(Flow::Done(out))
        }
        "CreatePropertyCollector" => {
            let n = state.inventory.next_value("collector");
            let value = format!("session[{session}]{n}");
            state
                .inventory
                .insert(ManagedObject::new("PropertyCollector", &value));
            let mut out = String::new();
            write_element(
                &mut out,
                "returnval",
                &Val::Mor(Moref::new("PropertyCollector", &value)),
                false,
            );
            Ok(Flow::Done(out))
        }
        "DestroyPropertyCollector" => {
            if *collector != refs::property_collector(state.inventory.esx()) {
                state.inventory.remove(collector);
                for k in state.collectors.remove_collector_filters(&collector.value) {
                    state.inventory.remove(&Moref::new("PropertyFilter", &k));
                }
            }
            Ok(Flow::Done(String::new()))
        }
        "CancelWaitForUpdates" => {
            state.collectors.cancel((session, collector.value.clone()));
            Ok(Flow::Done(String::new()))
        }
        "WaitForUpdatesEx" | "WaitForUpdates" | "CheckForUpdates" => {
            let key = (session.clone(), collector.value.clone());
            if state.collectors.take_cancel(&key) {
                return Some(Err(Fault::new_pub(
                    "RequestCanceled",
                    "The task was canceled by a user.",
                )));
            }
            match updates(state, call, &key) {
                Ok(Some(xml)) => Ok(Flow::Done(xml)),
                Ok(None) if expired || method == "CheckForUpdates" => Ok(Flow::Done(String::new())),
                Ok(None) => Ok(Flow::Wait),
                Err(f) => Err(f),
            }
        }
        _ => return None,
    })
}

/// The changes since the collector last reported, as an UpdateSet, or `None` if nothing changed.
fn updates(
    state: &mut State,
    call: &Call<'_>,
    key: &CollectorKey,
) -> Result<Option<String>, Fault> {
    let mut filter_sets = String::new();
    let mut fresh: Vec<(String, FilterValues)> = Vec::new();
    for (name, filter) in state.collectors.filters_of(key) {
        let spec = parse_filter(&filter.spec)?;
        let now_values = filter_values(state, call, &spec);
        let before = state.collectors.reported(key, &name);
        let object_set = object_set(before, &now_values);
        if !object_set.is_empty() {
            filter_sets.push_str("<filterSet>");
            write_element(
                &mut filter_sets,
                "filter",
                &Val::Mor(Moref::new("PropertyFilter", &name)),
                false,
            );
            filter_sets.push_str(&object_set);
            filter_sets.push_str("</filterSet>");
        }
        fresh.push((name, now_values));
    }
    if filter_sets.is_empty() {
        return Ok(None);
    }
    let version = state.collectors.record(key, fresh);
    Ok(Some(format!(
        "<returnval><version>{version}</version>{filter_sets}</returnval>"
    )))
}

/// The rendered values a filter selects now, per object (an empty rendering for a property
/// the object lacks, so its disappearance shows as a change).
fn filter_values(state: &State, call: &Call<'_>, spec: &FilterSpec) -> FilterValues {
    let objects = collect(state, spec).unwrap_or_default();
    let mut now_values: FilterValues = HashMap::new();
    for m in objects {
        let Some(obj) = state.inventory.by_value(&m.value) else {
            continue;
        };
        let Some(paths) = wanted_paths(spec, obj) else {
            continue;
        };
        let mut values = Vec::new();
        for path in paths {
            let mut rendered = String::new();
            if let Some(v) = property(state, call, obj, path) {
                write_element(&mut rendered, "val", &v, true);
            }
            values.push((path.to_string(), rendered));
        }
        now_values.insert(m.value.clone(), (obj.moref.clone(), values));
    }
    now_values
}

/// The `objectSet`s of one filter: objects entering, changed and leaving since `before`.
fn object_set(before: Option<&FilterValues>, now_values: &FilterValues) -> String {
    let mut object_set = String::new();
    for (value, (m, props)) in now_values {
        let old = before.and_then(|b| b.get(value));
        let kind = if old.is_some() { "modify" } else { "enter" };
        let mut changes = String::new();
        for (path, rendered) in props {
            let unchanged =
                old.is_some_and(|(_, o)| o.iter().any(|(p, r)| p == path && r == rendered));
            if unchanged || (old.is_none() && rendered.is_empty()) {
                continue;
            }
            changes.push_str("<changeSet><name>");
            crate::value::escape_into(&mut changes, path);
            changes.push_str("</name><op>assign</op>");
            changes.push_str(rendered);
            changes.push_str("</changeSet>");
        }
        if old.is_none() || !changes.is_empty() {
            object_set.push_str("<objectSet><kind>");
            object_set.push_str(kind);
            object_set.push_str("</kind>");
            write_element(&mut object_set, "obj", &Val::Mor(m.clone()), false);
            object_set.push_str(&changes);
            object_set.push_str("</objectSet>");
        }
    }
    if let Some(b) = before {
        for (value, (m, _)) in b {
            if !now_values.contains_key(value) {
                object_set.push_str("<objectSet><kind>leave</kind>");
                write_element(&mut object_set, "obj", &Val::Mor(m.clone()), false);
                object_set.push_str("</objectSet>");
            }
        }
    }
    object_set
}
