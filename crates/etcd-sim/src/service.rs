//! One member's gRPC services: [`MemberService`] answers as member `id` of a cluster (its
//! headers, its Status) and [`MemberService::routes`] puts every service of etcd's v3 API
//! behind one tower service, for a listener or a port-forward to serve.

use crate::cluster::{EtcdCluster, State};
use crate::members::MemberError;
use crate::pb::etcdserverpb as pb;
use crate::pb::etcdserverpb::cluster_server::{Cluster, ClusterServer};
use crate::pb::etcdserverpb::kv_server::KvServer;
use crate::pb::etcdserverpb::lease_server::LeaseServer;
use crate::pb::etcdserverpb::maintenance_server::{Maintenance, MaintenanceServer};
use crate::pb::etcdserverpb::watch_server::WatchServer;
use futures::Stream;
use std::pin::Pin;
use tonic::{Request, Response, Status};

/// The etcd version the members report (kubeadm's etcd for Kubernetes 1.31-1.33).
pub const ETCD_VERSION: &str = "3.5.16";

/// Member `id` of `cluster`, as a gRPC server.
#[derive(Debug, Clone)]
pub struct MemberService {
    pub(crate) cluster: EtcdCluster,
    pub(crate) id: u64,
}

impl MemberService {
    pub fn new(cluster: EtcdCluster, id: u64) -> Self {
        MemberService { cluster, id }
    }

    /// Every service of the v3 API, as one tower service.
    pub fn routes(self) -> tonic::service::Routes {
        tonic::service::Routes::new(KvServer::new(self.clone()))
            .add_service(WatchServer::new(self.clone()))
            .add_service(LeaseServer::new(self.clone()))
            .add_service(ClusterServer::new(self.clone()))
            .add_service(MaintenanceServer::new(self))
    }

    pub(crate) fn header(&self, state: &State) -> pb::ResponseHeader {
        pb::ResponseHeader {
            cluster_id: state.members.cluster_id,
            member_id: self.id,
            revision: state.keys.revision(),
            raft_term: state.members.term(),
        }
    }

    /// Runs `change` (which may leave it as it is) on the membership, as this member (a
    /// removed one answers nothing);
    /// what it returned, the header after it, and the members after it.
    fn with_members<T>(
        &self,
        change: impl FnOnce(&mut crate::members::Members) -> Result<T, MemberError>,
    ) -> Result<(T, pb::ResponseHeader, Vec<pb::Member>), Status> {
        let mut state = self.cluster.lock();
        self.check_member(&state)?;
        let out = change(&mut state.members).map_err(member_status)?;
        Ok((out, self.header(&state), state.members.list()))
    }

    /// Fails if this member was removed (a removed member's etcd stops serving) or is down.
    fn check_member(&self, state: &State) -> Result<(), Status> {
        match state.members.get(self.id) {
            Some(_) if state.members.is_down(self.id) => {
                Err(Status::unavailable("etcdserver: the member is down"))
            }
            Some(_) => Ok(()),
            None => Err(Status::unavailable(
                "etcdserver: the member has been permanently removed from the cluster",
            )),
        }
    }
}

pub(crate) fn member_status(e: MemberError) -> Status {
    match e {
        MemberError::NotFound => Status::not_found(e.to_string()),
        MemberError::BadUrls => Status::invalid_argument(e.to_string()),
        MemberError::LastMember => Status::failed_precondition(e.to_string()),
        _ => Status::failed_precondition(e.to_string()),
    }
}

#[tonic::async_trait]
impl Cluster for MemberService {
    async fn member_add(
        &self,
        request: Request<pb::MemberAddRequest>,
    ) -> Result<Response<pb::MemberAddResponse>, Status> {
        let r = request.into_inner();
        let (member, header, members) = self.with_members(|m| m.add(r.peer_ur_ls, r.is_learner))?;
        Ok(Response::new(pb::MemberAddResponse {
            header: Some(header),
            member: Some(member.to_pb()),
            members,
        }))
    }

    async fn member_remove(
        &self,
        request: Request<pb::MemberRemoveRequest>,
    ) -> Result<Response<pb::MemberRemoveResponse>, Status> {
        let id = request.get_ref().id;
        let ((), header, members) = self.with_members(|m| m.remove(id))?;
        Ok(Response::new(pb::MemberRemoveResponse {
            header: Some(header),
            members,
        }))
    }

    async fn member_update(
        &self,
        request: Request<pb::MemberUpdateRequest>,
    ) -> Result<Response<pb::MemberUpdateResponse>, Status> {
        let r = request.into_inner();
        let ((), header, members) = self.with_members(|m| m.update(r.id, r.peer_ur_ls))?;
        Ok(Response::new(pb::MemberUpdateResponse {
            header: Some(header),
            members,
        }))
    }

    async fn member_list(
        &self,
        _: Request<pb::MemberListRequest>,
    ) -> Result<Response<pb::MemberListResponse>, Status> {
        let ((), header, members) = self.with_members(|_| Ok(()))?;
        Ok(Response::new(pb::MemberListResponse {
            header: Some(header),
            members,
        }))
    }

    async fn member_promote(
        &self,
        request: Request<pb::MemberPromoteRequest>,
    ) -> Result<Response<pb::MemberPromoteResponse>, Status> {
        let id = request.get_ref().id;
        let ((), header, members) = self.with_members(|m| m.promote(id))?;
        Ok(Response::new(pb::MemberPromoteResponse {
            header: Some(header),
            members,
        }))
    }
}

