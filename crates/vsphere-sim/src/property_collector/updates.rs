//! WaitForUpdatesEx, WaitForUpdates and CheckForUpdates: what changed since a collector's
//! last report, as an UpdateSet.
//!
//! A report costs what changed, not what the filters select. Each filter remembers what it
//! reported, per object and property, and the inventory's change count at that moment; the
//! inventory's journal (`crate::journal`) names the objects changed since. Only those are
//! rendered again and compared. Selecting again (walking the traversals) is needed only when
//! an object the selection read changed: a folder, pool or view whose children decide what a
//! container view shows, or an object a traversal read a property of. So one VM's power
//! change costs each waiting filter that selects the VM one VM's rendering, whatever the
//! inventory's size; filters that do not select it pay a set lookup.
//!
//! Versions follow vCenter: the empty version asks for everything the filters select (all
//! `enter`); a version this collector returned asks for what changed since; any other is
//! `InvalidCollectorVersion`. `maxObjectUpdates` caps the object updates of one answer: the
//! rest comes with the next call, and the answer says `truncated`.

use super::select::{collect, property, wanted_paths};
use crate::call::Call;
use crate::fault::Fault;
use crate::filter_spec::FilterSpec;
use crate::state::collectors::{CollectorKey, FilterReport, ObjectValues};
use crate::state::State;
use crate::value::{escape_into, write_element, Moref, Val};
use crate::view_manager;
use std::collections::HashSet;

/// What a wait asks: the version the client knows, and at most how many object updates one
/// answer may carry (`None`: no limit).
#[derive(Debug, Default)]
pub(crate) struct WaitRequest {
    pub(crate) version: String,
    pub(crate) max_object_updates: Option<usize>,
}

impl WaitRequest {
    /// The request of a WaitForUpdatesEx (`options.maxObjectUpdates`), WaitForUpdates or
    /// CheckForUpdates call.
    pub(crate) fn parse(args: &crate::soap::Element) -> Self {
        WaitRequest {
            version: args.text_of("version").unwrap_or("").trim().to_string(),
            max_object_updates: args
                .child("options")
                .and_then(|o| o.text_of("maxObjectUpdates"))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .filter(|n| *n > 0),
        }
    }
}

/// The changes since the collector last reported, as an UpdateSet, or `None` if nothing
/// changed.
pub(crate) fn updates(
    state: &mut State,
    call: &Call<'_>,
    key: &CollectorKey,
    request: &WaitRequest,
) -> Result<Option<String>, Fault> {
    if request.version.is_empty() {
        state.collectors.forget_reports(key);
    } else if !request
        .version
        .parse::<u64>()
        .is_ok_and(|v| v <= state.collectors.version(key))
    {
        return Err(Fault::new_pub(
            "InvalidCollectorVersion",
            format!(
                "The version {} is not one this collector returned",
                request.version
            ),
        ));
    }
    let now = state.inventory.changes();
    let mut budget = Budget {
        left: request.max_object_updates.unwrap_or(usize::MAX),
        truncated: false,
    };
    let mut filter_sets = String::new();
    for (name, spec) in state.collectors.filters_of(key) {
        if budget.left == 0 {
            // This filter's report stays as it was: its changes come with the next call.
            budget.truncated = true;
            break;
        }
        let mut report = state.collectors.take_report(key, &name);
        let object_set = refresh(state, call, &spec, &mut report, &mut budget);
        report.seen = now;
        state.collectors.put_report(key, name.clone(), report);
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
    }
    if filter_sets.is_empty() {
        return Ok(None);
    }
    let version = state.collectors.next_version(key);
    let truncated = if budget.truncated {
        "<truncated>true</truncated>"
    } else {
        ""
    };
    Ok(Some(format!(
        "<returnval><version>{version}</version>{filter_sets}{truncated}</returnval>"
    )))
}

/// How many object updates the answer may still carry, and whether one was held back.
struct Budget {
    left: usize,
    truncated: bool,
}

impl Budget {
    /// Takes room for one object update, or notes that it was held back.
    fn take(&mut self) -> bool {
        if self.left == 0 {
            self.truncated = true;
            return false;
        }
        self.left -= 1;
        true
    }
}

