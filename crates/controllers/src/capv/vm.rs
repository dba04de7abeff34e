//! The VSphereVM reconciler: a VSphereVM becomes a VM in its vCenter as CAPV makes it. The
//! template is cloned under the VSphereVM's name, placed as the clone spec says (datacenter,
//! folder, resource pool, datastore, the first device's network), sized (`numCPUs`,
//! `memoryMiB`) and given its bootstrap data as `guestinfo.userdata` (base64); the VM's BIOS
//! UUID goes into `spec.biosUUID`; its cloud-init metadata (hostname, and the network
//! matched by MAC address) goes into `guestinfo.metadata`; it is powered on; and once the
//! guest reports an address, `status.addresses` and `status.ready` say so.
//!
//! Nothing here polls. Each step starts a task and records it as the vCenter session's
//! expectation ([`VCenter::start_pending`]); the session's watch of its VMs wakes the
//! VSphereVM when the VM appears, gets its metadata (the watched `config.extraConfig`),
//! powers on or gets an address, and a task whose effect the watch has not shown by a
//! deadline is read once then (it failed, or the watch lags). A task
//! that fails is reported in `VirtualMachineProvisioned` (`TaskFailed`) and retried with
//! backoff; a VM that disappears behind the stand-in's back is reported
//! (`NotFoundByBIOSUUID`) and not cloned again, as CAPV does. Deleting a VSphereVM powers
//! its VM off and destroys it.

use super::credentials;
use super::ip_claims::{self, DeviceAddresses};
use super::types::{owner_named, VSphereCluster, VSphereMachine, VSphereVM, GROUP};
use super::{Error, Reconciler};
use crate::capi::core::{Cluster, IPAddressClaim, Machine};
use base64::Engine;
use infrasim_controller_runtime::conditions::Condition;
use infrasim_controller_runtime::placement::{self, Placement};
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_controller_runtime::vcenters::{Goal, VCenter};
use infrasim_vim_client::{CloneSpec, Moref, ObjectContent, TaskState, Val};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// CAPV's finalizer on a VSphereVM.
pub const FINALIZER: &str = "vspherevm.infrastructure.cluster.x-k8s.io";

const MANAGER: &str = "infrasim-capv/vm";

/// How long a reconcile waits for the session's first listing of the VMs.
const SYNC_LIMIT: Duration = Duration::from_secs(30);

/// When a task's state is read if the watch has not shown its effect by then.
const TASK_CHECK: Duration = Duration::from_secs(2);

/// Where a task the stand-in started stands, after the watch's copy and (at its deadline)
/// the task itself were looked at.
enum Followed {
    /// No task in flight: the reconcile goes on.
    Idle,
    /// A task ended well (its effect is in the copy): the reconcile goes on.
    Done,
    /// Still running: look again then.
    Wait(Next),
}

/// The VSphereVM controller (the vCenter's VM changes are added by the caller): its
/// Cluster's gates (a pause) and its address claims' progress wake it.
pub(super) fn controller(
    informers: &infrasim_controller_runtime::informers::Informers,
) -> infrasim_controller_runtime::Controller<VSphereVM> {
    infrasim_controller_runtime::triggers::controller(&informers.of::<VSphereVM>(), None)
        .watches_shared_stream(
            infrasim_controller_runtime::triggers::filtered(
                &informers.of::<Cluster>(),
                crate::capi::triggers::cluster_gates,
            ),
            super::of_cluster(informers),
        )
        .owns_shared_stream(infrasim_controller_runtime::triggers::filtered(
            &informers.of::<IPAddressClaim>(),
            claim_progress,
        ))
}

/// What of an address claim its VSphereVM waits on: its address, and its `Ready` condition
/// where its IPAM provider sets one.
fn claim_progress(c: &IPAddressClaim) -> Option<u64> {
    let ready = c
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|cs| infrasim_controller_runtime::conditions::find(cs, "Ready"))
        .map(|r| (r.status.clone(), r.reason.clone(), r.message.clone()));
    infrasim_controller_runtime::triggers::hash((
        c.uid(),
        c.bound_address().map(str::to_string),
        ready,
        c.metadata.deletion_timestamp.is_some(),
    ))
}

