//! PropertyCollector: RetrieveProperties, RetrievePropertiesEx with `maxObjects` paging,
//! ContinueRetrievePropertiesEx, CancelRetrievePropertiesEx; TraversalSpec and named
//! SelectionSpec recursion; nested property paths; and `Fetch`, the one-property read
//! pyvmomi uses for attribute access.
//!
//! The collectors' state (`Collectors`: paged results still to hand out, property filters,
//! what each collector last reported, cancelled waits) lives here; every piece of it belongs
//! to a session, and `drop_session` forgets a session's at logout.

//!
//! What a filter selects and reads lives in `select`; the reports of what changed, for the
//! waits, in `updates`.

mod select;
mod updates;

use crate::call::Call;
use crate::fault::Fault;
use crate::filter_spec::parse_filter;
use crate::objects::{refs, ManagedObject};
use crate::soap::Element;
use crate::state::collectors::Filter;
use crate::state::State;
use crate::value::{write_element, Moref, Val};
pub(crate) use select::property;
use select::{collect, object_content};
use std::borrow::Cow;
use std::collections::HashSet;

fn retrieve(state: &State, call: &Call<'_>, args: &Element) -> Result<Vec<String>, Fault> {
    let mut results = Vec::new();
    let mut seen = HashSet::new();
    for spec_el in args.children_named("specSet") {
        let spec = parse_filter(spec_el)?;
        for m in collect(state, &spec, None)? {
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
    state.journal_follows_filters();
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
            let parsed = match parse_filter(spec).and_then(|s| collect(state, &s, None).map(|_| s))
            {
                Ok(parsed) => parsed,
                Err(f) => return Some(Err(f)),
            };
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
                    spec: std::sync::Arc::new(parsed),
                },
            );
            state.journal_follows_filters();
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
                state.journal_follows_filters();
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
            match updates::updates(state, call, &key, &updates::WaitRequest::parse(args)) {
                Ok(Some(xml)) => Ok(Flow::Done(xml)),
                Ok(None) if expired || method == "CheckForUpdates" => Ok(Flow::Done(String::new())),
                Ok(None) => Ok(Flow::Wait),
                Err(f) => Err(f),
            }
        }
        _ => return None,
    })
}