/// Brings one filter's report up to date; the `objectSet`s of what entered, changed and
/// left since the last one.
fn refresh(
    state: &State,
    call: &Call<'_>,
    spec: &FilterSpec,
    report: &mut FilterReport,
    budget: &mut Budget,
) -> String {
    let changed: Option<HashSet<&str>> = state
        .inventory
        .changed_since(report.seen)
        .map(|v| v.into_iter().collect());
    let owed = std::mem::take(&mut report.owed);
    let reselect = report.reselect
        || changed
            .as_ref()
            .is_none_or(|c| c.iter().any(|v| report.nodes.contains(*v)));
    let is_news = |v: &str| changed.as_ref().is_none_or(|c| c.contains(v)) || owed.contains(v);
    let mut out = String::new();
    if reselect {
        report.reselect = false;
        let mut nodes = HashSet::new();
        let selected = collect(state, spec, Some(&mut nodes)).unwrap_or_default();
        for m in selected.iter().filter(|m| m.ty == "ContainerView") {
            // A selected view's `view` property follows its folders and pools.
            if let Some(view) = state.inventory.by_value(&m.value) {
                view_manager::view_contents_noting(state, view, Some(&mut nodes));
            }
        }
        report.nodes = nodes;
        let mut now_selected = HashSet::with_capacity(selected.len());
        for m in &selected {
            now_selected.insert(m.value.as_str());
            let known = report.values.contains_key(&m.value);
            if !known || is_news(&m.value) || m.ty == "ContainerView" {
                compare(state, call, spec, &m.value, report, budget, &mut out);
            }
        }
        let gone: Vec<String> = report
            .values
            .keys()
            .filter(|v| !now_selected.contains(v.as_str()))
            .cloned()
            .collect();
        for value in gone {
            leave(&value, report, budget, &mut out);
        }
    } else {
        let candidates: Vec<String> = changed
            .iter()
            .flatten()
            .copied()
            .chain(owed.iter().map(String::as_str))
            .filter(|v| report.values.contains_key(*v))
            .map(str::to_string)
            .collect();
        for value in candidates {
            if state.inventory.by_value(&value).is_some() {
                compare(state, call, spec, &value, report, budget, &mut out);
            } else {
                leave(&value, report, budget, &mut out);
            }
        }
    }
    out
}

/// Renders one selected object again and writes what differs from its last report: `enter`
/// with every property it has, or `modify` with the changed ones. Held back by the budget, a
/// changed object is owed to the next report and an entering one left for it to select.
fn compare(
    state: &State,
    call: &Call<'_>,
    spec: &FilterSpec,
    value: &str,
    report: &mut FilterReport,
    budget: &mut Budget,
    out: &mut String,
) {
    let Some(now) = render(state, call, spec, value) else {
        return;
    };
    let old = report.values.get(value);
    let mut changes = String::new();
    for (path, rendered) in &now.1 {
        let unchanged = old.is_some_and(|(_, o)| o.iter().any(|(p, r)| p == path && r == rendered));
        if unchanged || (old.is_none() && rendered.is_empty()) {
            continue;
        }
        changes.push_str("<changeSet><name>");
        escape_into(&mut changes, path);
        changes.push_str("</name><op>assign</op>");
        changes.push_str(rendered);
        changes.push_str("</changeSet>");
    }
    let kind = if old.is_some() { "modify" } else { "enter" };
    if old.is_some() && changes.is_empty() {
        return;
    }
    if !budget.take() {
        if old.is_some() {
            report.owed.insert(value.to_string());
        } else {
            report.reselect = true;
        }
        return;
    }
    out.push_str("<objectSet><kind>");
    out.push_str(kind);
    out.push_str("</kind>");
    write_element(out, "obj", &Val::Mor(now.0.clone()), false);
    out.push_str(&changes);
    out.push_str("</objectSet>");
    report.values.insert(value.to_string(), now);
}

/// Writes that an object left the filter's selection (or the inventory).
fn leave(value: &str, report: &mut FilterReport, budget: &mut Budget, out: &mut String) {
    if !budget.take() {
        report.reselect = true;
        return;
    }
    if let Some((m, _)) = report.values.remove(value) {
        out.push_str("<objectSet><kind>leave</kind>");
        write_element(out, "obj", &Val::Mor(m), false);
        out.push_str("</objectSet>");
    }
}

/// The rendered values the filter asks of one object now (an empty rendering for a property
/// the object lacks, so its disappearance shows as a change); `None` when the filter asks
/// nothing of its type.
fn render(state: &State, call: &Call<'_>, spec: &FilterSpec, value: &str) -> Option<ObjectValues> {
    let obj = state.inventory.by_value(value)?;
    let paths = wanted_paths(spec, obj)?;
    let mut values = Vec::with_capacity(paths.len());
    for path in paths {
        let mut rendered = String::new();
        if let Some(v) = property(state, call, obj, path) {
            write_element(&mut rendered, "val", &v, true);
        }
        values.push((path.to_string(), rendered));
    }
    Some((obj.moref.clone(), values))
}