impl Reconcile<VSphereVM> for Reconciler {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, vm: Arc<VSphereVM>) -> Result<Next, Error> {
        let cluster = match self.machine_of(&vm).await? {
            Some(m) => {
                let ns = vm.namespace().unwrap_or_default();
                self.informers
                    .get::<Cluster>(&ns, &m.spec.cluster_name)
                    .await?
            }
            None => None,
        };
        let before = vm.status.as_ref().map(|s| &s.rest);
        if super::paused(self, &*vm, before, MANAGER, cluster.as_deref()).await? {
            return Ok(Next::AwaitChange);
        }
        let devices = devices(&vm);
        if ip_claims::waiting_for_static_ip(&devices) {
            let waiting = Condition::new(
                "VirtualMachineProvisioned",
                false,
                "WaitingForStaticIPAllocation",
                "",
            );
            write_conditions(self, &vm, vec![waiting], json!({})).await?;
            return Ok(Next::AwaitChange);
        }
        let claimed = self.claim_addresses(&vm, &devices).await?;
        let vm = if has_condition(&vm, &claimed) {
            vm
        } else {
            write_conditions(self, &vm, vec![claimed.clone()], json!({})).await?;
            // The writes that follow start from this copy's conditions: without the one just
            // written, they would take it away again.
            Arc::new(with_condition(&vm, claimed, self.ctx.now()))
        };
        let vc = self.session(&vm).await?;
        if let Followed::Wait(next) = self.follow(&vc, &vm).await? {
            return Ok(next);
        }
        match find(&vc, &vm).await? {
            Some(copy) => self.bring_up(&vc, &vm, &copy).await,
            None if vm.spec.bios_uuid.is_some() => {
                let why = format!(
                    "no VM with BIOS UUID {} in the vCenter",
                    vm.spec.bios_uuid.as_deref().unwrap_or_default()
                );
                let gone = Condition::new(
                    "VirtualMachineProvisioned",
                    false,
                    "NotFoundByBIOSUUID",
                    why.clone(),
                );
                write_status(self, &vm, gone, json!({"ready": false})).await?;
                Err(Error::Reported(why))
            }
            None => {
                self.clone_vm(&vc, &vm).await?;
                Ok(Next::After(TASK_CHECK))
            }
        }
    }

    /// Powers the VM off, then destroys it; done once the vCenter has no such VM.
    async fn cleanup(&self, vm: Arc<VSphereVM>) -> Result<Cleanup, Error> {
        let vc = self.session(&vm).await?;
        if let Followed::Wait(next) = self.follow(&vc, &vm).await? {
            return Ok(Cleanup::Pending(next));
        }
        let Some(copy) = find(&vc, &vm).await? else {
            // The VM is gone: its address claims may go too.
            self.release_claims(&vm, &devices(&vm)).await?;
            return Ok(Cleanup::Done);
        };
        let (method, goal) = if copy.text("runtime.powerState") == "poweredOn" {
            let now = self.ctx.now();
            let (decided, report) =
                super::power_off::decide(&vc.client, &vm, &copy.obj, now).await?;
            if let Some(c) = report {
                write_conditions(self, &vm, vec![c], json!({})).await?;
            }
            if let super::power_off::PowerOff::Wait(next) = decided {
                return Ok(Cleanup::Pending(next));
            }
            ("PowerOffVM_Task", Goal::Off)
        } else {
            if let Some(c) = super::power_off::succeeded(&vm) {
                write_conditions(self, &vm, vec![c], json!({})).await?;
            }
            // Out of its cluster module first, as CAPV takes it out (a module already gone
            // is no error).
            if let Some(m) = vm
                .status
                .as_ref()
                .and_then(|s| s.rest.get("moduleUUID"))
                .and_then(Value::as_str)
            {
                match vc
                    .client
                    .change_cluster_module(m, "remove", &copy.obj)
                    .await
                {
                    Err(e) if e.fault_kind() != Some("not_found") => return Err(e.into()),
                    _ => {}
                }
            }
            ("Destroy_Task", Goal::Gone)
        };
        let task = vc.client.start(method, &copy.obj).await?;
        vc.start_pending(&vm.name_any(), task, goal);
        Ok(Cleanup::Pending(Next::After(TASK_CHECK)))
    }
}

impl Reconciler {
    /// The session to the VM's vCenter, with the credentials of its cluster's VSphereCluster
    /// (the manager's own when the VM belongs to none); reported when there is none.
    async fn session(&self, vm: &VSphereVM) -> Result<Arc<VCenter>, Error> {
        let server = vm.spec.server.clone().unwrap_or_default();
        let thumbprint = vm.spec.text("thumbprint").unwrap_or_default().to_string();
        let cluster = self.vsphere_cluster_of(vm).await?;
        let login = async {
            let c = credentials::for_cluster(
                &self.ctx.client,
                &self.defaults,
                cluster.as_deref(),
                &server,
                &thumbprint,
            )
            .await?;
            self.vcenters.get(c).await.map_err(|e| e.to_string())
        };
        match login.await {
            Ok(vc) => Ok(vc),
            Err(why) => {
                let down =
                    Condition::new("VCenterAvailable", false, "VCenterUnreachable", why.clone());
                write_conditions(self, vm, vec![down], json!({})).await?;
                Err(Error::Reported(why))
            }
        }
    }

    /// VSphereVM → VSphereMachine → Machine, if both exist.
    async fn machine_of(&self, vm: &VSphereVM) -> Result<Option<Arc<Machine>>, Error> {
        let ns = vm.namespace().unwrap_or_default();
        let Some(owner) = owner_named(vm.owner_references(), "VSphereMachine", GROUP) else {
            return Ok(None);
        };
        let Some(owner) = self.informers.get::<VSphereMachine>(&ns, &owner).await? else {
            return Ok(None);
        };
        let Some(machine) = owner_named(owner.owner_references(), "Machine", "cluster.x-k8s.io")
        else {
            return Ok(None);
        };
        Ok(self.informers.get::<Machine>(&ns, &machine).await?)
    }

    /// When the VM's failure domain places it by host group and the VM is not yet in the
    /// domain's VM group: the reconfiguration of the compute cluster that adds it, started
    /// (CAPV's `reconcileVMGroupInfo`).
    async fn join_vm_group(
        &self,
        vc: &VCenter,
        vm: &VSphereVM,
        copy: &ObjectContent,
    ) -> Result<Option<Moref>, Error> {
        let Some(machine) = self.machine_of(vm).await? else {
            return Ok(None);
        };
        let Some(fd) = super::zones::failure_domain_of(&self.informers, &machine).await else {
            return Ok(None);
        };
        let topology = &fd.spec.topology;
        let Some((vm_group, _)) = super::zones::host_placement(topology) else {
            return Ok(None);
        };
        let dc = topology.datacenter.trim_start_matches('/');
        let path = placement::path_in(dc, "host", &topology.compute_cluster);
        let missing = || Error::Reported(format!("unable to find VM Group {vm_group}"));
        let cluster = vc
            .client
            .find_by_inventory_path(&path)
            .await?
            .ok_or_else(missing)?;
        let drs = vc.client.drs_configuration(&cluster).await?;
        let group = drs.group(vm_group, false).ok_or_else(missing)?;
        if group.members.contains(&copy.obj) {
            return Ok(None);
        }
        Ok(Some(
            vc.client
                .add_to_vm_group(&cluster, group, &copy.obj)
                .await?,
        ))
    }

