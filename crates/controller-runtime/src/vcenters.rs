//! The vCenters a family's objects name: one session each, shared by every object that names
//! the same server with the same credentials (a thousand groups or machines cost one login,
//! not a thousand), and beside it a copy of every VM's watched properties, kept current by a
//! PropertyCollector filter and WaitForUpdatesEx. Reconciles read the copy instead of
//! listing, and each change wakes the objects it concerns (see [`Change`]) instead of a poll.
//! VmGroup and the CAPV stand-in each keep their own (their VMs' properties differ).
//! A session the vCenter forgets is replaced inside the client; its filter went with it, so
//! the watch starts again from everything.

use chrono::{DateTime, Utc};
use infrasim_clock::SharedClock;
use infrasim_vim_client::{Client, Credentials, Moref, ObjectContent, ObjectUpdate, Trust, Val};
use k8s_openapi::api::core::v1::Secret;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::{mpsc, watch, OnceCell};

/// What a family watches of its vCenters' VMs.
#[derive(Debug, Clone, Copy)]
pub struct Watching {
    /// The VM properties its reconciles read (`name` among them).
    pub paths: &'static [&'static str],
    /// The custom field that marks a VM with its owner (`namespace/name`), defined on each
    /// vCenter at login; `None` for a family that finds its VMs by name.
    pub owner_field: Option<&'static str>,
}

/// A VM changed: its owner mark (`namespace/name`) and its name, for the controller to
/// wake the group that owns it or that waits for it as a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub owner: Option<String>,
    pub name: String,
}

/// Sessions (with their watched VMs) by the credentials that opened them.
pub struct VCenters {
    /// A cell per credentials, filled by the first login: a slow or unreachable vCenter
    /// holds up only the groups that name it, and two groups naming a new one open one
    /// session.
    sessions: std::sync::Mutex<HashMap<Credentials, Arc<OnceCell<Arc<VCenter>>>>>,
    changes: mpsc::UnboundedSender<Change>,
    /// The injected clock: idleness and the age of tasks in flight are read on it.
    clock: SharedClock,
    watching: Watching,
}

impl VCenters {
    /// The VCenters, and where their changes arrive.
    pub fn new(
        clock: SharedClock,
        watching: Watching,
    ) -> (VCenters, mpsc::UnboundedReceiver<Change>) {
        let (changes, receiver) = mpsc::unbounded_channel();
        let vcenters = VCenters {
            sessions: Default::default(),
            changes,
            clock,
            watching,
        };
        (vcenters, receiver)
    }

    /// The vCenter of `credentials`, logging in and starting its watch if this is the first
    /// group to name it.
    pub async fn get(
        &self,
        credentials: Credentials,
    ) -> Result<Arc<VCenter>, infrasim_vim_client::Error> {
        let cell = match self.sessions.lock() {
            Ok(mut sessions) => sessions.entry(credentials.clone()).or_default().clone(),
            Err(_) => Arc::default(),
        };
        let vc = cell.get_or_try_init(|| self.open(credentials)).await?;
        vc.touch();
        Ok(vc.clone())
    }

    /// Logs in and starts the watch.
    async fn open(
        &self,
        credentials: Credentials,
    ) -> Result<Arc<VCenter>, infrasim_vim_client::Error> {
        let client = Arc::new(Client::connect(credentials).await?);
        let owner_key = match self.watching.owner_field {
            Some(field) => Some(client.custom_field(field).await?),
            None => None,
        };
        let (synced, _) = watch::channel(false);
        let vc = Arc::new(VCenter {
            client,
            owner_key,
            vms: RwLock::default(),
            synced,
            pending: Default::default(),
            refused: Default::default(),
            last_used: std::sync::Mutex::new(self.clock.now()),
            clock: self.clock.clone(),
            paths: self.watching.paths,
        });
        tokio::spawn(keep_watching(Arc::downgrade(&vc), self.changes.clone()));
        Ok(vc)
    }

