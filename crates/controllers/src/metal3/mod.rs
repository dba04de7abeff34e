//! A stand-in for metal3's bare-metal operator (and the Ironic behind it) where metal3 does
//! not run (the plane's BareMetalHost CRD is the one we install, marked
//! `crds::ONLY_IF_ABSENT`; where metal3's own CRD is installed, its operator owns hosts and
//! this does nothing). It drives every host through its BMC over Redfish, as Ironic's
//! `redfish` and `redfish-virtualmedia` drivers do: registering checks the credentials
//! Secret against the BMC; inspecting boots the agent (PXE, or its ISO by virtual media),
//! reads the hardware into `status.hardware` and powers off; provisioning boots the agent,
//! sets the disk (or a live ISO) as the boot device and powers as `spec.online` says;
//! deprovisioning cleans (the agent again) and powers off; stable hosts have their power
//! follow `spec.online` through `ComputerSystem.Reset`. Failures are reported as metal3
//! does (`operationalStatus: error`, `errorType`, `errorMessage`, `errorCount`) and tried
//! again with a backoff. The pure parts are `states` (which step a host is at) and
//! `hardware` (Redfish resources as metal3's hardware details).

pub mod hardware;
pub mod states;

use crate::sip::types::{
    BareMetalHost, BareMetalHostStatus, CredentialsStatus, OperationMetric, Provisioning,
    SecretReference,
};
use infrasim_controller_runtime::context::Context;
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::reconcile::{Next, Reconcile};
use infrasim_redfish::client::{Address, Bmc, Bmcs, ClientError};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::ResourceExt;
use serde_json::{json, Value};
use states::Step;
use std::sync::Arc;
use std::time::Duration;

/// The field manager host status is written under.
const MANAGER: &str = "infrasim-metal3-standin";

/// The agent's ISO, as Ironic's configuration names it for virtual media boots (nothing
/// fetches it: the machines are simulated, and their BMCs record what they were given).
pub const AGENT_ISO: &str = "http://ironic.infrasim.invalid/images/ironic-python-agent.iso";

/// How soon the next step of a host that moved on runs. Its own status writes do not wake
/// the controller (it watches spec and metadata), so a step asks for the next; the pause
/// lets the informer's cache see the state just written.
const NEXT_STEP: Duration = Duration::from_millis(200);

/// How often a stable host's power is looked at (metal3 polls its BMC likewise), so a
/// change made behind the operator's back shows in `status.poweredOn`.
const POWER_CHECK: Duration = Duration::from_secs(60);

/// Runs the stand-in, if the plane's BareMetalHost CRD is ours, until the process ends.
pub async fn run(ctx: Context, informers: Arc<Informers>) {
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let ours = match crds.get_opt("baremetalhosts.metal3.io").await {
        Ok(Some(crd)) => crd.annotations().contains_key(crate::crds::ONLY_IF_ABSENT),
        _ => false,
    };
    if !ours {
        tracing::info!("BareMetalHosts are left to metal3's operator");
        return;
    }
    let hosts = informers.of::<BareMetalHost>();
    let controller = infrasim_controller_runtime::triggers::controller(&hosts, None);
    let operator = Arc::new(Operator {
        ctx: ctx.clone(),
        bmcs: Bmcs::default(),
    });
    infrasim_controller_runtime::reconcile::run(&ctx, controller, operator).await;
}

struct Operator {
    ctx: Context,
    /// The connections to the hosts' BMCs, kept between passes.
    bmcs: Bmcs,
}

/// What a step did: the status it leaves, an event worth recording, and when to look again.
struct Done {
    reason: Option<(&'static str, String)>,
    next: Next,
}

impl Reconcile<BareMetalHost> for Operator {
    type Error = kube::Error;

