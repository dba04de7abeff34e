//! The KV service: Range, Put, DeleteRange, Txn and Compact over the cluster's key space,
//! answered by one member.

use crate::cluster::State;
use crate::keyspace::{KeyError, KeyRange, KeySpace, Revision};
use crate::pb::etcdserverpb as pb;
use crate::pb::etcdserverpb::kv_server::Kv;
use crate::pb::etcdserverpb::range_request::{SortOrder, SortTarget};
use crate::pb::mvccpb::KeyValue;
use crate::service::MemberService;
use tonic::{Request, Response, Status};

/// What a raised alarm refuses, as etcd's appliers do: under CORRUPT every request fails;
/// under NOSPACE whatever would write a key (a Put, a Txn with a put in it), while reads,
/// deletes and compaction, which free space, go on.
fn refused_by_alarms(state: &State, puts: bool) -> Result<(), Status> {
    // Without a quorum nothing is agreed on: raft has no leader to order a request.
    if state.members.leader().is_none() {
        return Err(Status::unavailable("etcdserver: no leader"));
    }
    let raised = state.members.alarms(0);
    let has = |alarm: pb::AlarmType| raised.iter().any(|a| a.alarm == alarm as i32);
    if has(pb::AlarmType::Corrupt) {
        return Err(Status::data_loss("etcdserver: corrupt cluster"));
    }
    if puts && has(pb::AlarmType::Nospace) {
        return Err(Status::resource_exhausted(
            "etcdserver: mvcc: database space exceeded",
        ));
    }
    Ok(())
}

/// Whether a Txn could put a key, in either branch (nested Txns included).
fn txn_puts(txn: &pb::TxnRequest) -> bool {
    use pb::request_op::Request as Op;
    txn.success
        .iter()
        .chain(&txn.failure)
        .any(|op| match &op.request {
            Some(Op::RequestPut(_)) => true,
            Some(Op::RequestTxn(inner)) => txn_puts(inner),
            _ => false,
        })
}

pub(crate) fn key_status(e: KeyError) -> Status {
    match e {
        KeyError::Compacted | KeyError::FutureRevision => Status::out_of_range(e.to_string()),
        KeyError::EmptyKey | KeyError::KeyNotFound => Status::invalid_argument(e.to_string()),
    }
}

#[tonic::async_trait]
impl Kv for MemberService {
    async fn range(
        &self,
        request: Request<pb::RangeRequest>,
    ) -> Result<Response<pb::RangeResponse>, Status> {
        let state = self.cluster.lock();
        refused_by_alarms(&state, false)?;
        let mut response = range(&state.keys, request.get_ref()).map_err(key_status)?;
        response.header = Some(self.header(&state));
        Ok(Response::new(response))
    }

    async fn put(
        &self,
        request: Request<pb::PutRequest>,
    ) -> Result<Response<pb::PutResponse>, Status> {
        let put = request.into_inner();
        let (prev_kv, header) =
            self.write(true, |revision, leases| put_key(revision, leases, put))?;
        Ok(Response::new(pb::PutResponse {
            header: Some(header),
            prev_kv,
        }))
    }

    async fn delete_range(
        &self,
        request: Request<pb::DeleteRangeRequest>,
    ) -> Result<Response<pb::DeleteRangeResponse>, Status> {
        let delete = request.into_inner();
        let (mut response, header) = self.write(false, |revision, leases| {
            Ok(delete_keys(revision, leases, &delete))
        })?;
        response.header = Some(header);
        Ok(Response::new(response))
    }

    async fn txn(
        &self,
        request: Request<pb::TxnRequest>,
    ) -> Result<Response<pb::TxnResponse>, Status> {
        let txn = request.into_inner();
        let puts = txn_puts(&txn);
        let (mut response, header) =
            self.write(puts, |revision, leases| run_txn(revision, leases, txn))?;
        response.header = Some(header);
        Ok(Response::new(response))
    }

    async fn compact(
        &self,
        request: Request<pb::CompactionRequest>,
    ) -> Result<Response<pb::CompactionResponse>, Status> {
        let mut state = self.cluster.lock();
        state
            .keys
            .compact(request.get_ref().revision)
            .map_err(key_status)?;
        state.members.commit();
        Ok(Response::new(pb::CompactionResponse {
            header: Some(self.header(&state)),
        }))
    }
}