    /// Logs out of the vCenters no reconcile asked for in `idle` (their groups are gone, or
    /// their Secret now holds other credentials), so their sessions and watches end; how
    /// many. Cells of failed logins go too, once no login is under way in them.
    pub async fn sweep(&self, idle: Duration) -> usize {
        let idle_ones: Vec<Arc<VCenter>> = {
            let Ok(mut sessions) = self.sessions.lock() else {
                return 0;
            };
            let mut ended = Vec::new();
            sessions.retain(|_, cell| match cell.get() {
                Some(vc) if vc.idle_for() >= idle => {
                    ended.push(vc.clone());
                    false
                }
                Some(_) => true,
                None => Arc::strong_count(cell) > 1,
            });
            ended
        };
        for vc in &idle_ones {
            if let Err(e) = vc.client.logout().await {
                tracing::debug!(error = %e, "logging out of an idle vCenter");
            }
        }
        idle_ones.len()
    }
}

/// What a task the controller started on a VM is for: what the VM's copy shows once it is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal {
    /// A clone: the VM exists.
    Made,
    /// Powered off (to be destroyed, or reshaped while off).
    Off,
    /// Destroyed.
    Gone,
    /// The group's CPUs and memory.
    Shaped,
    /// Powered on.
    On,
    /// In a DRS VM group: shown in its cluster's configuration, not in the VM's properties,
    /// so only the task tells.
    Grouped,
}

/// A task in flight on a VM.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub task: Moref,
    pub goal: Goal,
    /// When it started, or when its task was last read (on the injected clock).
    pub since: DateTime<Utc>,
}

/// A shape (CPUs, MiB) vCenter refused a VM, and why.
type Refusal = ((i64, i64), String);

/// One vCenter: its session and its VMs as last heard.
pub struct VCenter {
    pub client: Arc<Client>,
    /// The key of the owner custom field on this vCenter (see [`Watching::owner_field`]).
    pub owner_key: Option<i64>,
    vms: RwLock<HashMap<Moref, ObjectContent>>,
    /// Whether `vms` holds a whole listing (false until the first, and while starting again).
    synced: watch::Sender<bool>,
    /// The tasks in flight by the name of the VM they work on: the expectations that keep a
    /// reconcile from cloning, powering or destroying again before the watch reports the
    /// change.
    pending: std::sync::Mutex<HashMap<String, Pending>>,
    /// VMs whose reconfiguration to a shape (CPUs, MiB) vCenter refused, with why: not tried
    /// again for that shape, so a refusal does not power-cycle the VM over and over.
    refused: std::sync::Mutex<HashMap<String, Refusal>>,
    /// When a reconcile last asked for this vCenter.
    last_used: std::sync::Mutex<DateTime<Utc>>,
    clock: SharedClock,
    paths: &'static [&'static str],
}

impl VCenter {
    fn touch(&self) {
        if let Ok(mut t) = self.last_used.lock() {
            *t = self.clock.now();
        }
    }

    fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .map(|t| (self.clock.now() - *t).to_std().unwrap_or_default())
            .unwrap_or_default()
    }

    /// The VMs `keep` selects, as last heard, once a whole listing has arrived (waiting up
    /// to `limit`). Only those are copied: a group reads its own few among thousands.
    pub async fn select(
        &self,
        limit: Duration,
        keep: impl Fn(&ObjectContent) -> bool,
    ) -> Result<Vec<ObjectContent>, String> {
        let mut synced = self.synced.subscribe();
        let waited = tokio::time::timeout(limit, synced.wait_for(|s| *s)).await;
        if !matches!(waited, Ok(Ok(_))) {
            return Err(format!("no listing of the VMs came in {limit:?}"));
        }
        let vms = self
            .vms
            .read()
            .map_err(|_| "the VM cache is poisoned".to_string())?;
        Ok(vms.values().filter(|vm| keep(vm)).cloned().collect())
    }

    /// Reads one VM again into the copy: after the controller changed it, so its next read
    /// does not wait for the watch.
    pub async fn refresh(&self, vm: &Moref) -> Result<(), infrasim_vim_client::Error> {
        let read = self.client.properties(vm, self.paths).await?;
        if let Ok(mut vms) = self.vms.write() {
            vms.insert(vm.clone(), read);
        }
        Ok(())
    }

    /// Notes a VM the controller just made and marked, so the next reconcile counts it
    /// before the watch reports it (an expectation, without a call): a VM the watch already
    /// reported gets the mark; one it has not gets `made`, which the watch's report of the
    /// VM will replace whole.
    pub fn note_marked(&self, made: ObjectContent, mark: &str) {
        let Ok(mut vms) = self.vms.write() else {
            return;
        };
        let vm = vms.entry(made.obj.clone()).or_insert(made);
        let Some(owner_key) = self.owner_key else {
            return;
        };
        let value = Val::Object(vec![
            ("key".into(), Val::Text(owner_key.to_string())),
            ("value".into(), Val::Text(mark.to_string())),
        ]);
        vm.apply(&[("customValue".into(), Some(Val::List(vec![value])))]);
    }

    /// Records a task in flight on the VM `name`.
    pub fn start_pending(&self, name: &str, task: Moref, goal: Goal) {
        if let Ok(mut p) = self.pending.lock() {
            let since = self.clock.now();
            p.insert(name.to_string(), Pending { task, goal, since });
        }
    }

    /// How long ago `pending` started or was last read, on the injected clock.
    pub fn age(&self, pending: &Pending) -> Duration {
        (self.clock.now() - pending.since)
            .to_std()
            .unwrap_or_default()
    }

    /// The task in flight on the VM `name`, if any.
    pub fn pending(&self, name: &str) -> Option<Pending> {
        self.pending.lock().ok()?.get(name).cloned()
    }

    /// The tasks in flight on the VMs whose names `keep` selects.
    pub fn pending_where(&self, keep: impl Fn(&str) -> bool) -> Vec<(String, Pending)> {
        let Ok(p) = self.pending.lock() else {
            return Vec::new();
        };
        p.iter()
            .filter(|(name, _)| keep(name))
            .map(|(name, pending)| (name.clone(), pending.clone()))
            .collect()
    }

    /// Notes that the task on `name` was read and still runs: it is read again only after
    /// another wait.
    pub fn checked(&self, name: &str) {
        if let Ok(mut p) = self.pending.lock() {
            if let Some(pending) = p.get_mut(name) {
                pending.since = self.clock.now();
            }
        }
    }

    /// Notes that vCenter refused to give the VM `name` the shape (CPUs, MiB), and why.
    pub fn refuse(&self, name: &str, shape: (i64, i64), why: String) {
        if let Ok(mut r) = self.refused.lock() {
            r.insert(name.to_string(), (shape, why));
        }
    }

    /// Why vCenter refused the VM `name` the shape (CPUs, MiB), if it did.
    pub fn refusal(&self, name: &str, shape: (i64, i64)) -> Option<String> {
        let r = self.refused.lock().ok()?;
        r.get(name)
            .filter(|(s, _)| *s == shape)
            .map(|(_, why)| why.clone())
    }

    /// Forgets the task on `name`: its change arrived, or it failed.
    pub fn settle(&self, name: &str) {
        if let Ok(mut p) = self.pending.lock() {
            p.remove(name);
        }
    }

    /// Forgets a VM the controller destroyed, with any shape vCenter refused it (a VM made
    /// again under the name is tried anew, and the map does not keep every name ever used).
    pub fn forget(&self, vm: &Moref) {
        let gone = self.vms.write().ok().and_then(|mut vms| vms.remove(vm));
        if let (Some(gone), Ok(mut refused)) = (gone, self.refused.lock()) {
            refused.remove(gone.text("name"));
        }
    }

    fn change_of(&self, vm: &ObjectContent) -> Change {
        Change {
            owner: self
                .owner_key
                .and_then(|key| infrasim_vim_client::ops::custom_value(vm, key))
                .filter(|o| !o.is_empty())
                .map(str::to_string),
            name: vm.text("name").to_string(),
        }
    }

    /// Applies one update set; the changes it makes.
    fn apply(&self, objects: Vec<ObjectUpdate>, fresh: bool) -> Vec<Change> {
        let Ok(mut vms) = self.vms.write() else {
            return Vec::new();
        };
        if fresh {
            vms.clear();
        }
        let mut changes = Vec::new();
        for update in objects {
            match update {
                ObjectUpdate::Enter(vm) => {
                    changes.push(self.change_of(&vm));
                    vms.insert(vm.obj.clone(), vm);
                }
                ObjectUpdate::Modify(obj, set) => {
                    if let Some(vm) = vms.get_mut(&obj) {
                        let before = self.change_of(vm);
                        vm.apply(&set);
                        let after = self.change_of(vm);
                        // A VM whose mark changed concerns its old owner too.
                        if before != after {
                            changes.push(before);
                        }
                        changes.push(after);
                    }
                }
                ObjectUpdate::Leave(obj) => {
                    if let Some(vm) = vms.remove(&obj) {
                        changes.push(self.change_of(&vm));
                    }
                }
            }
        }
        changes
    }
}