    /// The cluster module the VM belongs in, where its cluster keeps modules.
    async fn module_of(&self, vm: &VSphereVM) -> Result<Option<String>, Error> {
        let Some(cluster) = self.vsphere_cluster_of(vm).await? else {
            return Ok(None);
        };
        if !super::modules::wanted(self, &cluster) {
            return Ok(None);
        }
        let machine = self.machine_of(vm).await?;
        Ok(machine.and_then(|m| super::modules::of_machine(&cluster, &m)))
    }

    /// VSphereVM → VSphereMachine → Machine → Cluster → its VSphereCluster, if all exist.
    async fn vsphere_cluster_of(
        &self,
        vm: &VSphereVM,
    ) -> Result<Option<Arc<VSphereCluster>>, Error> {
        let ns = vm.namespace().unwrap_or_default();
        let Some(machine) = self.machine_of(vm).await? else {
            return Ok(None);
        };
        let Some(cluster) = self
            .informers
            .get::<Cluster>(&ns, &machine.spec.cluster_name)
            .await?
        else {
            return Ok(None);
        };
        match cluster
            .spec
            .infrastructure_ref
            .as_ref()
            .filter(|r| r.kind == "VSphereCluster")
        {
            Some(infra) => Ok(self
                .informers
                .get::<VSphereCluster>(&ns, &infra.name)
                .await?),
            None => Ok(None),
        }
    }

    /// Follows the task in flight on the VM, if any (see [`Followed`]).
    async fn follow(&self, vc: &VCenter, vm: &VSphereVM) -> Result<Followed, Error> {
        let name = vm.name_any();
        let Some(pending) = vc.pending(&name) else {
            return Ok(Followed::Idle);
        };
        let copy = find(vc, vm).await?;
        let shown = match pending.goal {
            Goal::Made => copy.is_some(),
            Goal::Gone => copy.is_none(),
            // Shown in the cluster's configuration: the task says when.
            Goal::Grouped => false,
            Goal::On => copy
                .as_ref()
                .is_some_and(|c| c.text("runtime.powerState") == "poweredOn"),
            Goal::Off => copy
                .as_ref()
                .is_some_and(|c| c.text("runtime.powerState") == "poweredOff"),
            // The metadata's reconfiguration shows in the watched extraConfig.
            Goal::Shaped => copy
                .as_ref()
                .is_some_and(|c| extra_config(c, "guestinfo.metadata").is_some()),
        };
        if shown {
            vc.settle(&name);
            return Ok(Followed::Done);
        }
        let age = vc.age(&pending);
        if age < TASK_CHECK {
            return Ok(Followed::Wait(Next::After(TASK_CHECK - age)));
        }
        match vc.client.task_state(&pending.task).await? {
            TaskState::Queued | TaskState::Running => {
                vc.checked(&name);
                Ok(Followed::Wait(Next::After(TASK_CHECK)))
            }
            TaskState::Success(made) => {
                vc.settle(&name);
                // The watch has yet to report it: read it into the copy now, so the
                // reconcile that goes on sees what the task did.
                match (pending.goal, made) {
                    (Goal::Made, Some(made)) => vc.refresh(&made).await?,
                    (Goal::Gone, _) => {
                        if let Some(c) = copy {
                            vc.forget(&c.obj);
                        }
                    }
                    (_, _) => {
                        if let Some(c) = copy {
                            vc.refresh(&c.obj).await?;
                        }
                    }
                }
                Ok(Followed::Done)
            }
            TaskState::Error { kind, message } => {
                vc.settle(&name);
                let why = format!("{}: {kind}: {message}", doing(pending.goal));
                let failed = Condition::new(
                    "VirtualMachineProvisioned",
                    false,
                    "TaskFailed",
                    why.clone(),
                );
                write_status(self, vm, failed, json!({})).await?;
                Err(Error::Reported(why))
            }
        }
    }

    /// Starts the clone (see the module's doc).
    async fn clone_vm(&self, vc: &VCenter, vm: &VSphereVM) -> Result<(), Error> {
        let name = vm.name_any();
        let planned = async {
            let userdata = self.bootstrap_data(vm).await?;
            let template = template(vc, vm).await?;
            let place = placement::resolve(&vc.client, Some(&placement_of(vm)), &template).await?;
            let by_policy = super::storage_policy::datastore(&vc.client, vm, &place).await?;
            let spec = CloneSpec {
                name: name.clone(),
                folder: place.folder,
                pool: place.pool,
                datastore: by_policy.or(place.datastore),
                // CAPV gives a VM two CPUs at least, and 2 GiB unless told.
                cpus: Some(vm.spec.number("numCPUs").unwrap_or(2).max(2)),
                memory_mb: Some(vm.spec.number("memoryMiB").unwrap_or(2048)),
                power_on: false,
                device_change: place.device_change,
                extra_config: vec![
                    ("guestinfo.userdata".into(), base64(&userdata)),
                    ("guestinfo.userdata.encoding".into(), "base64".into()),
                ],
            };
            Ok::<_, String>((template, spec))
        };
        let (template, spec) = match planned.await {
            Ok(planned) => planned,
            Err(why) => {
                let failed = Condition::new(
                    "VirtualMachineProvisioned",
                    false,
                    "NotProvisioned",
                    why.clone(),
                );
                write_status(self, vm, failed, json!({})).await?;
                return Err(Error::Reported(why));
            }
        };
        let task = vc.client.clone_vm(&template.obj, &spec).await?;
        vc.start_pending(&name, task.clone(), Goal::Made);
        let cloning = Condition::new("VirtualMachineProvisioned", false, "WaitingForClone", "");
        let extra = json!({"taskRef": task.value, "cloneMode": "fullClone"});
        write_status(self, vm, cloning, extra).await
    }

