//! The Lease service: grant, revoke, keep alive, time to live and list, on the cluster's
//! injected clock.

use crate::cluster::{revoke, Lease};
use crate::pb::etcdserverpb as pb;
use crate::pb::etcdserverpb::lease_server::Lease as LeaseApi;
use crate::service::MemberService;
use futures::{Stream, StreamExt};
use std::pin::Pin;
use tonic::{Request, Response, Status, Streaming};

/// etcd's smallest TTL: shorter requests are raised to it.
const MIN_TTL: i64 = 5;

type KeepAliveStream =
    Pin<Box<dyn Stream<Item = Result<pb::LeaseKeepAliveResponse, Status>> + Send>>;

impl MemberService {
    /// Renews lease `id` for its granted TTL; the TTL, or 0 if the lease is gone.
    fn renew(&self, id: i64) -> (pb::ResponseHeader, i64) {
        let mut state = self.cluster.lock();
        let now = self.cluster.now();
        let ttl = match state.leases.get_mut(&id) {
            Some(lease) => {
                lease.expires_at = now + chrono::Duration::seconds(lease.granted_ttl);
                lease.granted_ttl
            }
            None => 0,
        };
        (self.header(&state), ttl)
    }
}

#[tonic::async_trait]
impl LeaseApi for MemberService {
    async fn lease_grant(
        &self,
        request: Request<pb::LeaseGrantRequest>,
    ) -> Result<Response<pb::LeaseGrantResponse>, Status> {
        let r = request.into_inner();
        let mut state = self.cluster.lock();
        let id = if r.id != 0 {
            r.id
        } else {
            loop {
                let id = (crate::members::rand_u64() >> 1) as i64;
                if id != 0 && !state.leases.contains_key(&id) {
                    break id;
                }
            }
        };
        if state.leases.contains_key(&id) {
            return Err(Status::failed_precondition(
                "etcdserver: lease already exists",
            ));
        }
        let ttl = r.ttl.max(MIN_TTL);
        let expires_at = self.cluster.now() + chrono::Duration::seconds(ttl);
        state.leases.insert(
            id,
            Lease {
                granted_ttl: ttl,
                expires_at,
                keys: Default::default(),
            },
        );
        state.members.commit();
        let header = self.header(&state);
        drop(state);
        self.cluster.watch_leases();
        Ok(Response::new(pb::LeaseGrantResponse {
            header: Some(header),
            id,
            ttl,
            error: String::new(),
        }))
    }

    async fn lease_revoke(
        &self,
        request: Request<pb::LeaseRevokeRequest>,
    ) -> Result<Response<pb::LeaseRevokeResponse>, Status> {
        let id = request.get_ref().id;
        let mut state = self.cluster.lock();
        if !state.leases.contains_key(&id) {
            return Err(Status::not_found("etcdserver: requested lease not found"));
        }
        let events = revoke(&mut state, &[id]);
        state.members.commit();
        let header = self.header(&state);
        drop(state);
        self.cluster.publish(events);
        Ok(Response::new(pb::LeaseRevokeResponse {
            header: Some(header),
        }))
    }

    type LeaseKeepAliveStream = KeepAliveStream;

    async fn lease_keep_alive(
        &self,
        request: Request<Streaming<pb::LeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        let this = self.clone();
        let responses = request.into_inner().map(move |r| {
            let r = r?;
            let (header, ttl) = this.renew(r.id);
            Ok(pb::LeaseKeepAliveResponse {
                header: Some(header),
                id: r.id,
                ttl,
            })
        });
        Ok(Response::new(Box::pin(responses)))
    }

    async fn lease_time_to_live(
        &self,
        request: Request<pb::LeaseTimeToLiveRequest>,
    ) -> Result<Response<pb::LeaseTimeToLiveResponse>, Status> {
        let r = request.into_inner();
        let state = self.cluster.lock();
        let now = self.cluster.now();
        let (ttl, granted, keys) = match state.leases.get(&r.id) {
            Some(l) => (
                (l.expires_at - now).num_seconds().max(0),
                l.granted_ttl,
                if r.keys {
                    l.keys.iter().cloned().collect()
                } else {
                    Vec::new()
                },
            ),
            None => (-1, 0, Vec::new()),
        };
        Ok(Response::new(pb::LeaseTimeToLiveResponse {
            header: Some(self.header(&state)),
            id: r.id,
            ttl,
            granted_ttl: granted,
            keys,
        }))
    }

    async fn lease_leases(
        &self,
        _: Request<pb::LeaseLeasesRequest>,
    ) -> Result<Response<pb::LeaseLeasesResponse>, Status> {
        let state = self.cluster.lock();
        Ok(Response::new(pb::LeaseLeasesResponse {
            header: Some(self.header(&state)),
            leases: state
                .leases
                .keys()
                .map(|id| pb::LeaseStatus { id: *id })
                .collect(),
        }))
    }
}
