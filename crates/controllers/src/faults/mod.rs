//! The Fault controller: puts each [`Fault`] in force on the workload clusters it names, in
//! this process's simulated cloud, and clears it when the Fault is deleted or its duration is
//! over. It runs wherever the process hosts workload clusters (the in-memory provider's, the
//! vcsim controller's endpoints), and finds a cluster by its Cluster's name and namespace.
//!
//! The cloud keeps each cluster's faults by the Fault that asked for them, so two Faults on
//! one cluster add up, and a cluster created or brought back while a Fault selects it starts
//! with the fault in force.

pub mod types;

use crate::capi::core::Cluster;
use crate::capi::infra::cloud_key;
use crate::capi::infra::timing::parse_go_duration;
use chrono::{DateTime, Utc};
use infrasim_cloud::{BootFault, ClusterFault, EtcdAlarm};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_controller_runtime::Context;
use infrasim_etcd_sim::pb::etcdserverpb::AlarmType;
use infrasim_kube_api::faults::{RequestFault, ERROR_CODES};
use kube::api::Api;
use kube::core::{Selector, SelectorExt};
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;
use types::{Fault, FaultSpec, FaultStatus};

/// The field manager of the Fault controller's status writes.
const MANAGER: &str = "infrasim-fault-controller";

/// Held by a Fault until it is cleared from every cluster it was put on.
const FINALIZER: &str = "fault.sim.infrasim.dev";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

pub struct Reconciler {
    ctx: Context,
    informers: Arc<Informers>,
    /// Whether Cluster objects are served (a selector has something to match).
    clusters: bool,
}

/// What a process does with Faults: everything (puts them in force on its clusters, holds
/// their finalizer, writes their status and events), or, where another process leads (a
/// sharded fleet's hosts), only puts them in force on the clusters it hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower,
}

/// Runs the Fault controller until the process ends. With `clusters` (Cluster API's kinds
/// are served), a Cluster's change wakes the Faults of its namespace that select by label or
/// name it.
pub async fn run(ctx: Context, informers: Arc<Informers>, clusters: bool, role: Role) {
    let faults = informers.of::<Fault>();
    let controller = infrasim_controller_runtime::triggers::controller(&faults, None);
    let controller = if clusters {
        let store = faults.store();
        controller.watches_shared_stream(
            infrasim_controller_runtime::triggers::every_change(&informers.of::<Cluster>()),
            move |cluster| {
                store
                    .state()
                    .iter()
                    .filter(|f| f.namespace() == cluster.namespace())
                    // Selectors follow labels; a named cluster's changes (a control plane
                    // that grew) bring its faults to its new members.
                    .filter(|f| {
                        f.spec.cluster_selector.is_some()
                            || f.spec.cluster_name.as_deref() == Some(&cluster.name_any())
                    })
                    .map(|f| ObjectRef::from_obj(&**f))
                    .collect::<Vec<_>>()
            },
        )
    } else {
        controller
    };
    let r = Reconciler {
        ctx: ctx.clone(),
        informers,
        clusters,
    };
    match role {
        Role::Leader => {
            infrasim_controller_runtime::reconcile::run(&ctx, controller, Arc::new(r)).await
        }
        Role::Follower => {
            let follower = Arc::new(Follower(r));
            infrasim_controller_runtime::reconcile::run(&ctx, controller, follower).await
        }
    }
}

/// The Fault controller of a process that does not lead: it puts each Fault in force on the
/// clusters this process hosts (the cloud keeps faults of clusters it does not host for when
/// it does) and clears them when the Fault goes, and leaves the Fault itself to the leader.
pub struct Follower(Reconciler);

impl Reconcile<Fault> for Follower {
    type Error = Error;

    async fn apply(&self, obj: Arc<Fault>) -> Result<Next, Error> {
        let now = self.0.ctx.now();
        let status = obj.status.clone().unwrap_or_default();
        // The leader's start once it has written one; until then, now (a moment later).
        let start = start_of(&status, now);
        let in_force = self.0.put_in_force(&obj, &status, start).await?;
        Ok(match in_force.end {
            Some(end) if now < end => Next::At(end),
            _ => Next::AwaitChange,
        })
    }

    /// Called on the deletion's first event (the leader's finalizer holds the Fault).
    async fn cleanup(&self, obj: Arc<Fault>) -> Result<Cleanup, Error> {
        self.0.clear(&obj).await?;
        Ok(Cleanup::Done)
    }
}