    /// The bootstrap data (the Secret `bootstrapRef` names, key `value`).
    async fn bootstrap_data(&self, vm: &VSphereVM) -> Result<Vec<u8>, String> {
        let ns = vm.namespace().unwrap_or_default();
        let name = vm
            .spec
            .bootstrap_secret()
            .ok_or("spec.bootstrapRef names no Secret")?;
        let secret = Api::<Secret>::namespaced(self.ctx.client.clone(), &ns)
            .get_opt(name)
            .await
            .map_err(|e| format!("reading the bootstrap data Secret {ns}/{name}: {e}"))?
            .ok_or_else(|| format!("the bootstrap data Secret {ns}/{name} does not exist"))?;
        secret
            .data
            .and_then(|mut d| d.remove("value"))
            .map(|v| v.0)
            .ok_or_else(|| format!("the bootstrap data Secret {ns}/{name} has no value"))
    }

    /// From a VM that exists: its BIOS UUID recorded, its metadata set, powered on, and
    /// ready once its guest has an address.
    async fn bring_up(
        &self,
        vc: &VCenter,
        vm: &VSphereVM,
        copy: &ObjectContent,
    ) -> Result<Next, Error> {
        let module = self.join_module(vc, vm, copy).await?;
        let with_module = |extra: Value| with_module_uuid(module.as_deref(), extra);
        self.record_bios_uuid(vm, copy).await?;
        if copy.text("runtime.powerState") != "poweredOn" {
            return self.power_on(vc, vm, copy, &with_module).await;
        }
        self.attach_tags(vc, vm, copy, &with_module).await?;
        let addresses = addresses(copy);
        if addresses.is_empty() {
            let waiting = Condition::new(
                "VirtualMachineProvisioned",
                false,
                "WaitingForIPAllocation",
                "Waiting for the guest to report an address",
            );
            write_status(
                self,
                vm,
                waiting,
                with_module(json!({"vmRef": copy.obj.value})),
            )
            .await?;
            return Ok(Next::AwaitChange);
        }
        let provisioned = Condition::new("VirtualMachineProvisioned", true, "Provisioned", "");
        let extra = with_module(json!({
            "ready": true, "addresses": addresses, "network": network_status(copy),
            "vmRef": copy.obj.value,
        }));
        write_status(self, vm, provisioned, extra).await?;
        Ok(Next::AwaitChange)
    }

    /// Puts the VM in its owner's cluster module before it runs, as CAPV puts it there, and
    /// returns that module, if any.
    async fn join_module(
        &self,
        vc: &VCenter,
        vm: &VSphereVM,
        copy: &ObjectContent,
    ) -> Result<Option<String>, Error> {
        let module = self.module_of(vm).await?;
        let joined = vm.status.as_ref().and_then(|s| s.rest.get("moduleUUID"));
        if let Some(m) = module.as_ref().filter(|m| joined != Some(&json!(m))) {
            vc.client.change_cluster_module(m, "add", &copy.obj).await?;
        }
        Ok(module)
    }

    /// Records the clone's BIOS UUID in the VSphereVM's spec, once, when it has none.
    async fn record_bios_uuid(&self, vm: &VSphereVM, copy: &ObjectContent) -> Result<(), Error> {
        let uuid = copy.text("config.uuid");
        if vm.spec.bios_uuid.is_some() || uuid.is_empty() {
            return Ok(());
        }
        let name = vm.name_any();
        let api: Api<VSphereVM> =
            Api::namespaced(self.ctx.client.clone(), &vm.namespace().unwrap_or_default());
        let body = json!({
            "apiVersion": VSphereVM::api_version(&()),
            "kind": "VSphereVM",
            "metadata": {"name": name},
            "spec": {"biosUUID": uuid},
        });
        infrasim_controller_runtime::writes::apply(&api, &name, MANAGER, &body).await?;
        Ok(())
    }

