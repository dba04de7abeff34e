//! watch: a chunked stream of `{"type": ..., "object": ...}` lines, filtered by namespace,
//! labels and fields; resumes from a resourceVersion in the window with no gap and no
//! duplicate; synthetic ADDED events for the initial state; bookmarks; `sendInitialEvents`.
//!
//! The stream owns its [`Watch`] directly (no task per watcher): when the client goes away
//! the body is dropped and with it the subscription.

use crate::context::Ctx;
use crate::filter::Filter;
use crate::http::{Format, HandlerResult};
use crate::resources::ResourceInfo;
use crate::status::ApiError;
use crate::table::{self, IncludeObject};
use bytes::Bytes;
use futures::StreamExt;
use http::Response;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use infrasim_clock::SharedClock;
use infrasim_store::{Event, EventType, Group, StoreError, StoredObject, Watch, WatchError};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How a watch renders its objects.
#[derive(Clone, Copy)]
enum Render {
    Json,
    /// `PartialObjectMetadata` in the named version.
    Metadata(&'static str),
    Table {
        api_version: &'static str,
        include: IncludeObject,
    },
}

struct WatchStream {
    pending: VecDeque<Bytes>,
    watch: Option<Watch>,
    /// Where the watch came from, to pick it up again after it was cut off.
    group: Arc<Group>,
    /// Where a conversion webhook is reached.
    webhooks: crate::webhook::Reach,
    filter: Filter,
    info: Arc<ResourceInfo>,
    render: Render,
    clock: SharedClock,
    columns_sent: bool,
    deadline: Instant,
    bookmark_every: Option<Duration>,
    next_bookmark: Instant,
    /// When the bookmark that precedes the timeout goes out (kube-apiserver sends one shortly
    /// before `timeoutSeconds`, so a client resumes from the freshest resourceVersion).
    last_bookmark: Option<Instant>,
    last_rv: u64,
    /// `apiserver_watch_events_total` of this watch's kind, on the management plane.
    sent: Option<prometheus_client::metrics::counter::Counter>,
}

/// How long before a watch's deadline its last bookmark goes out.
const LAST_BOOKMARK_LEAD: Duration = Duration::from_secs(2);

impl WatchStream {
    /// Turns a store event into what this watcher should see, if anything: objects moving
    /// into the selection are ADDED, moving out are DELETED.
    fn translate<'e>(&self, event: &'e Event) -> Option<(&'static str, &'e Arc<StoredObject>)> {
        if *event.resource != *self.info.store_key {
            return None;
        }
        let now = self.filter.matches(&event.object);
        let before = event
            .previous
            .as_ref()
            .is_some_and(|p| self.filter.matches(p));
        let ty = match (event.event_type, before, now) {
            (EventType::Added, _, true) => "ADDED",
            (EventType::Modified, true, true) => "MODIFIED",
            (EventType::Modified, false, true) => "ADDED",
            (EventType::Modified, true, false) => "DELETED",
            (EventType::Deleted, _, true) => "DELETED",
            _ => return None,
        };
        Some((ty, &event.object))
    }

    fn line(&mut self, ty: &str, object: &StoredObject) -> Bytes {
        match self.render {
            Render::Json => {
                let mut out = Vec::with_capacity(object.len() + 32);
                out.extend_from_slice(b"{\"type\":\"");
                out.extend_from_slice(ty.as_bytes());
                out.extend_from_slice(b"\",\"object\":");
                out.extend_from_slice(&self.info.served_bytes(&object.bytes()));
                out.extend_from_slice(b"}\n");
                Bytes::from(out)
            }
            Render::Metadata(api_version) => {
                let value = object.to_value().unwrap_or(Value::Null);
                value_line(ty, &crate::http::partial_metadata(&value, api_version))
            }
            Render::Table {
                api_version,
                include,
            } => {
                let value = object.to_value().unwrap_or(Value::Null);
                let row = table::row(&self.info, &value, include, self.clock.now());
                let mut t = table::table(
                    &self.info,
                    vec![row],
                    json!({"resourceVersion": object.meta.resource_version.to_string()}),
                    !self.columns_sent,
                );
                self.columns_sent = true;
                t["apiVersion"] = json!(api_version);
                value_line(ty, &t)
            }
        }
    }