/// When a Fault was first put in force: the start its status records, or `now` for one
/// that has none yet.
fn start_of(status: &FaultStatus, now: DateTime<Utc>) -> DateTime<Utc> {
    status
        .start_time
        .as_deref()
        .and_then(conditions::parse_time)
        .unwrap_or(now)
}

/// What [`Reconciler::put_in_force`] did: the fault, where, and until when.
struct InForce {
    fault: Result<ClusterFault, String>,
    targets: Vec<String>,
    end: Option<DateTime<Utc>>,
}

impl Reconcile<Fault> for Reconciler {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, obj: Arc<Fault>) -> Result<Next, Error> {
        let now = self.ctx.now();
        let status = obj.status.clone().unwrap_or_default();
        let start = start_of(&status, now);
        let InForce {
            fault,
            targets,
            end,
        } = self.put_in_force(&obj, &status, start).await?;
        if let Err(why) = fault {
            let invalid = Condition::new("Active", false, "InvalidSpec", why);
            self.write_status(&obj, &status, "Invalid", &[], None, invalid, now)
                .await?;
            return Ok(Next::AwaitChange);
        }
        let (phase, active) = match end {
            Some(end) if now >= end => ("Expired", expired(end)),
            _ => ("Active", in_force(&obj.spec, &targets)),
        };
        if status.clusters != targets {
            let note = format!(
                "{} on {} cluster(s): {}",
                obj.spec.type_,
                targets.len(),
                targets.join(", ")
            );
            self.ctx.event(&*obj, false, "FaultApplied", note).await;
        }
        self.write_status(&obj, &status, phase, &targets, Some(start), active, now)
            .await?;
        Ok(match end {
            Some(end) if now < end => Next::At(end),
            _ => Next::AwaitChange,
        })
    }

    async fn cleanup(&self, obj: Arc<Fault>) -> Result<Cleanup, Error> {
        self.clear(&obj).await?;
        Ok(Cleanup::Done)
    }
}

impl Reconciler {
    /// Puts the Fault (first applied at `start`) in force on the clusters it selects now,
    /// and clears it from those of `status` it no longer selects (from all of them when its
    /// spec is invalid or its duration is over).
    async fn put_in_force(
        &self,
        obj: &Fault,
        status: &FaultStatus,
        start: DateTime<Utc>,
    ) -> Result<InForce, Error> {
        let fault = effect(&obj.spec, start);
        let end = end_time(&obj.spec, start);
        let over = end.is_some_and(|end| self.ctx.now() >= end);
        let targets = match &fault {
            Ok(_) if !over => self.targets(obj).await?,
            _ => Vec::new(),
        };
        // Cleared where it no longer applies first, then put where it does.
        let gone: Vec<String> = status
            .clusters
            .iter()
            .filter(|c| !targets.contains(c))
            .cloned()
            .collect();
        self.put(obj, &gone, None);
        if let Ok(fault) = &fault {
            self.put(obj, &targets, Some(fault));
        }
        Ok(InForce {
            fault,
            targets,
            end,
        })
    }

    /// Clears a Fault that goes from what it was put on, and what it might have been put on
    /// since its last status.
    async fn clear(&self, obj: &Fault) -> Result<(), Error> {
        let status = obj.status.clone().unwrap_or_default();
        let mut all: BTreeSet<String> = status.clusters.into_iter().collect();
        all.extend(self.targets(obj).await?);
        self.put(obj, &all.into_iter().collect::<Vec<_>>(), None);
        Ok(())
    }