type Leases = std::collections::BTreeMap<i64, crate::cluster::Lease>;

impl MemberService {
    /// Runs `change` as one revision of the key space: commits it, counts it in raft's index
    /// if it changed anything, and hands its events to the watches once the lock is released.
    /// What `change` returned, and the header after it. `puts`: whether it may write a key,
    /// which a NOSPACE alarm refuses.
    fn write<T>(
        &self,
        puts: bool,
        change: impl FnOnce(&mut Revision<'_>, &mut Leases) -> Result<T, Status>,
    ) -> Result<(T, pb::ResponseHeader), Status> {
        let mut state = self.cluster.lock();
        refused_by_alarms(&state, puts)?;
        let (out, events) = {
            let State { keys, leases, .. } = &mut *state;
            let mut revision = keys.begin();
            let out = change(&mut revision, leases)?;
            (out, revision.commit())
        };
        if !events.is_empty() {
            state.members.commit();
        }
        let header = self.header(&state);
        drop(state);
        self.cluster.publish(events);
        Ok((out, header))
    }
}

/// A Range against the current keys (etcd keeps no old versions here: a read at an older
/// revision that is not compacted is answered from the current keys it still matches).
fn range(keys: &KeySpace, r: &pb::RangeRequest) -> Result<pb::RangeResponse, KeyError> {
    keys.check_read_revision(r.revision)?;
    let mut kvs: Vec<KeyValue> = keys
        .range(&KeyRange::new(r.key.clone(), r.range_end.clone()))
        .into_iter()
        .filter(|kv| r.min_mod_revision == 0 || kv.mod_revision >= r.min_mod_revision)
        .filter(|kv| r.max_mod_revision == 0 || kv.mod_revision <= r.max_mod_revision)
        .filter(|kv| r.min_create_revision == 0 || kv.create_revision >= r.min_create_revision)
        .filter(|kv| r.max_create_revision == 0 || kv.create_revision <= r.max_create_revision)
        .collect();
    let count = kvs.len() as i64;
    sort(&mut kvs, r);
    let more = r.limit > 0 && count > r.limit;
    if r.limit > 0 {
        kvs.truncate(r.limit as usize);
    }
    if r.keys_only {
        for kv in &mut kvs {
            kv.value.clear();
        }
    }
    if r.count_only {
        kvs.clear();
    }
    Ok(pb::RangeResponse {
        header: None,
        kvs,
        more,
        count,
    })
}

fn sort(kvs: &mut [KeyValue], r: &pb::RangeRequest) {
    let order = SortOrder::try_from(r.sort_order).unwrap_or(SortOrder::None);
    let target = SortTarget::try_from(r.sort_target).unwrap_or(SortTarget::Key);
    if order == SortOrder::None {
        return;
    }
    kvs.sort_by(|a, b| match target {
        SortTarget::Key => a.key.cmp(&b.key),
        SortTarget::Version => a.version.cmp(&b.version),
        SortTarget::Create => a.create_revision.cmp(&b.create_revision),
        SortTarget::Mod => a.mod_revision.cmp(&b.mod_revision),
        SortTarget::Value => a.value.cmp(&b.value),
    });
    if order == SortOrder::Descend {
        kvs.reverse();
    }
}

/// A Put within `revision`: the previous value if asked for.
fn put_key(
    revision: &mut Revision<'_>,
    leases: &mut Leases,
    put: pb::PutRequest,
) -> Result<Option<KeyValue>, Status> {
    if put.key.is_empty() {
        return Err(key_status(KeyError::EmptyKey));
    }
    let current = revision.space().get(&put.key).cloned();
    if (put.ignore_value || put.ignore_lease) && current.is_none() {
        return Err(key_status(KeyError::KeyNotFound));
    }
    let value = match (&current, put.ignore_value) {
        (Some(c), true) => c.value.clone(),
        _ => put.value,
    };
    let lease = match (&current, put.ignore_lease) {
        (Some(c), true) => c.lease,
        _ => put.lease,
    };
    if lease != 0 && !leases.contains_key(&lease) {
        return Err(Status::not_found("etcdserver: requested lease not found"));
    }
    if let Some(old) = current
        .as_ref()
        .filter(|c| c.lease != 0 && c.lease != lease)
    {
        if let Some(l) = leases.get_mut(&old.lease) {
            l.keys.remove(&old.key);
        }
    }
    if let Some(l) = leases.get_mut(&lease) {
        l.keys.insert(put.key.clone());
    }
    let prev = revision.put(put.key, value, lease);
    Ok(prev.filter(|_| put.prev_kv))
}

/// A DeleteRange within `revision`.
fn delete_keys(
    revision: &mut Revision<'_>,
    leases: &mut Leases,
    d: &pb::DeleteRangeRequest,
) -> pb::DeleteRangeResponse {
    let gone = revision.delete(&KeyRange::new(d.key.clone(), d.range_end.clone()));
    for kv in gone.iter().filter(|kv| kv.lease != 0) {
        if let Some(l) = leases.get_mut(&kv.lease) {
            l.keys.remove(&kv.key);
        }
    }
    pb::DeleteRangeResponse {
        header: None,
        deleted: gone.len() as i64,
        prev_kvs: if d.prev_kv { gone } else { Vec::new() },
    }
}

/// A transaction: its comparisons against the keys as they are, then one branch's
/// operations, all in one revision.
fn run_txn(
    revision: &mut Revision<'_>,
    leases: &mut Leases,
    txn: pb::TxnRequest,
) -> Result<pb::TxnResponse, Status> {
    let succeeded = txn.compare.iter().all(|c| compare(revision, c));
    let ops = if succeeded { txn.success } else { txn.failure };
    let mut responses = Vec::with_capacity(ops.len());
    for op in ops {
        use pb::request_op::Request as Op;
        use pb::response_op::Response as Out;
        let out = match op.request {
            Some(Op::RequestRange(r)) => {
                Out::ResponseRange(range(revision.space(), &r).map_err(key_status)?)
            }
            Some(Op::RequestPut(p)) => {
                let prev = put_key(revision, leases, p)?;
                Out::ResponsePut(pb::PutResponse {
                    header: None,
                    prev_kv: prev,
                })
            }
            Some(Op::RequestDeleteRange(d)) => {
                Out::ResponseDeleteRange(delete_keys(revision, leases, &d))
            }
            Some(Op::RequestTxn(inner)) => Out::ResponseTxn(run_txn(revision, leases, inner)?),
            None => return Err(Status::invalid_argument("etcdserver: empty request")),
        };
        responses.push(pb::ResponseOp {
            response: Some(out),
        });
    }
    Ok(pb::TxnResponse {
        header: None,
        succeeded,
        responses,
    })
}

/// One comparison of a transaction, over every key of its range (a missing key compares
/// as version, revisions and lease 0 and an empty value, as etcd's does).
fn compare(revision: &Revision<'_>, c: &pb::Compare) -> bool {
    use pb::compare::{CompareResult, CompareTarget, TargetUnion};
    use std::cmp::Ordering;
    let range = KeyRange::new(c.key.clone(), c.range_end.clone());
    let mut kvs = revision.space().range(&range);
    if kvs.is_empty() && c.range_end.is_empty() {
        kvs.push(KeyValue {
            key: c.key.clone(),
            ..Default::default()
        });
    }
    let result = CompareResult::try_from(c.result).unwrap_or(CompareResult::Equal);
    let target = CompareTarget::try_from(c.target).unwrap_or(CompareTarget::Version);
    kvs.iter().all(|kv| {
        let ord: Ordering = match (target, &c.target_union) {
            (CompareTarget::Version, Some(TargetUnion::Version(v))) => kv.version.cmp(v),
            (CompareTarget::Create, Some(TargetUnion::CreateRevision(v))) => {
                kv.create_revision.cmp(v)
            }
            (CompareTarget::Mod, Some(TargetUnion::ModRevision(v))) => kv.mod_revision.cmp(v),
            (CompareTarget::Value, Some(TargetUnion::Value(v))) => kv.value.cmp(v),
            (CompareTarget::Lease, Some(TargetUnion::Lease(v))) => kv.lease.cmp(v),
            _ => return false,
        };
        match result {
            CompareResult::Equal => ord == Ordering::Equal,
            CompareResult::NotEqual => ord != Ordering::Equal,
            CompareResult::Greater => ord == Ordering::Greater,
            CompareResult::Less => ord == Ordering::Less,
        }
    })
}