    /// The next step for a VM that is not powered on: its metadata set, its VM group joined,
    /// or power-on started, one task at a time.
    async fn power_on(
        &self,
        vc: &VCenter,
        vm: &VSphereVM,
        copy: &ObjectContent,
        with_module: &impl Fn(Value) -> Value,
    ) -> Result<Next, Error> {
        // The metadata first (it names the NICs by their MAC addresses, which exist only
        // once the clone does), then power.
        // As CAPV compares it with what the VM has: set only when it differs (a VM
        // powered off behind the stand-in's back keeps its metadata and is powered on).
        let from_pools = match self.pool_addresses(vm, &devices(vm)).await? {
            Ok(addresses) => addresses,
            Err(why) => {
                let waiting = Condition::new(
                    "VirtualMachineProvisioned",
                    false,
                    "WaitingForIPAddress",
                    why,
                );
                let extra = with_module(json!({"vmRef": copy.obj.value}));
                write_status(self, vm, waiting, extra).await?;
                return Ok(Next::AwaitChange);
            }
        };
        let text = metadata(vc, vm, copy, &from_pools).await?;
        let wanted = base64(text.as_bytes());
        let (task, goal, reason) = if extra_config(copy, "guestinfo.metadata") == Some(&wanted) {
            // In its failure domain's VM group before it runs, as CAPV adds it.
            match self.join_vm_group(vc, vm, copy).await? {
                Some(task) => (task, Goal::Grouped, "WaitingForClone"),
                None => (
                    vc.client.start("PowerOnVM_Task", &copy.obj).await?,
                    Goal::On,
                    "PoweringOn",
                ),
            }
        } else {
            let pairs = [
                ("guestinfo.metadata".to_string(), wanted),
                (
                    "guestinfo.metadata.encoding".to_string(),
                    "base64".to_string(),
                ),
            ];
            let task = vc
                .client
                .reconfigure_extra_config(&copy.obj, &pairs)
                .await?;
            (task, Goal::Shaped, "WaitingForClone")
        };
        vc.start_pending(&vm.name_any(), task.clone(), goal);
        let step = Condition::new("VirtualMachineProvisioned", false, reason, "");
        write_status(
            self,
            vm,
            step,
            with_module(json!({"taskRef": task.value, "vmRef": copy.obj.value})),
        )
        .await?;
        Ok(Next::After(TASK_CHECK))
    }

    /// Attaches the tags the VM's spec names, once it runs (attaching again is no change), as
    /// CAPV attaches them on each reconcile until the VM is ready; a failure is reported in
    /// the VM's status and returned.
    async fn attach_tags(
        &self,
        vc: &VCenter,
        vm: &VSphereVM,
        copy: &ObjectContent,
        with_module: &impl Fn(Value) -> Value,
    ) -> Result<(), Error> {
        let tags = vm
            .spec
            .rest
            .get("tagIDs")
            .and_then(Value::as_array)
            .map(|t| {
                t.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect::<Vec<_>>()
            });
        let ready = vm.status.as_ref().and_then(|s| s.ready) == Some(true);
        let Some(tags) = tags.filter(|t| !t.is_empty() && !ready) else {
            return Ok(());
        };
        if let Err(e) = vc.client.attach_tags(&tags, &copy.obj).await {
            let name = vm.name_any();
            let why = format!("failed to attach tags {tags:?} to VM {name}: {e}");
            let failed = Condition::new(
                "VirtualMachineProvisioned",
                false,
                "TaggingFailed",
                why.clone(),
            );
            write_status(
                self,
                vm,
                failed,
                with_module(json!({"vmRef": copy.obj.value})),
            )
            .await?;
            return Err(Error::Reported(why));
        }
        Ok(())
    }
}

/// `extra` status fields with the VM's cluster module, when it has one.
fn with_module_uuid(module: Option<&str>, mut extra: Value) -> Value {
    if let (Some(m), Some(o)) = (module, extra.as_object_mut()) {
        o.insert("moduleUUID".into(), json!(m));
    }
    extra
}

/// The value of `key` in a VM's watched `config.extraConfig`.
fn extra_config<'a>(copy: &'a ObjectContent, key: &str) -> Option<&'a str> {
    copy.prop("config.extraConfig")?
        .items()
        .into_iter()
        .find(|o| o.field("key").and_then(Val::text) == Some(key))
        .and_then(|o| o.field("value"))
        .and_then(Val::text)
}

/// What a task's goal is, for a failure's message.
fn doing(goal: Goal) -> &'static str {
    match goal {
        Goal::Made => "cloning",
        Goal::Shaped => "setting the metadata",
        Goal::On => "powering on",
        Goal::Off => "powering off",
        Goal::Gone => "destroying",
        Goal::Grouped => "adding the VM to its VM group",
    }
}

/// The VM of `vm` in the session's copy: by BIOS UUID once it is known, else by name.
async fn find(vc: &VCenter, vm: &VSphereVM) -> Result<Option<ObjectContent>, Error> {
    let name = vm.name_any();
    let uuid = vm.spec.bios_uuid.clone().unwrap_or_default();
    let found = vc
        .select(SYNC_LIMIT, |c| {
            if uuid.is_empty() {
                c.text("name") == name
            } else {
                c.text("config.uuid").eq_ignore_ascii_case(&uuid)
            }
        })
        .await
        .map_err(Error::Reported)?;
    Ok(found.into_iter().next())
}

/// The template `spec.template` names: an inventory path, or a name in the datacenter's
/// VM folder, else anywhere in the vCenter.
async fn template(vc: &VCenter, vm: &VSphereVM) -> Result<ObjectContent, String> {
    let wanted = vm.spec.text("template").ok_or("spec.template is empty")?;
    let path = match (wanted.contains('/'), vm.spec.text("datacenter")) {
        (true, _) => Some(wanted.trim_start_matches('/').to_string()),
        (false, Some(dc)) => Some(format!("{dc}/vm/{wanted}")),
        (false, None) => None,
    };
    if let Some(path) = path {
        let found = vc
            .client
            .find_by_inventory_path(&path)
            .await
            .map_err(|e| e.to_string())?;
        if let Some(found) = found {
            return vc
                .client
                .properties(&found, &["name"])
                .await
                .map_err(|e| e.to_string());
        }
    }
    let leaf = wanted.rsplit('/').next().unwrap_or(wanted);
    let named = vc.select(SYNC_LIMIT, |c| c.text("name") == leaf).await?;
    named
        .into_iter()
        .next()
        .ok_or_else(|| format!("no template {wanted:?} in the vCenter"))
}