    /// The Cluster names the Fault selects, sorted.
    async fn targets(&self, obj: &Fault) -> Result<Vec<String>, Error> {
        if let Some(name) = &obj.spec.cluster_name {
            return Ok(vec![name.clone()]);
        }
        let Some(selector) = &obj.spec.cluster_selector else {
            return Ok(Vec::new());
        };
        let Ok(selector) = Selector::try_from(selector.clone()) else {
            return Ok(Vec::new());
        };
        if !self.clusters {
            return Ok(Vec::new());
        }
        let ns = obj.namespace();
        let mut names: Vec<String> = self
            .informers
            .of::<Cluster>()
            .store()
            .state()
            .iter()
            .filter(|c| c.namespace() == ns && c.metadata.deletion_timestamp.is_none())
            .filter(|c| selector.matches(c.labels()))
            .map(|c| c.name_any())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Puts `fault` on (or with `None` clears the Fault's faults from) the workload
    /// clusters of `clusters`; what the Fault did before as another type goes with it.
    fn put(&self, obj: &Fault, clusters: &[String], fault: Option<&ClusterFault>) {
        let ns = obj.namespace().unwrap_or_default();
        let source = format!("{ns}/{}", obj.name_any());
        for cluster in clusters {
            let fault = fault.cloned().unwrap_or_default();
            self.ctx
                .cloud
                .set_fault(&cloud_key(cluster, &ns), &source, fault);
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn write_status(
        &self,
        obj: &Fault,
        old: &FaultStatus,
        phase: &str,
        clusters: &[String],
        start: Option<DateTime<Utc>>,
        active: Condition,
        now: DateTime<Utc>,
    ) -> Result<(), Error> {
        let mut status = FaultStatus {
            phase: Some(phase.to_string()),
            clusters: clusters.to_vec(),
            cluster_count: Some(clusters.len() as i64),
            start_time: start.map(conditions::timestamp),
            end_time: start
                .and_then(|s| end_time(&obj.spec, s))
                .map(conditions::timestamp),
            observed_generation: obj.metadata.generation,
            conditions: old.conditions.clone(),
        };
        conditions::set(&mut status.conditions, active, now);
        if &status == old {
            return Ok(());
        }
        let ns = obj.namespace().unwrap_or_default();
        let api: Api<Fault> = Api::namespaced(self.ctx.client.clone(), &ns);
        let body = json!({
            "apiVersion": "sim.infrasim.dev/v1alpha1",
            "kind": "Fault",
            "status": status,
        });
        infrasim_controller_runtime::writes::apply_status(&api, &obj.name_any(), MANAGER, &body)
            .await?;
        Ok(())
    }
}

/// What a Fault's spec, first applied at `start`, does to a workload cluster, or why it
/// cannot be applied.
fn effect(spec: &FaultSpec, start: DateTime<Utc>) -> Result<ClusterFault, String> {
    let params = spec.params.clone().unwrap_or_default();
    let mut fault = ClusterFault::default();
    match spec.type_.as_str() {
        "APIDown" => fault.endpoint_down = true,
        "EtcdAlarm" => {
            let alarm = match params.alarm.as_deref() {
                Some("NOSPACE") => AlarmType::Nospace,
                Some("CORRUPT") => AlarmType::Corrupt,
                other => return Err(format!("params.alarm {other:?} is not NOSPACE or CORRUPT")),
            };
            let member = params.member.filter(|m| !m.is_empty());
            fault.etcd_alarms.insert(EtcdAlarm { member, alarm });
        }
        "NodeNotReady" => {
            let node = named(params.node, "a NodeNotReady fault needs params.node")?;
            fault.stopped_kubelets.insert(node);
        }
        "EtcdMemberDown" => {
            let member = named(params.member, "an EtcdMemberDown fault needs params.member")?;
            fault.etcd_members_down.insert(member);
        }
        "NodeDeleted" => {
            let node = named(params.node, "a NodeDeleted fault needs params.node")?;
            fault.deleted_nodes.insert(node);
        }
        "MachineNeverBoots" => fault.boot = Some(BootFault::Never),
        "MachineBootsLate" => {
            let delay = params
                .delay
                .as_deref()
                .ok_or("a MachineBootsLate fault needs params.delay")?;
            let delay = parse_go_duration(delay).map_err(|e| format!("params.delay: {e}"))?;
            fault.boot = Some(BootFault::Late(delay));
        }
        "CertificateExpiring" => {
            let within = (params.expires_in.as_deref())
                .ok_or("a CertificateExpiring fault needs params.expiresIn")?;
            let within = parse_go_duration(within).map_err(|e| format!("params.expiresIn: {e}"))?;
            // Whole seconds: what a certificate's expiry can say.
            let until = chrono::Duration::from_std(within)
                .ok()
                .and_then(|d| DateTime::from_timestamp(start.timestamp(), 0)?.checked_add_signed(d))
                .ok_or("params.expiresIn is too long")?;
            let node = params.node.unwrap_or_default();
            fault.expiring_certificates.insert(node, until);
        }
        _ => fault.requests = Some(request_fault(spec)?),
    }
    Ok(fault)
}

/// A name a fault type needs (a node, a member), or `missing` as the reason it cannot apply.
fn named(value: Option<String>, missing: &str) -> Result<String, String> {
    value
        .filter(|v| !v.is_empty())
        .ok_or_else(|| missing.to_string())
}

/// What a Fault's spec does to an API server's requests, or why it cannot be applied.
fn request_fault(spec: &FaultSpec) -> Result<RequestFault, String> {
    let params = spec.params.clone().unwrap_or_default();
    match spec.type_.as_str() {
        "APILatency" => {
            let latency = params
                .latency
                .as_deref()
                .ok_or("an APILatency fault needs params.latency")?;
            let latency = parse_go_duration(latency).map_err(|e| format!("params.latency: {e}"))?;
            Ok(RequestFault {
                latency,
                ..RequestFault::default()
            })
        }
        "APIErrors" => {
            let fraction = match params.fraction.as_deref() {
                None => 1.0,
                Some(f) => f
                    .parse::<f64>()
                    .ok()
                    .filter(|f| (0.0..=1.0).contains(f))
                    .ok_or_else(|| format!("params.fraction {f:?} is not a number from 0 to 1"))?,
            };
            let code = params.code.unwrap_or(500);
            if !ERROR_CODES.contains(&code) {
                return Err(format!("params.code {code} is not one of {ERROR_CODES:?}"));
            }
            Ok(RequestFault {
                error_fraction: fraction,
                error_code: code,
                retry_after_seconds: params.retry_after_seconds.unwrap_or(1),
                ..RequestFault::default()
            })
        }
        other => Err(format!("fault type {other:?} is not implemented")),
    }
}

/// When a fault applied at `start` ends by itself, if it does.
fn end_time(spec: &FaultSpec, start: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let duration = parse_go_duration(spec.duration.as_deref()?).ok()?;
    let duration = chrono::Duration::from_std(duration).ok()?;
    start.checked_add_signed(duration)
}

fn in_force(spec: &FaultSpec, targets: &[String]) -> Condition {
    match targets.is_empty() {
        true => Condition::new("Active", false, "NoClusters", "no Cluster matches"),
        false => Condition::new(
            "Active",
            true,
            "InForce",
            format!("{} in force on {}", spec.type_, targets.join(", ")),
        ),
    }
}

fn expired(end: DateTime<Utc>) -> Condition {
    Condition::new(
        "Active",
        false,
        "Expired",
        format!("its duration ended at {}", conditions::timestamp(end)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;
    use types::FaultParams;

    fn spec(type_: &str, params: FaultParams) -> FaultSpec {
        FaultSpec {
            cluster_name: Some("c1".into()),
            type_: type_.into(),
            params: Some(params),
            ..FaultSpec::default()
        }
    }

    #[test]
    fn latency_and_errors_read_their_params_with_defaults() {
        let latency = FaultParams {
            latency: Some("1.5s".into()),
            ..FaultParams::default()
        };
        assert_eq!(
            request_fault(&spec("APILatency", latency)).map(|f| f.latency),
            Ok(Duration::from_millis(1500))
        );
        let errors = request_fault(&spec("APIErrors", FaultParams::default()));
        assert_eq!(
            errors.map(|f| (f.error_fraction, f.error_code, f.retry_after_seconds)),
            Ok((1.0, 500, 1))
        );
        let throttled = FaultParams {
            fraction: Some("0.25".into()),
            code: Some(429),
            retry_after_seconds: Some(5),
            ..FaultParams::default()
        };
        assert_eq!(
            request_fault(&spec("APIErrors", throttled)).map(|f| (
                f.error_fraction,
                f.error_code,
                f.retry_after_seconds
            )),
            Ok((0.25, 429, 5))
        );
    }

    #[test]
    fn a_spec_that_cannot_apply_says_why() {
        let bad_code = FaultParams {
            code: Some(418),
            ..FaultParams::default()
        };
        assert!(request_fault(&spec("APIErrors", bad_code)).is_err_and(|e| e.contains("418")));
        assert!(request_fault(&spec("APILatency", FaultParams::default()))
            .is_err_and(|e| e.contains("params.latency")));
        assert!(request_fault(&spec("Meteor", FaultParams::default()))
            .is_err_and(|e| e.contains("not implemented")));
    }

    #[test]
    fn node_not_ready_names_its_node() {
        let node = FaultParams {
            node: Some("w-0".into()),
            ..FaultParams::default()
        };
        assert_eq!(
            effect(&spec("NodeNotReady", node), Utc::now()).map(|f| f.stopped_kubelets),
            Ok(BTreeSet::from(["w-0".to_string()]))
        );
        assert!(
            effect(&spec("NodeNotReady", FaultParams::default()), Utc::now())
                .is_err_and(|e| e.contains("params.node"))
        );
        let node = FaultParams {
            node: Some("w-1".into()),
            ..FaultParams::default()
        };
        assert_eq!(
            effect(&spec("NodeDeleted", node), Utc::now()).map(|f| f.deleted_nodes),
            Ok(BTreeSet::from(["w-1".to_string()]))
        );
    }

    #[test]
    fn an_etcd_alarm_is_nospace_or_corrupt_on_one_member_or_all() {
        let all = FaultParams {
            alarm: Some("NOSPACE".into()),
            ..FaultParams::default()
        };
        assert_eq!(
            effect(&spec("EtcdAlarm", all), Utc::now()).map(|f| f.etcd_alarms),
            Ok(BTreeSet::from([EtcdAlarm {
                member: None,
                alarm: AlarmType::Nospace
            }]))
        );
        let one = FaultParams {
            alarm: Some("CORRUPT".into()),
            member: Some("c1-cp-0".into()),
            ..FaultParams::default()
        };
        assert_eq!(
            effect(&spec("EtcdAlarm", one), Utc::now()).map(|f| f.etcd_alarms),
            Ok(BTreeSet::from([EtcdAlarm {
                member: Some("c1-cp-0".into()),
                alarm: AlarmType::Corrupt
            }]))
        );
        assert!(effect(&spec("EtcdAlarm", FaultParams::default()), Utc::now()).is_err());
    }

    #[test]
    fn an_etcd_member_down_is_named() {
        let one = FaultParams {
            member: Some("c1-cp-0".into()),
            ..FaultParams::default()
        };
        assert_eq!(
            effect(&spec("EtcdMemberDown", one), Utc::now()).map(|f| f.etcd_members_down),
            Ok(BTreeSet::from(["c1-cp-0".to_string()]))
        );
        assert!(
            effect(&spec("EtcdMemberDown", FaultParams::default()), Utc::now())
                .is_err_and(|e| e.contains("params.member"))
        );
    }

    #[test]
    fn a_machine_boots_never_or_late_by_its_delay() {
        assert_eq!(
            effect(
                &spec("MachineNeverBoots", FaultParams::default()),
                Utc::now()
            )
            .map(|f| f.boot),
            Ok(Some(BootFault::Never))
        );
        let late = FaultParams {
            delay: Some("90s".into()),
            ..FaultParams::default()
        };
        assert_eq!(
            effect(&spec("MachineBootsLate", late), Utc::now()).map(|f| f.boot),
            Ok(Some(BootFault::Late(Duration::from_secs(90))))
        );
        assert!(effect(
            &spec("MachineBootsLate", FaultParams::default()),
            Utc::now()
        )
        .is_err_and(|e| e.contains("params.delay")));
    }

    #[test]
    fn a_certificate_expires_its_time_after_the_fault_starts_on_one_node_or_all() {
        let start = DateTime::parse_from_rfc3339("2026-01-01T00:00:00.250Z")
            .map(|t| t.with_timezone(&Utc))
            .expect("time");
        let one = FaultParams {
            expires_in: Some("480h".into()),
            node: Some("cp-0".into()),
            ..FaultParams::default()
        };
        let until = DateTime::parse_from_rfc3339("2026-01-21T00:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .expect("time");
        assert_eq!(
            effect(&spec("CertificateExpiring", one), start).map(|f| f.expiring_certificates),
            Ok(BTreeMap::from([("cp-0".to_string(), until)]))
        );
        let all = FaultParams {
            expires_in: Some("480h".into()),
            ..FaultParams::default()
        };
        assert_eq!(
            effect(&spec("CertificateExpiring", all), start).map(|f| f.expiring_certificates),
            Ok(BTreeMap::from([(String::new(), until)]))
        );
        assert!(
            effect(&spec("CertificateExpiring", FaultParams::default()), start)
                .is_err_and(|e| e.contains("params.expiresIn"))
        );
    }

    #[test]
    fn a_duration_ends_the_fault_after_its_start() {
        let start = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .expect("time");
        let mut s = spec("APIErrors", FaultParams::default());
        assert_eq!(end_time(&s, start), None);
        s.duration = Some("10m".into());
        assert_eq!(
            end_time(&s, start),
            start.checked_add_signed(chrono::Duration::minutes(10))
        );
    }
}