    /// The line for a store event, if this watcher sees it. Each watcher copies the stored
    /// bytes into its own line rather than sharing one encoding through the event: a cached
    /// line would live as long as the event stays in the window, doubling what the window
    /// holds, while the copy is a memcpy per watcher that is freed once the line is sent.
    async fn event_line(&mut self, event: &Event) -> Option<Bytes> {
        let (ty, object) = self.translate(event)?;
        let object = object.clone();
        Some(self.served_line(ty, object).await)
    }

    /// The line for `object`, in the version watched (a conversion webhook's failure is
    /// the stream's ERROR event).
    async fn served_line(&mut self, ty: &str, object: Arc<StoredObject>) -> Bytes {
        if !crate::conversion::converts(&self.info) {
            return self.line(ty, &object);
        }
        match crate::conversion::served_from(&self.webhooks, &self.info, vec![object]).await {
            Ok(mut served) => match served.pop() {
                Some(object) => self.line(ty, &object),
                None => Bytes::new(),
            },
            Err(e) => value_line("ERROR", &e.to_status()),
        }
    }

    /// Queues the lines of the events a (re)started watch replays from the window.
    async fn take_backlog(&mut self, watch: &Watch) {
        self.last_rv = watch.start;
        for event in &watch.backlog {
            self.last_rv = event.resource_version;
            if let Some(line) = self.event_line(event).await {
                self.pending.push_back(line);
            }
        }
    }

    fn bookmark(&self, initial_events_end: bool) -> Bytes {
        let mut meta =
            json!({"resourceVersion": self.last_rv.to_string(), "creationTimestamp": null});
        if initial_events_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let (kind, api_version) = match self.render {
            Render::Metadata(v) => ("PartialObjectMetadata", v),
            _ => (self.info.kind.as_str(), self.info.api_version.as_str()),
        };
        value_line(
            "BOOKMARK",
            &json!({"kind": kind, "apiVersion": api_version, "metadata": meta}),
        )
    }

    /// The next line to send, counted as an event sent.
    async fn next(&mut self) -> Option<Bytes> {
        let line = self.next_line().await?;
        if let Some(sent) = &self.sent {
            sent.inc();
        }
        Some(line)
    }

    async fn next_line(&mut self) -> Option<Bytes> {
        loop {
            if let Some(line) = self.pending.pop_front() {
                return Some(line);
            }
            let watch = self.watch.as_mut()?;
            let bookmarks = self.bookmark_every.is_some();
            tokio::select! {
                event = watch.next() => match event {
                    Ok(event) => {
                        self.last_rv = event.resource_version;
                        if let Some(line) = self.event_line(&event).await {
                            return Some(line);
                        }
                    }
                    // Cut off behind a burst of writes: pick up again from the window
                    // where this stream stopped (it has seen every event up to `last_rv`),
                    // so the client sees no gap and needs no relist. Only when the window
                    // has moved past that point does the stream end; the client then
                    // resumes, gets 410 Gone and lists again, as with kube-apiserver.
                    Err(WatchError::Lagged) => {
                        self.watch = None;
                        let watch = self.group.watch_resource(&self.info.store_key, Some(self.last_rv)).ok()?;
                        self.take_backlog(&watch).await;
                        self.watch = Some(watch);
                    }
                    // The group is gone.
                    Err(WatchError::Closed) => {
                        self.watch = None;
                        return None;
                    }
                },
                _ = tokio::time::sleep_until(self.deadline) => {
                    self.watch = None;
                    return None;
                }
                _ = tokio::time::sleep_until(self.next_bookmark), if bookmarks => {
                    self.next_bookmark += self.bookmark_every.unwrap_or(Duration::from_secs(60));
                    match self.last_bookmark {
                        Some(last) if self.next_bookmark >= last => {
                            self.next_bookmark = last;
                            self.last_bookmark = None;
                        }
                        _ => {}
                    }
                    return Some(self.bookmark(false));
                }
            }
        }
    }
}