    async fn apply(&self, host: Arc<BareMetalHost>) -> Result<Next, kube::Error> {
        let step = states::step(&host);
        if step == Step::Idle {
            return Ok(Next::AwaitChange);
        }
        let mut status = host.status.clone().unwrap_or_default();
        let next = match self.act(&host, step, &mut status).await? {
            Ok(done) => {
                succeeded(&mut status);
                if let Some((reason, note)) = done.reason {
                    self.ctx.event(&*host, false, reason, note).await;
                }
                done.next
            }
            Err(e) => {
                let count = failed(&host, step, &mut status, &e);
                self.ctx
                    .event(
                        &*host,
                        true,
                        "BMCError",
                        status.error_message.clone().unwrap_or_default(),
                    )
                    .await;
                Next::After(backoff(count))
            }
        };
        if host.status.as_ref() != Some(&status) {
            status.last_updated = Some(stamp(&self.ctx));
            let api: Api<BareMetalHost> = Api::namespaced(
                self.ctx.client.clone(),
                &host.namespace().unwrap_or_default(),
            );
            let body = json!({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
                              "status": status});
            infrasim_controller_runtime::writes::apply_status(
                &api,
                &host.name_any(),
                MANAGER,
                &body,
            )
            .await?;
        }
        Ok(next)
    }
}

impl Operator {
    /// Runs `step` on the host: its outcome, or why the BMC (or its Secret) failed it.
    async fn act(
        &self,
        host: &BareMetalHost,
        step: Step,
        status: &mut BareMetalHostStatus,
    ) -> Result<Result<Done, ClientError>, kube::Error> {
        if step == Step::Unmanage {
            set_state(status, host, "unmanaged");
            status.operational_status = Some("OK".into());
            return Ok(Ok(Done {
                reason: None,
                next: Next::AwaitChange,
            }));
        }
        let bmc = match self.connect(host, status).await? {
            Ok(b) => b,
            Err(e) => return Ok(Err(e)),
        };
        let now = stamp(&self.ctx);
        Ok(match step {
            Step::Register => register(&bmc, host, status, &now).await,
            Step::Inspect => inspect(&bmc, host, status, &now).await,
            Step::Prepare => Ok(moved_to(status, host, "available")),
            Step::Provision => provision(&bmc, host, status, &now).await,
            Step::Deprovision => deprovision(&bmc, host, status, &now).await,
            Step::Adopt => Ok(moved_to(status, host, "externally provisioned")),
            Step::Power => power(&bmc, host, status).await,
            Step::Idle | Step::Unmanage => unreachable_step(),
        })
    }

    /// The host's BMC, with the credentials its Secret holds now (recorded as tried).
    async fn connect(
        &self,
        host: &BareMetalHost,
        status: &mut BareMetalHostStatus,
    ) -> Result<Result<Bmc, ClientError>, kube::Error> {
        let Some(details) = host.spec.bmc.as_ref() else {
            return Ok(Err(ClientError::Address("the host names no BMC".into())));
        };
        let ns = host.namespace().unwrap_or_default();
        let secrets: Api<Secret> = Api::namespaced(self.ctx.client.clone(), &ns);
        let Some(secret) = secrets.get_opt(&details.credentials_name).await? else {
            let why = format!(
                "the BMC credentials Secret {ns}/{} is missing",
                details.credentials_name
            );
            return Ok(Err(ClientError::Address(why)));
        };
        let field = |k: &str| {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(k))
                .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        };
        let (Some(user), Some(password)) = (field("username"), field("password")) else {
            let why = format!(
                "the BMC credentials Secret {ns}/{} has no username or password",
                details.credentials_name
            );
            return Ok(Err(ClientError::Address(why)));
        };
        status.tried_credentials = Some(CredentialsStatus {
            credentials: Some(SecretReference {
                name: details.credentials_name.clone(),
                namespace: Some(ns),
            }),
            credentials_version: secret.metadata.resource_version.clone(),
        });
        let verify = details.disable_certificate_verification != Some(true);
        Ok(Address::parse(&details.address)
            .and_then(|a| self.bmcs.bmc(a, &user, &password, verify)))
    }
}

/// A step with nothing to ask of the BMC: the host moves on to `state`.
fn moved_to(status: &mut BareMetalHostStatus, host: &BareMetalHost, state: &str) -> Done {
    set_state(status, host, state);
    Done {
        reason: None,
        next: Next::After(NEXT_STEP),
    }
}

/// A step `step` never asks for (Idle and Unmanage are answered before any BMC is reached).
fn unreachable_step() -> Result<Done, ClientError> {
    Err(ClientError::Answer("no BMC work for this state".into()))
}