/// How long one WaitForUpdatesEx waits. Short enough that a watch whose session was ended
/// under it (its filter gone; the client logged in again for another call) notices soon.
const WAIT_SECONDS: u32 = 10;

/// How long the watch lets changes gather between waits.
const COALESCE: Duration = Duration::from_millis(100);

/// Follows a vCenter's VMs for as long as anyone holds it: a filter, then WaitForUpdatesEx
/// after WaitForUpdatesEx; on any failure, or a new login (the filter died with the old
/// session), it starts again from a whole listing.
async fn keep_watching(vc: std::sync::Weak<VCenter>, changes: mpsc::UnboundedSender<Change>) {
    let mut pause = Duration::from_millis(100);
    loop {
        let Some(current) = vc.upgrade() else { return };
        current.synced.send_replace(false);
        let logins = current.client.logins();
        let started = current.client.watch("VirtualMachine", current.paths).await;
        drop(current);
        let mut version = String::new();
        let mut failure = started.err();
        while failure.is_none() {
            let Some(current) = vc.upgrade() else { return };
            match current
                .client
                .wait_for_updates(&version, WAIT_SECONDS)
                .await
            {
                Ok(Some(set)) => {
                    let fresh = version.is_empty();
                    for change in current.apply(set.objects, fresh) {
                        let _ = changes.send(change);
                    }
                    current.synced.send_replace(true);
                    version = set.version;
                    pause = Duration::from_millis(100);
                    // Let changes gather: while VMs are made, one wait per batch rather
                    // than one per change (a clone brings three: it enters, is marked,
                    // gets its IP).
                    tokio::time::sleep(COALESCE).await;
                }
                Ok(None) => {}
                Err(e) => failure = Some(e),
            }
            if failure.is_none() && current.client.logins() != logins {
                failure = Some(infrasim_vim_client::Error::Transport(
                    "logged in again".into(),
                ));
            }
        }
        if let Some(e) = failure {
            tracing::info!(error = %e, "watching the vCenter's VMs again");
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(30));
    }
}