/// A watch event line for an object built here rather than stored: `type` first, then the
/// object, which is a built-in kind (a Status, a Table, metadata) in its Go field order.
fn value_line(ty: &str, object: &Value) -> Bytes {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(ty.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    if ty == "ERROR" {
        let status = crate::status::status_bytes(object);
        out.extend_from_slice(status.strip_suffix(b"\n").unwrap_or(&status));
    } else {
        out.extend(infrasim_store::to_vec_typed(object).unwrap_or_default());
    }
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// A watch request's query parameters, parsed and checked before any stream is set up.
struct WatchOptions<'q> {
    filter: Filter,
    bookmarks: bool,
    send_initial: Option<bool>,
    timeout: Duration,
    render: Render,
    rv: Option<&'q str>,
}

/// Parses the watch's query, rejecting the option combinations kube-apiserver rejects.
fn watch_options(ctx: &Ctx) -> Result<WatchOptions<'_>, ApiError> {
    let filter = Filter::from_ctx(ctx)?;
    let bookmarks = ctx
        .query
        .flag("allowWatchBookmarks")
        .map_err(ApiError::bad_request)?;
    let send_initial = match ctx.query.get("sendInitialEvents") {
        None | Some("") => None,
        Some(_) => Some(
            ctx.query
                .flag("sendInitialEvents")
                .map_err(ApiError::bad_request)?,
        ),
    };
    let timeout = ctx
        .query
        .number("timeoutSeconds")
        .map_err(ApiError::bad_request)?
        .filter(|t| *t > 0)
        .map(|t| Duration::from_secs(t as u64))
        .unwrap_or(Duration::from_secs(1800));
    let render = match ctx.format {
        Format::Table(api_version) => Render::Table {
            api_version,
            include: IncludeObject::parse(ctx.query.get("includeObject"))
                .map_err(ApiError::bad_request)?,
        },
        Format::Metadata(api_version) => Render::Metadata(api_version),
        _ => Render::Json,
    };
    let rv = ctx.query.get("resourceVersion").filter(|s| !s.is_empty());
    if send_initial == Some(true) {
        check_send_initial(ctx, bookmarks)?;
    }
    Ok(WatchOptions {
        filter,
        bookmarks,
        send_initial,
        timeout,
        render,
        rv,
    })
}

/// `sendInitialEvents=true` is only meaningful with the options that let a client tell
/// where the initial events end, so kube-apiserver refuses it without them.
fn check_send_initial(ctx: &Ctx, bookmarks: bool) -> Result<(), ApiError> {
    if ctx.query.get("resourceVersionMatch") != Some("NotOlderThan") {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            vec![(
                "resourceVersionMatch".into(),
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".into(),
            )],
        ));
    }
    if !bookmarks {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            vec![(
                "allowWatchBookmarks".into(),
                "Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true".into(),
            )],
        ));
    }
    Ok(())
}