/// Now, as status timestamps are written.
fn stamp(ctx: &Context) -> String {
    ctx.now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn set_state(status: &mut BareMetalHostStatus, host: &BareMetalHost, state: &str) {
    let p = status
        .provisioning
        .get_or_insert_with(Provisioning::default);
    if p.id.is_empty() {
        p.id = host.uid().unwrap_or_default();
    }
    p.state = state.to_string();
}

/// A step that went through: errors cleared, the credentials good.
fn succeeded(status: &mut BareMetalHostStatus) {
    status.operational_status = Some("OK".into());
    status.error_type = None;
    status.error_message = None;
    status.error_count = Some(0);
    if status.tried_credentials.is_some() {
        status.good_credentials = status.tried_credentials.clone();
    }
}

/// A step that failed, reported as metal3 does; the error count.
fn failed(
    host: &BareMetalHost,
    step: Step,
    status: &mut BareMetalHostStatus,
    e: &ClientError,
) -> i64 {
    let provisioned = states::state(host) == "provisioned";
    let kind = match (
        e.is_unauthorized() || matches!(e, ClientError::Address(_)),
        provisioned,
    ) {
        (true, true) => "provisioned registration error",
        (true, false) => "registration error",
        _ => step.error_type(),
    };
    if states::state(host).is_empty() {
        set_state(status, host, "registering");
    }
    status.operational_status = Some("error".into());
    status.error_type = Some(kind.into());
    status.error_message = Some(e.to_string());
    let count = status.error_count.unwrap_or(0) + 1;
    status.error_count = Some(count);
    count
}

/// How long after the `count`th error in a row the host is tried again: 10 s doubling, at
/// most 5 minutes.
fn backoff(count: i64) -> Duration {
    let exp = count.clamp(1, 6) as u32 - 1;
    Duration::from_secs((10u64 << exp).min(300))
}

/// The boot mode a host asks for, as Redfish names it.
fn boot_mode(host: &BareMetalHost) -> &'static str {
    match host.spec.boot_mode.as_deref() {
        Some("legacy") => "Legacy",
        _ => "UEFI",
    }
}

fn history(status: &mut BareMetalHostStatus) -> &mut crate::sip::types::OperationHistory {
    status
        .operation_history
        .get_or_insert_with(Default::default)
}

fn metric(start: &str, end: &str) -> OperationMetric {
    OperationMetric {
        start: Some(start.to_string()),
        end: Some(end.to_string()),
    }
}

async fn register(
    bmc: &Bmc,
    host: &BareMetalHost,
    status: &mut BareMetalHostStatus,
    now: &str,
) -> Result<Done, ClientError> {
    // A new host is `registering` first, as metal3 shows it, before its BMC is asked.
    if states::state(host) != "registering" {
        return Ok(moved_to(status, host, "registering"));
    }
    let system = bmc.system().await?;
    status.powered_on = Some(system["PowerState"] == "On");
    history(status).register = metric(now, now);
    set_state(status, host, states::after_registering(host));
    Ok(Done {
        reason: Some(("Registered", "Registered new host".into())),
        next: Next::After(NEXT_STEP),
    })
}

/// Boots the agent (its ISO by virtual media, or PXE) on the system.
async fn boot_agent(bmc: &Bmc, system: &Value, mode: &str) -> Result<(), ClientError> {
    if bmc.address.virtual_media {
        bmc.insert_cd(system, AGENT_ISO).await?;
        bmc.boot("Cd", false, mode).await?;
    } else {
        bmc.boot("Pxe", false, mode).await?;
    }
    let kind = if system["PowerState"] == "On" {
        "ForceRestart"
    } else {
        "On"
    };
    bmc.reset(system, kind).await
}

/// The agent is done: its media ejected.
async fn agent_done(bmc: &Bmc, system: &Value) -> Result<(), ClientError> {
    if bmc.address.virtual_media {
        bmc.eject_cd(system).await?;
    }
    Ok(())
}

/// Everything inspection reads of the system.
async fn read_inventory(bmc: &Bmc, system: Value) -> Result<hardware::Inventory, ClientError> {
    let processors = bmc.members_of(&system, "Processors").await?;
    let memory = bmc.members_of(&system, "Memory").await?;
    let nics = bmc.members_of(&system, "EthernetInterfaces").await?;
    let mut drives = Vec::new();
    for storage in bmc.members_of(&system, "Storage").await? {
        for d in storage["Drives"].as_array().into_iter().flatten() {
            if let Some(p) = d["@odata.id"].as_str() {
                drives.push(bmc.get(p).await?);
            }
        }
    }
    Ok(hardware::Inventory {
        system,
        processors,
        memory,
        drives,
        nics,
    })
}

async fn inspect(
    bmc: &Bmc,
    host: &BareMetalHost,
    status: &mut BareMetalHostStatus,
    now: &str,
) -> Result<Done, ClientError> {
    let system = bmc.system().await?;
    boot_agent(bmc, &system, boot_mode(host)).await?;
    let inventory = read_inventory(bmc, bmc.system().await?).await?;
    status.hardware = Some(hardware::details(
        &inventory,
        host.spec.boot_mac_address.as_deref(),
    ));
    bmc.reset(&system, "ForceOff").await?;
    agent_done(bmc, &system).await?;
    status.powered_on = Some(false);
    history(status).inspect = metric(now, now);
    set_state(status, host, "preparing");
    Ok(Done {
        reason: Some(("InspectionComplete", "Hardware inspection completed".into())),
        next: Next::After(NEXT_STEP),
    })
}

