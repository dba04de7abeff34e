//! The Watch service: many watches on one stream, each over a key range, starting now or at
//! a past revision the history still holds, with etcd's filters and prev_kv.

use crate::keyspace::{KeyError, KeyRange};
use crate::pb::etcdserverpb as pb;
use crate::pb::etcdserverpb::watch_server::Watch;
use crate::pb::mvccpb::{event::EventType, Event};
use crate::service::MemberService;
use futures::{Stream, StreamExt};
use std::collections::BTreeMap;
use std::pin::Pin;
use tokio::sync::{broadcast, mpsc};
use tonic::{Request, Response, Status, Streaming};

type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::WatchResponse, Status>> + Send>>;
type Out = mpsc::Sender<Result<pb::WatchResponse, Status>>;

/// The watch ID etcd answers progress requests with (clientv3's InvalidWatchID).
const PROGRESS_ID: i64 = -1;

struct Watcher {
    range: KeyRange,
    /// The newest revision this watcher has been sent (or was created at).
    sent: i64,
    prev_kv: bool,
    no_put: bool,
    no_delete: bool,
}

impl Watcher {
    fn select(&self, events: &[Event]) -> Vec<Event> {
        events
            .iter()
            .filter(|e| {
                e.kv.as_ref()
                    .is_some_and(|kv| kv.mod_revision > self.sent && self.range.contains(&kv.key))
            })
            .filter(|e| {
                let put = e.r#type == EventType::Put as i32;
                !(put && self.no_put || !put && self.no_delete)
            })
            .map(|e| Event {
                prev_kv: if self.prev_kv {
                    e.prev_kv.clone()
                } else {
                    None
                },
                ..e.clone()
            })
            .collect()
    }
}

/// One Watch stream's watchers.
struct Session {
    member: MemberService,
    watchers: BTreeMap<i64, Watcher>,
    next_id: i64,
    out: Out,
}

impl Session {
    fn header(&self) -> pb::ResponseHeader {
        self.member.header(&self.member.cluster.lock())
    }

    async fn send(&self, response: pb::WatchResponse) -> Result<(), ()> {
        self.out.send(Ok(response)).await.map_err(|_| ())
    }

    async fn request(&mut self, request: pb::WatchRequest) -> Result<(), ()> {
        use pb::watch_request::RequestUnion;
        match request.request_union {
            Some(RequestUnion::CreateRequest(create)) => self.create(create).await,
            Some(RequestUnion::CancelRequest(cancel)) => {
                self.watchers.remove(&cancel.watch_id);
                let header = self.header();
                self.send(pb::WatchResponse {
                    header: Some(header),
                    watch_id: cancel.watch_id,
                    canceled: true,
                    ..Default::default()
                })
                .await
            }
            Some(RequestUnion::ProgressRequest(_)) => {
                let header = self.header();
                self.send(pb::WatchResponse {
                    header: Some(header),
                    watch_id: PROGRESS_ID,
                    ..Default::default()
                })
                .await
            }
            None => Ok(()),
        }
    }