/// A stream with its deadline and bookmark schedule set, not yet attached to the store.
fn new_stream(ctx: &Ctx, options: WatchOptions<'_>) -> WatchStream {
    let started = Instant::now();
    let deadline = started + options.timeout;
    let last_bookmark = deadline
        .checked_sub(LAST_BOOKMARK_LEAD)
        .filter(|t| *t > started);
    let first_bookmark = started + ctx.state.config.bookmark_interval;
    let (next_bookmark, last_bookmark) = match last_bookmark {
        Some(last) if last <= first_bookmark => (last, None),
        other => (first_bookmark, other),
    };
    WatchStream {
        pending: VecDeque::new(),
        watch: None,
        group: ctx.state.group.clone(),
        webhooks: ctx.state.webhooks(),
        filter: options.filter,
        info: ctx.info.clone(),
        render: options.render,
        clock: ctx.state.clock.clone(),
        columns_sent: false,
        deadline,
        bookmark_every: options
            .bookmarks
            .then_some(ctx.state.config.bookmark_interval),
        next_bookmark,
        last_bookmark,
        last_rv: 0,
        sent: ctx
            .state
            .config
            .metrics
            .as_ref()
            .and_then(|m| m.watch_events(&ctx.info.group, &ctx.info.version, &ctx.info.kind)),
    }
}

/// Starts the stream from a snapshot of the current state, each matching object queued
/// as an ADDED event (and, for `sendInitialEvents`, the bookmark that ends them).
async fn start_from_snapshot(stream: &mut WatchStream, ctx: &Ctx, send_initial: Option<bool>) {
    let (snapshot, watch) = ctx.state.group.snapshot_and_watch(&ctx.info.store_key);
    stream.last_rv = snapshot.resource_version;
    for object in snapshot.objects.values() {
        if stream.filter.matches(object) {
            let line = stream.served_line("ADDED", object.clone()).await;
            stream.pending.push_back(line);
        }
    }
    if send_initial == Some(true) {
        let line = stream.bookmark(true);
        stream.pending.push_back(line);
    }
    stream.watch = Some(watch);
}

/// Starts the stream from a resourceVersion, replaying the window's events after it; one
/// that has left the window is answered in the stream, not with an error status.
async fn start_from_version(
    stream: &mut WatchStream,
    ctx: &Ctx,
    resume_from: Option<u64>,
) -> Result<(), ApiError> {
    match ctx
        .state
        .group
        .watch_resource(&ctx.info.store_key, resume_from)
    {
        Ok(watch) => {
            stream.take_backlog(&watch).await;
            stream.watch = Some(watch);
        }
        Err(e @ StoreError::Expired { .. }) => {
            // As kube-apiserver's watch cache does: a 200 stream with one ERROR event.
            let status = ApiError::from_store(e, &ctx.info.group, &ctx.info.plural).to_status();
            stream.pending.push_back(value_line("ERROR", &status));
        }
        Err(e) => return Err(ApiError::from_store(e, &ctx.info.group, &ctx.info.plural)),
    }
    Ok(())
}

/// The chunked 200 response that sends the stream's lines as they come.
fn stream_response(stream: WatchStream) -> HandlerResult {
    let body = futures::stream::unfold(stream, |mut s| async move {
        let line = s.next().await?;
        Some((Ok::<_, std::convert::Infallible>(Frame::data(line)), s))
    })
    .boxed();
    let mut resp = Response::new(StreamBody::new(body).boxed_unsync());
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache, private"),
    );
    Ok(resp)
}

pub(crate) async fn watch(ctx: Ctx) -> HandlerResult {
    let options = watch_options(&ctx)?;
    let (send_initial, rv) = (options.send_initial, options.rv);
    let mut stream = new_stream(&ctx, options);
    // Initial state as synthetic ADDED events: when asked (sendInitialEvents), or by default
    // when no resourceVersion (or "0") is given.
    let initial = match (send_initial, rv) {
        (Some(s), _) => s,
        (None, None | Some("0")) => true,
        (None, Some(_)) => false,
    };
    let resume_from = match rv {
        Some("0") | None => None,
        Some(v) => Some(
            v.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version {v:?}")))?,
        ),
    };
    if initial {
        start_from_snapshot(&mut stream, &ctx, send_initial).await;
    } else {
        start_from_version(&mut stream, &ctx, resume_from).await?;
    }
    stream_response(stream)
}