type SnapshotStream = Pin<Box<dyn Stream<Item = Result<pb::SnapshotResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Maintenance for MemberService {
    async fn alarm(
        &self,
        request: Request<pb::AlarmRequest>,
    ) -> Result<Response<pb::AlarmResponse>, Status> {
        use pb::alarm_request::AlarmAction;
        let r = request.into_inner();
        let alarm = pb::AlarmType::try_from(r.alarm).unwrap_or(pb::AlarmType::None);
        let mut state = self.cluster.lock();
        self.check_member(&state)?;
        let alarms = match AlarmAction::try_from(r.action).unwrap_or(AlarmAction::Get) {
            AlarmAction::Get => state.members.alarms(0),
            AlarmAction::Activate => state.members.activate_alarm(r.member_id, alarm),
            AlarmAction::Deactivate => state.members.deactivate_alarm(r.member_id, alarm),
        };
        Ok(Response::new(pb::AlarmResponse {
            header: Some(self.header(&state)),
            alarms,
        }))
    }

    async fn status(
        &self,
        _: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let state = self.cluster.lock();
        self.check_member(&state)?;
        let errors = state
            .members
            .alarms(self.id)
            .iter()
            .map(|a| match pb::AlarmType::try_from(a.alarm) {
                Ok(pb::AlarmType::Nospace) => "etcdserver: mvcc: database space exceeded",
                Ok(pb::AlarmType::Corrupt) => "etcdserver: corrupt cluster",
                _ => "etcdserver: alarm raised",
            })
            .map(|s| format!("memberID:{} alarm:{}", self.id, s))
            .collect();
        // A page of bolt database per key, and the file's base size, as etcd reports roughly.
        let in_use = 20_480 + state.keys.size();
        Ok(Response::new(pb::StatusResponse {
            header: Some(self.header(&state)),
            version: ETCD_VERSION.into(),
            db_size: in_use.max(20_480) + 4096,
            leader: state.members.leader().unwrap_or(0),
            raft_index: state.members.index(),
            raft_term: state.members.term(),
            raft_applied_index: state.members.index(),
            errors,
            db_size_in_use: in_use,
            is_learner: state.members.get(self.id).is_some_and(|m| m.is_learner),
        }))
    }

    async fn defragment(
        &self,
        _: Request<pb::DefragmentRequest>,
    ) -> Result<Response<pb::DefragmentResponse>, Status> {
        let state = self.cluster.lock();
        self.check_member(&state)?;
        Ok(Response::new(pb::DefragmentResponse {
            header: Some(self.header(&state)),
        }))
    }

    async fn hash(
        &self,
        _: Request<pb::HashRequest>,
    ) -> Result<Response<pb::HashResponse>, Status> {
        let state = self.cluster.lock();
        self.check_member(&state)?;
        Ok(Response::new(pb::HashResponse {
            header: Some(self.header(&state)),
            hash: state.keys.hash(),
        }))
    }

    async fn hash_kv(
        &self,
        _: Request<pb::HashKvRequest>,
    ) -> Result<Response<pb::HashKvResponse>, Status> {
        let state = self.cluster.lock();
        self.check_member(&state)?;
        Ok(Response::new(pb::HashKvResponse {
            header: Some(self.header(&state)),
            hash: state.keys.hash(),
            compact_revision: state.keys.compacted(),
            hash_revision: state.keys.revision(),
        }))
    }

    type SnapshotStream = SnapshotStream;

    async fn snapshot(
        &self,
        _: Request<pb::SnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        let (file, header) = {
            let state = self.cluster.lock();
            self.check_member(&state)?;
            (crate::snapshot::database(&state.keys), self.header(&state))
        };
        let digest = crate::snapshot::digest(&file);
        let total = file.len();
        let mut responses = Vec::with_capacity(total / crate::snapshot::CHUNK + 2);
        let mut sent = 0;
        for chunk in file.chunks(crate::snapshot::CHUNK) {
            sent += chunk.len();
            responses.push(Ok(pb::SnapshotResponse {
                header: Some(header),
                remaining_bytes: (total - sent) as u64,
                blob: chunk.to_vec(),
                version: String::new(),
            }));
        }
        // The file's SHA-256 last, which `etcdctl snapshot restore` checks.
        responses.push(Ok(pb::SnapshotResponse {
            header: Some(header),
            remaining_bytes: 0,
            blob: digest,
            version: String::new(),
        }));
        Ok(Response::new(Box::pin(futures::stream::iter(responses))))
    }

    async fn move_leader(
        &self,
        request: Request<pb::MoveLeaderRequest>,
    ) -> Result<Response<pb::MoveLeaderResponse>, Status> {
        let mut state = self.cluster.lock();
        self.check_member(&state)?;
        state
            .members
            .move_leader(self.id, request.get_ref().target_id)
            .map_err(member_status)?;
        Ok(Response::new(pb::MoveLeaderResponse {
            header: Some(self.header(&state)),
        }))
    }

    async fn downgrade(
        &self,
        request: Request<pb::DowngradeRequest>,
    ) -> Result<Response<pb::DowngradeResponse>, Status> {
        let state = self.cluster.lock();
        self.check_member(&state)?;
        let _ = request;
        Err(Status::failed_precondition(
            "etcdserver: invalid downgrade target version",
        ))
    }
}

/// Answers one gRPC request (an HTTP/2 request with `content-type: application/grpc`) with
/// `routes` (a member's, see [`MemberService::routes`]), for a server that hands its gRPC
/// requests over.
pub async fn handle<B>(
    mut routes: tonic::service::Routes,
    req: http::Request<B>,
) -> http::Response<tonic::body::Body>
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    use tonic::codegen::Service;
    match routes.call(req).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}