async fn provision(
    bmc: &Bmc,
    host: &BareMetalHost,
    status: &mut BareMetalHostStatus,
    now: &str,
) -> Result<Done, ClientError> {
    let Some(image) = host.spec.image.clone() else {
        return Err(ClientError::Answer(
            "the host has no image to provision".into(),
        ));
    };
    let mode = boot_mode(host);
    let system = bmc.system().await?;
    if states::state(host) != "provisioning" {
        set_state(status, host, "provisioning");
        history(status).provision = OperationMetric {
            start: Some(now.to_string()),
            end: None,
        };
        return Ok(Done {
            reason: Some((
                "ProvisioningStarted",
                format!("Image provisioning started for {}", image.url),
            )),
            next: Next::After(NEXT_STEP),
        });
    }
    boot_agent(bmc, &system, mode).await?;
    agent_done(bmc, &system).await?;
    if image.format.as_deref() == Some("live-iso") {
        bmc.insert_cd(&system, &image.url).await?;
        bmc.boot("Cd", true, mode).await?;
    } else {
        bmc.boot("Hdd", true, mode).await?;
    }
    let kind = if host.spec.online {
        "ForceRestart"
    } else {
        "ForceOff"
    };
    bmc.reset(&bmc.system().await?, kind).await?;
    status.powered_on = Some(host.spec.online);
    let p = status
        .provisioning
        .get_or_insert_with(Provisioning::default);
    p.image = Some(image.clone());
    p.root_device_hints = host.spec.root_device_hints.clone();
    p.boot_mode = Some(host.spec.boot_mode.clone().unwrap_or_else(|| "UEFI".into()));
    history(status).provision.end = Some(now.to_string());
    set_state(status, host, "provisioned");
    Ok(Done {
        reason: Some((
            "ProvisioningComplete",
            format!("Image provisioning completed for {}", image.url),
        )),
        next: Next::After(NEXT_STEP),
    })
}

async fn deprovision(
    bmc: &Bmc,
    host: &BareMetalHost,
    status: &mut BareMetalHostStatus,
    now: &str,
) -> Result<Done, ClientError> {
    if states::state(host) != "deprovisioning" {
        set_state(status, host, "deprovisioning");
        history(status).deprovision = OperationMetric {
            start: Some(now.to_string()),
            end: None,
        };
        return Ok(Done {
            reason: Some((
                "DeprovisioningStarted",
                "Image deprovisioning started".into(),
            )),
            next: Next::After(NEXT_STEP),
        });
    }
    let system = bmc.system().await?;
    // Automated cleaning: the agent boots and wipes the disks' metadata.
    boot_agent(bmc, &system, boot_mode(host)).await?;
    bmc.reset(&system, "ForceOff").await?;
    agent_done(bmc, &system).await?;
    status.powered_on = Some(false);
    if let Some(p) = status.provisioning.as_mut() {
        p.image = None;
    }
    history(status).deprovision.end = Some(now.to_string());
    set_state(status, host, "available");
    Ok(Done {
        reason: Some((
            "DeprovisioningComplete",
            "Image deprovisioning completed".into(),
        )),
        next: Next::After(NEXT_STEP),
    })
}

/// A stable host: its power as `spec.online` says.
async fn power(
    bmc: &Bmc,
    host: &BareMetalHost,
    status: &mut BareMetalHostStatus,
) -> Result<Done, ClientError> {
    let system = bmc.system().await?;
    let on = system["PowerState"] == "On";
    let mut reason = None;
    if on != host.spec.online {
        let kind = if host.spec.online { "On" } else { "ForceOff" };
        bmc.reset(&system, kind).await?;
        let what = if host.spec.online {
            "PowerOn"
        } else {
            "PowerOff"
        };
        reason = Some((
            what,
            format!(
                "Host {}",
                if host.spec.online {
                    "powered on"
                } else {
                    "powered off"
                }
            ),
        ));
    }
    status.powered_on = Some(host.spec.online);
    Ok(Done {
        reason,
        next: Next::After(POWER_CHECK),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_to_five_minutes() {
        assert_eq!(backoff(1), Duration::from_secs(10));
        assert_eq!(backoff(2), Duration::from_secs(20));
        assert_eq!(backoff(5), Duration::from_secs(160));
        assert_eq!(backoff(6), Duration::from_secs(300));
        assert_eq!(backoff(60), Duration::from_secs(300));
    }
}