/// The clone spec's placement, in the shape the runtime resolves.
fn placement_of(vm: &VSphereVM) -> Placement {
    let text = |f: &str| vm.spec.text(f).map(str::to_string);
    Placement {
        datacenter: text("datacenter").map(|d| d.trim_start_matches('/').to_string()),
        cluster: None,
        resource_pool: text("resourcePool"),
        folder: text("folder"),
        datastore: text("datastore"),
        network: devices(vm)
            .first()
            .and_then(|d| d.get("networkName"))
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

/// `spec.network.devices`.
fn devices(vm: &VSphereVM) -> Vec<Value> {
    vm.spec
        .rest
        .get("network")
        .and_then(|n| n.get("devices"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The cloud-init metadata CAPV writes: the hostname, and a network (version 2) whose
/// ethernets match the VM's NICs by MAC address, with each device's DHCP or static addresses.
async fn metadata(
    vc: &VCenter,
    vm: &VSphereVM,
    copy: &ObjectContent,
    from_pools: &[DeviceAddresses],
) -> Result<String, Error> {
    let read = vc
        .client
        .properties(&copy.obj, &["config.hardware.device"])
        .await?;
    let macs: Vec<String> = read
        .prop("config.hardware.device")
        .map(Val::items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|d| {
            d.field("macAddress")
                .and_then(Val::text)
                .map(str::to_string)
        })
        .collect();
    let routes = vm
        .spec
        .rest
        .get("network")
        .and_then(|n| n.get("routes"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let devices = with_pool_addresses(&devices(vm), from_pools, &routes);
    Ok(render_metadata(&vm.name_any(), &devices, &macs))
}

/// The devices as CAPV renders them: each with its pool addresses after its own, the pools'
/// gateways in place of its own (where it got addresses from a pool), and the VM's routes.
fn with_pool_addresses(
    devices: &[Value],
    from_pools: &[DeviceAddresses],
    routes: &[Value],
) -> Vec<Value> {
    let mut out = devices.to_vec();
    for (i, d) in out.iter_mut().enumerate() {
        let Some(o) = d.as_object_mut() else {
            continue;
        };
        if !routes.is_empty() {
            let mut all = o
                .get("routes")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            all.extend(routes.iter().cloned());
            o.insert("routes".into(), Value::Array(all));
        }
        let Some(pool) = from_pools.get(i).filter(|p| !p.ip_addrs.is_empty()) else {
            continue;
        };
        let mut addrs = o
            .get("ipAddrs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        addrs.extend(pool.ip_addrs.iter().map(|a| json!(a)));
        o.insert("ipAddrs".into(), Value::Array(addrs));
        for (field, gateway) in [("gateway4", &pool.gateway4), ("gateway6", &pool.gateway6)] {
            match gateway {
                Some(g) => o.insert(field.into(), json!(g)),
                None => o.remove(field),
            };
        }
    }
    out
}

/// `vm` with `c` among its status's conditions.
fn with_condition(vm: &VSphereVM, c: Condition, now: chrono::DateTime<chrono::Utc>) -> VSphereVM {
    let mut vm = vm.clone();
    let status = vm.status.get_or_insert_with(Default::default);
    let mut conds: Vec<Condition> = status
        .rest
        .get("conditions")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    infrasim_controller_runtime::conditions::set(&mut conds, c, now);
    status.rest.insert("conditions".into(), json!(conds));
    vm
}

/// Whether the VSphereVM's status has `c` already (type, status, reason and message).
fn has_condition(vm: &VSphereVM, c: &Condition) -> bool {
    let had: Vec<Condition> = vm
        .status
        .as_ref()
        .and_then(|s| s.rest.get("conditions"))
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    infrasim_controller_runtime::conditions::find(&had, &c.type_)
        .is_some_and(|h| h.status == c.status && h.reason == c.reason && h.message == c.message)
}

/// [`metadata`]'s text, from the devices of the clone spec and the NICs' MAC addresses, as
/// CAPV's metadata template writes it.
fn render_metadata(name: &str, devices: &[Value], macs: &[String]) -> String {
    let flag = |d: &Value, f: &str| d.get(f).and_then(Value::as_bool).unwrap_or(false);
    // As CAPV decides it: DHCP, or a static address written without a prefix (CAPV parses
    // each entry as a bare address, so `10.0.0.5/24` does not count).
    let bare = |d: &Value, v6: bool| {
        strings(d, "ipAddrs")
            .iter()
            .filter_map(|a| a.parse::<std::net::IpAddr>().ok())
            .any(|a| a.is_ipv6() == v6)
    };
    let ipv4 = devices.iter().any(|d| flag(d, "dhcp4") || bare(d, false));
    let ipv6 = devices.iter().any(|d| flag(d, "dhcp6") || bare(d, true));
    let mut out = format!(
        "instance-id: \"{name}\"\nlocal-hostname: \"{name}\"\nwait-on-network:\n  ipv4: {ipv4}\n  ipv6: {ipv6}\nnetwork:\n  version: 2\n  ethernets:\n"
    );
    for (i, d) in devices.iter().enumerate() {
        let mac = macs.get(i).map(String::as_str).unwrap_or_default();
        let set_name = d
            .get("deviceName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .unwrap_or(format!("eth{i}"));
        out.push_str(&format!(
            "    id{i}:\n      match:\n        macaddress: \"{mac}\"\n      set-name: \"{set_name}\"\n      wakeonlan: true\n      dhcp4: {}\n      dhcp6: {}\n      accept-ra: {}\n",
            flag(d, "dhcp4"),
            flag(d, "dhcp6"),
            flag(d, "dhcp6")
        ));
        for (field, key) in [
            ("dhcp4Overrides", "dhcp4-overrides"),
            ("dhcp6Overrides", "dhcp6-overrides"),
        ] {
            if let Some(o) = d.get(field).filter(|o| o.is_object()) {
                out.push_str(&format!("      {key}:\n"));
                out.push_str(&dhcp_overrides(o));
            }
        }
        push_list(
            &mut out,
            "      addresses:\n",
            "      - ",
            &strings(d, "ipAddrs"),
        );
        for gw in ["gateway4", "gateway6"] {
            if let Some(g) = d.get(gw).and_then(Value::as_str).filter(|g| !g.is_empty()) {
                out.push_str(&format!("      {gw}: \"{g}\"\n"));
            }
        }
        if let Some(mtu) = d.get("mtu").filter(|m| !m.is_null()) {
            out.push_str(&format!("      mtu: {mtu}\n"));
        }
        let routes = d
            .get("routes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !routes.is_empty() {
            out.push_str("      routes:\n");
            for r in routes {
                let text = |f: &str| {
                    r.get(f)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                // A route without a metric prints as Go's template prints a nil pointer.
                let metric = r
                    .get("metric")
                    .filter(|m| !m.is_null())
                    .map(Value::to_string);
                out.push_str(&format!(
                    "      - to: \"{}\"\n        via: \"{}\"\n        metric: {}\n",
                    text("to"),
                    text("via"),
                    metric.unwrap_or("<nil>".into())
                ));
            }
        }
        let (servers, search) = (strings(d, "nameservers"), strings(d, "searchDomains"));
        if !servers.is_empty() || !search.is_empty() {
            out.push_str("      nameservers:\n");
            push_list(&mut out, "        addresses:\n", "        - ", &servers);
            push_list(&mut out, "        search:\n", "        - ", &search);
        }
    }
    out
}

/// A device's string list (`ipAddrs`, `nameservers`, ...).
fn strings(d: &Value, field: &str) -> Vec<String> {
    d.get(field)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `heading` and each of `items` quoted after `dash`, when there are any.
fn push_list(out: &mut String, heading: &str, dash: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    out.push_str(heading);
    for item in items {
        out.push_str(&format!("{dash}\"{item}\"\n"));
    }
}

/// A device's DHCP overrides, in CAPV's order and quoting.
fn dhcp_overrides(o: &Value) -> String {
    let mut out = String::new();
    for (field, key, quoted) in [
        ("hostname", "hostname", true),
        ("routeMetric", "route-metric", false),
        ("sendHostname", "send-hostname", false),
        ("useDNS", "use-dns", false),
        ("useDomains", "use-domains", false),
        ("useHostname", "use-hostname", false),
        ("useMTU", "use-mtu", false),
        ("useNTP", "use-ntp", false),
        ("useRoutes", "use-routes", true),
    ] {
        let Some(v) = o.get(field).filter(|v| !v.is_null()) else {
            continue;
        };
        let shown = v
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string());
        match quoted {
            true => out.push_str(&format!("        {key}: \"{shown}\"\n")),
            false => out.push_str(&format!("        {key}: {shown}\n")),
        }
    }
    out
}

/// The guest's addresses, as CAPV lists them: every NIC's, without loopback, link-local or
/// unspecified ones (the guest's primary address when it reports no NICs).
fn addresses(copy: &ObjectContent) -> Vec<String> {
    let mut all: Vec<String> = copy
        .prop("guest.net")
        .map(Val::items)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|nic| nic.field("ipAddress").map(Val::items).unwrap_or_default())
        .filter_map(|a| a.text().map(str::to_string))
        .collect();
    if all.is_empty() {
        let primary = copy.text("guest.ipAddress");
        if !primary.is_empty() {
            all.push(primary.to_string());
        }
    }
    all.retain(|a| match a.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(v4)) => {
            !(v4.is_loopback() || v4.is_link_local() || v4.is_unspecified())
        }
        Ok(std::net::IpAddr::V6(v6)) => {
            !(v6.is_loopback() || v6.is_unspecified() || (v6.segments()[0] & 0xffc0) == 0xfe80)
        }
        Err(_) => false,
    });
    all
}

/// CAPV's `status.network`: per NIC the guest reports, its MAC address, addresses (as the
/// guest lists them), network and whether it is connected.
fn network_status(copy: &ObjectContent) -> Vec<Value> {
    copy.prop("guest.net")
        .map(Val::items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|nic| {
            let mac = nic.field("macAddress").and_then(Val::text)?;
            let addrs: Vec<&str> = nic
                .field("ipAddress")
                .map(Val::items)
                .unwrap_or_default()
                .into_iter()
                .filter_map(Val::text)
                .collect();
            let mut status = json!({"macAddr": mac, "ipAddrs": addrs});
            if let Some(n) = nic.field("network").and_then(Val::text) {
                status["networkName"] = json!(n);
            }
            if let Some(c) = nic.field("connected").and_then(Val::text) {
                status["connected"] = json!(c == "true");
            }
            Some(status)
        })
        .collect()
}

fn base64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// Writes `provisioned`, with `VCenterAvailable` True (the VM was reached) and `extra`.
async fn write_status(
    r: &Reconciler,
    vm: &VSphereVM,
    provisioned: Condition,
    extra: Value,
) -> Result<(), Error> {
    let available = Condition::new("VCenterAvailable", true, "Available", "");
    write_conditions(r, vm, vec![available, provisioned], extra).await
}

/// Sets `set` in the VSphereVM's conditions, `Ready` as their summary, and `extra` fields.
async fn write_conditions(
    r: &Reconciler,
    vm: &VSphereVM,
    set: Vec<Condition>,
    extra: Value,
) -> Result<(), Error> {
    // What was written before and is not written now stays: an apply that left them out
    // would drop them.
    let mut fields = serde_json::Map::new();
    if let Some(before) = vm.status.as_ref() {
        if let Some(v) = &before.vm_ref {
            fields.insert("vmRef".into(), json!(v));
        }
        if let Some(a) = &before.addresses {
            fields.insert("addresses".into(), json!(a));
        }
        for k in ["taskRef", "cloneMode", "moduleUUID", "network"] {
            if let Some(v) = before.rest.get(k) {
                fields.insert(k.into(), v.clone());
            }
        }
    }
    if let Value::Object(extra) = extra {
        fields.extend(extra);
    }
    let before = vm.status.as_ref().map(|s| &s.rest);
    super::write_status(r, vm, before, MANAGER, set, Value::Object(fields)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_names_the_host_and_matches_each_nic_by_its_mac() {
        let devices = [json!({"networkName": "VM Network", "dhcp4": true})];
        let text = render_metadata("wl1-md-0-abc", &devices, &["00:50:56:aa:bb:cc".into()]);
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("YAML");
        assert_eq!(doc["local-hostname"], "wl1-md-0-abc");
        assert_eq!(doc["instance-id"], "wl1-md-0-abc");
        assert_eq!(doc["wait-on-network"]["ipv4"], true);
        let eth = &doc["network"]["ethernets"]["id0"];
        assert_eq!(eth["match"]["macaddress"], "00:50:56:aa:bb:cc");
        assert_eq!(eth["set-name"], "eth0");
        assert_eq!(eth["dhcp4"], true);
    }

    #[test]
    fn static_addresses_and_gateways_are_written() {
        let devices = [json!({"ipAddrs": ["10.0.0.5/24"], "gateway4": "10.0.0.1"})];
        let text = render_metadata("n", &devices, &[]);
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("YAML");
        let eth = &doc["network"]["ethernets"]["id0"];
        assert_eq!(eth["addresses"][0], "10.0.0.5/24");
        assert_eq!(eth["gateway4"], "10.0.0.1");
        assert_eq!(eth["dhcp4"], false);
    }

    #[test]
    fn pool_addresses_join_the_devices_static_ones_with_their_gateway() {
        let devices = [
            json!({"ipAddrs": ["10.0.0.5/24"], "gateway4": "10.0.0.254",
                   "nameservers": ["10.0.0.2"], "searchDomains": ["example.org"], "mtu": 1360}),
            json!({"dhcp4": true}),
        ];
        let pools = [
            DeviceAddresses {
                ip_addrs: vec!["10.0.0.9/24".into()],
                gateway4: Some("10.0.0.1".into()),
                gateway6: None,
            },
            DeviceAddresses::default(),
        ];
        let route = [json!({"to": "192.168.0.0/16", "via": "10.0.0.1", "metric": 10})];
        let merged = with_pool_addresses(&devices, &pools, &route);
        let text = render_metadata("n", &merged, &["m0".into(), "m1".into()]);
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("YAML");
        let eth = &doc["network"]["ethernets"]["id0"];
        assert_eq!(eth["addresses"][0], "10.0.0.5/24");
        assert_eq!(eth["addresses"][1], "10.0.0.9/24");
        // The pool's gateway replaces the device's, as CAPV's does.
        assert_eq!(eth["gateway4"], "10.0.0.1");
        assert_eq!(eth["nameservers"]["addresses"][0], "10.0.0.2");
        assert_eq!(eth["nameservers"]["search"][0], "example.org");
        assert_eq!(eth["mtu"], 1360);
        assert_eq!(eth["routes"][0]["via"], "10.0.0.1");
        // The VM's routes go to every device; the DHCP one keeps DHCP.
        let eth1 = &doc["network"]["ethernets"]["id1"];
        assert_eq!(eth1["dhcp4"], true);
        assert_eq!(eth1["routes"][0]["metric"], 10);
        // Addresses with a prefix do not make cloud-init wait, as CAPV decides it.
        assert_eq!(doc["wait-on-network"]["ipv4"], true);
        let statics_only = render_metadata("n", &merged[..1], &[]);
        assert!(statics_only.contains("ipv4: false"), "{statics_only}");
    }

    #[test]
    fn dhcp_overrides_are_written_as_capv_writes_them() {
        let devices = [
            json!({"dhcp4": true, "dhcp4Overrides": {"hostname": "h", "useDNS": false, "routeMetric": 200}}),
        ];
        let text = render_metadata("n", &devices, &[]);
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("YAML");
        let o = &doc["network"]["ethernets"]["id0"]["dhcp4-overrides"];
        assert_eq!(o["hostname"], "h");
        assert_eq!(o["use-dns"], false);
        assert_eq!(o["route-metric"], 200);
    }

    #[test]
    fn loopback_and_link_local_addresses_are_left_out() {
        let nic = |ips: &[&str]| {
            Val::Object(vec![(
                "ipAddress".into(),
                Val::List(ips.iter().map(|i| Val::Text(i.to_string())).collect()),
            )])
        };
        let copy = ObjectContent {
            obj: infrasim_vim_client::Moref::new("VirtualMachine", "vm-1"),
            props: vec![(
                "guest.net".into(),
                Val::List(vec![nic(&["127.0.0.1", "10.0.0.7", "fe80::1", "fd00::7"])]),
            )],
        };
        assert_eq!(addresses(&copy), vec!["10.0.0.7", "fd00::7"]);
    }
}