/// A vCenter Secret's credentials (`server`, `username`, `password`, and `thumbprint` or
/// `caBundle`); why they cannot be read.
pub fn read_secret(secret: &Secret) -> Result<Credentials, String> {
    let key = |k: &str| -> Option<String> {
        let data = secret.data.as_ref()?.get(k)?;
        String::from_utf8(data.0.clone())
            .ok()
            .map(|s| s.trim().to_string())
    };
    let need = |k: &str| {
        key(k)
            .filter(|v| !v.is_empty())
            .ok_or(format!("no key {k}"))
    };
    let trust = match (key("thumbprint"), key("caBundle")) {
        (Some(t), _) if !t.is_empty() => Trust::Thumbprint(t),
        (_, Some(ca)) if !ca.is_empty() => Trust::CaBundle(ca),
        _ => return Err("neither a thumbprint nor a caBundle to trust the server by".into()),
    };
    Ok(Credentials {
        server: need("server")?,
        username: need("username")?,
        password: need("password")?,
        trust,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    const WATCHING: Watching = Watching {
        paths: &["name", "runtime.powerState"],
        owner_field: Some("test/owner"),
    };

    /// A simulator of its own, and credentials to it.
    async fn simulator() -> (infrasim_vsphere_sim::Instance, Credentials) {
        let config = infrasim_vsphere_sim::SimConfig {
            password: "p".into(),
            ..Default::default()
        };
        let clock = infrasim_clock::SystemClock::shared();
        let sim = infrasim_vsphere_sim::Instance::start(config, ([127, 0, 0, 1], 0).into(), clock)
            .await
            .expect("the simulator serves");
        let credentials = Credentials {
            server: sim.addr().to_string(),
            username: sim.simulator().config().username.clone(),
            password: "p".into(),
            trust: Trust::Thumbprint(sim.cert().thumbprint_sha256.clone()),
        };
        (sim, credentials)
    }

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        let data: BTreeMap<String, ByteString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
            .collect();
        Secret {
            data: Some(data),
            ..Secret::default()
        }
    }

    #[tokio::test]
    async fn a_destroyed_vm_takes_its_refused_shape_with_it() {
        let (_sim, credentials) = simulator().await;
        let (vcenters, _changes) = VCenters::new(infrasim_clock::SystemClock::shared(), WATCHING);
        let vc = vcenters.get(credentials).await.expect("a session");
        let vms = vc
            .select(Duration::from_secs(10), |_| true)
            .await
            .expect("a listing");
        let vm = vms.first().expect("the model has VMs");
        let name = vm.text("name").to_string();
        vc.refuse(&name, (64, 1024), "too many CPUs".into());
        assert!(vc.refusal(&name, (64, 1024)).is_some());
        vc.forget(&vm.obj);
        assert_eq!(vc.refusal(&name, (64, 1024)), None, "forgotten with the VM");
        assert_eq!(vc.refused.lock().unwrap().len(), 0);
    }

    #[test]
    fn a_secret_needs_a_server_credentials_and_something_to_trust() {
        let full = [
            ("server", "127.0.0.1:8989"),
            ("username", "u"),
            ("password", "p"),
            ("thumbprint", "AB:CD"),
        ];
        let c = read_secret(&secret(&full)).unwrap();
        assert_eq!(c.trust, Trust::Thumbprint("AB:CD".into()));
        let untrusted = read_secret(&secret(&full[..3])).unwrap_err();
        assert!(untrusted.contains("thumbprint"), "{untrusted}");
        let no_password = [("server", "s"), ("username", "u"), ("caBundle", "pem")];
        assert_eq!(
            read_secret(&secret(&no_password)).unwrap_err(),
            "no key password"
        );
    }

    #[tokio::test]
    async fn idle_vcenters_are_logged_out_and_a_later_group_logs_in_afresh() {
        let (_sim, credentials) = simulator().await;
        let (vcenters, _changes) = VCenters::new(infrasim_clock::SystemClock::shared(), WATCHING);
        let first = vcenters.get(credentials.clone()).await.unwrap();
        assert!(
            first
                .select(Duration::from_secs(10), |_| true)
                .await
                .unwrap()
                .len()
                >= 4
        );
        assert_eq!(
            vcenters.sweep(Duration::from_secs(60)).await,
            0,
            "just used"
        );
        assert_eq!(vcenters.sweep(Duration::ZERO).await, 1);
        let err = first
            .client
            .list("VirtualMachine", &["name"])
            .await
            .unwrap_err();
        assert_eq!(
            err.fault_kind(),
            Some("NotAuthenticated"),
            "logged out for good: {err}"
        );
        assert_eq!(first.client.logins(), 1);
        let second = vcenters.get(credentials).await.unwrap();
        assert!(!Arc::ptr_eq(&first, &second));
        assert!(second
            .client
            .list("VirtualMachine", &["name"])
            .await
            .is_ok());
    }
}