    async fn create(&mut self, create: pb::WatchCreateRequest) -> Result<(), ()> {
        use pb::watch_create_request::FilterType;
        let id = if create.watch_id != 0 {
            create.watch_id
        } else {
            while self.watchers.contains_key(&self.next_id) {
                self.next_id += 1;
            }
            self.next_id
        };
        let (header, backlog, compacted) = {
            let state = self.member.cluster.lock();
            let header = self.member.header(&state);
            let now = state.keys.revision();
            let start = create.start_revision;
            match (start > 0 && start <= now).then(|| state.keys.events_since(start - 1)) {
                Some(Err(KeyError::Compacted)) => {
                    (header, Vec::new(), Some(state.keys.compacted()))
                }
                Some(Ok(events)) => (header, events, None),
                _ => (header, Vec::new(), None),
            }
        };
        if self.watchers.contains_key(&id) {
            return self
                .send(pb::WatchResponse {
                    header: Some(header),
                    watch_id: id,
                    created: true,
                    canceled: true,
                    cancel_reason: "mvcc: duplicate watch ID".into(),
                    ..Default::default()
                })
                .await;
        }
        let created = pb::WatchResponse {
            header: Some(header),
            watch_id: id,
            created: true,
            ..Default::default()
        };
        self.send(created).await?;
        if let Some(compact_revision) = compacted {
            return self
                .send(pb::WatchResponse {
                    header: Some(header),
                    watch_id: id,
                    canceled: true,
                    compact_revision,
                    cancel_reason: "etcdserver: mvcc: required revision has been compacted".into(),
                    ..Default::default()
                })
                .await;
        }
        let filters = &create.filters;
        // A watch from a past revision has been sent what came before it; one from now,
        // everything up to now.
        let sent = if create.start_revision > 0 {
            create.start_revision - 1
        } else {
            header.revision
        };
        let watcher = Watcher {
            range: KeyRange::new(create.key, create.range_end),
            sent,
            prev_kv: create.prev_kv,
            no_put: filters.contains(&(FilterType::Noput as i32)),
            no_delete: filters.contains(&(FilterType::Nodelete as i32)),
        };
        self.watchers.insert(id, watcher);
        if !backlog.is_empty() {
            self.deliver(&backlog).await?;
        }
        Ok(())
    }

    /// Sends each watcher what it selects of `events`.
    async fn deliver(&mut self, events: &[Event]) -> Result<(), ()> {
        let newest = events
            .iter()
            .filter_map(|e| e.kv.as_ref().map(|kv| kv.mod_revision))
            .max()
            .unwrap_or(0);
        let mut header = self.header();
        let ids: Vec<i64> = self.watchers.keys().copied().collect();
        for id in ids {
            let Some(w) = self.watchers.get_mut(&id) else {
                continue;
            };
            let selected = w.select(events);
            w.sent = w.sent.max(newest);
            if selected.is_empty() {
                continue;
            }
            header.revision = newest;
            self.send(pb::WatchResponse {
                header: Some(header),
                watch_id: id,
                events: selected,
                ..Default::default()
            })
            .await?;
        }
        Ok(())
    }

    /// After missing broadcasts: each watcher catches up from the history, or is canceled
    /// as compacted if the history no longer reaches back to it.
    async fn catch_up(&mut self) -> Result<(), ()> {
        let oldest = self.watchers.values().map(|w| w.sent).min().unwrap_or(0);
        let caught = self.member.cluster.lock().keys.events_since(oldest);
        match caught {
            Ok(events) => self.deliver(&events).await,
            Err(_) => {
                let compact_revision = self.member.cluster.lock().keys.compacted();
                let header = self.header();
                for id in std::mem::take(&mut self.watchers).into_keys() {
                    self.send(pb::WatchResponse {
                        header: Some(header),
                        watch_id: id,
                        canceled: true,
                        compact_revision,
                        ..Default::default()
                    })
                    .await?;
                }
                Ok(())
            }
        }
    }
}

/// Serves one Watch stream until the client closes it.
async fn serve(
    mut session: Session,
    mut incoming: Streaming<pb::WatchRequest>,
    mut revisions: broadcast::Receiver<crate::cluster::Revision>,
) {
    loop {
        let step = tokio::select! {
            request = incoming.next() => match request {
                Some(Ok(request)) => session.request(request).await,
                _ => Err(()),
            },
            revision = revisions.recv() => match revision {
                Ok(events) => session.deliver(&events).await,
                Err(broadcast::error::RecvError::Lagged(_)) => session.catch_up().await,
                Err(broadcast::error::RecvError::Closed) => Err(()),
            },
        };
        if step.is_err() {
            return;
        }
    }
}

#[tonic::async_trait]
impl Watch for MemberService {
    type WatchStream = WatchStream;

    async fn watch(
        &self,
        request: Request<Streaming<pb::WatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let (out, responses) = mpsc::channel(64);
        // Subscribed before any watcher reads the history, so no revision falls between.
        let revisions = self.cluster.subscribe();
        let session = Session {
            member: self.clone(),
            watchers: BTreeMap::new(),
            next_id: 0,
            out,
        };
        tokio::spawn(serve(session, request.into_inner(), revisions));
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(responses),
        )))
    }
}
