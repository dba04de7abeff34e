//! Every task-returning method the simulator implements, called for real and made to fail
//! by fault injection: its TaskInfo names the method, vCenter's descriptionId, a
//! ManagedEntity (with that entity's name) and a result of the WSDL's declared type.

use super::{kind, IMPLEMENTED};
use crate::fault_injection::{Injection, Target};
use crate::objects::is_a;
use crate::simulator::{SimConfig, Simulator};
use crate::value::{Moref, Val};
use infrasim_clock::FakeClock;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::Arc;

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

fn mor(tag: &str, m: &Moref) -> String {
    format!(r#"<{tag} type="{}">{}</{tag}>"#, m.ty, m.value)
}

struct Env {
    sim: Simulator,
    cookie: String,
    /// The task methods `call` checked.
    called: RefCell<BTreeSet<&'static str>>,
}

impl Env {
    async fn new() -> Env {
        let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().expect("a time"));
        let config = SimConfig {
            password: "pw".into(),
            ..SimConfig::default()
        };
        let sim = Simulator::new(config, Arc::new(clock));
        let login = sim
            .handle(
                &envelope(r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>administrator@vsphere.local</userName><password>pw</password></Login>"#),
                None,
                "test",
            )
            .await;
        let cookie = login.set_cookie.expect("a session cookie");
        Env {
            sim,
            cookie,
            called: RefCell::default(),
        }
    }

    /// Calls `method` on `this`; the reference of type `ty` it returns.
    async fn returned(&self, this: &Moref, method: &str, args: &str, ty: &str) -> Moref {
        let body = envelope(&format!(
            r#"<{method} xmlns="urn:vim25">{}{args}</{method}>"#,
            mor("_this", this)
        ));
        let r = self.sim.handle(&body, Some(&self.cookie), "test").await;
        assert_eq!(r.status, 200, "{method}: {}", r.body);
        let value = r
            .body
            .split(&format!(r#"<returnval type="{ty}">"#))
            .nth(1)
            .and_then(|rest| rest.split('<').next())
            .unwrap_or_else(|| panic!("{method} returned no {ty}: {}", r.body));
        Moref::new(ty, value)
    }

    /// Calls `method` on `this`; the Task it returns.
    async fn task(&self, this: &Moref, method: &str, args: &str) -> Moref {
        self.returned(this, method, args, "Task").await
    }

    fn info(&self, task: &Moref) -> crate::value::Data {
        self.sim.with_inventory(
            |inv| match inv.get(task).and_then(|t| t.props.get("info")) {
                Some(Val::Data(d)) => (**d).clone(),
                other => panic!("{task}: no info ({other:?})"),
            },
        )
    }

    fn name_of(&self, m: &Moref) -> Option<String> {
        self.sim
            .with_inventory(|inv| inv.get(m).map(|o| o.name().to_string()))
    }

    fn first(&self, ty: &str, pred: impl Fn(&crate::objects::ManagedObject) -> bool) -> Moref {
        self.sim.with_inventory(|inv| {
            let mut all: Vec<_> = inv
                .iter()
                .filter(|o| o.moref.ty == ty && pred(o))
                .map(|o| o.moref.clone())
                .collect();
            all.sort();
            all.into_iter().next().unwrap_or_else(|| panic!("no {ty}"))
        })
    }

    fn prop(&self, m: &Moref, path: &str) -> Option<Val> {
        self.sim
            .with_inventory(|inv| inv.get(m).and_then(|o| o.path(path)).cloned())
    }
}

/// What one call's TaskInfo must say.
struct Expect<'a> {
    method: &'a str,
    description_id: &'a str,
    entity: &'a Moref,
    /// The entity's name when the task was created.
    entity_name: &'a str,
}

/// Checks a finished task's info; returns its result.
fn check(info: &crate::value::Data, want: &Expect<'_>, succeeded: bool) -> Option<Val> {
    let m = want.method;
    assert_eq!(info.get("name").and_then(Val::as_str), Some(m), "{m}");
    assert_eq!(
        info.get("descriptionId").and_then(Val::as_str),
        Some(want.description_id),
        "{m}"
    );
    let entity = match info.get("entity") {
        Some(Val::Mor(e)) => e.clone(),
        other => panic!("{m}: entity {other:?}"),
    };
    assert!(is_a(&entity.ty, "ManagedEntity"), "{m}: entity {entity}");
    assert_eq!(&entity, want.entity, "{m}");
    assert_eq!(
        info.get("entityName").and_then(Val::as_str),
        Some(want.entity_name),
        "{m}"
    );
    let state = info.get("state").and_then(Val::as_str);
    let expected = if succeeded { "success" } else { "error" };
    assert_eq!(state, Some(expected), "{m}: {info:?}");
    match info.get("result") {
        Some(Val::Any(v)) => Some((**v).clone()),
        None => None,
        other => panic!("{m}: result not anyType: {other:?}"),
    }
}

/// The objects the calls work on.
struct Targets {
    vm: Moref,
    folder: Moref,
    pool: Moref,
    ds: Moref,
    ds_name: String,
    browser: Moref,
}

fn targets(env: &Env) -> Targets {
    let vm = env.first("VirtualMachine", |o| {
        o.path("runtime.powerState").and_then(Val::as_str) == Some("poweredOn")
    });
    let mor_at = |m: &Moref, path: &str| match env.prop(m, path) {
        Some(Val::Mor(m)) => m,
        Some(Val::Array(_, items)) => match items.first() {
            Some(Val::Mor(m)) => m.clone(),
            other => panic!("{m} {path}: {other:?}"),
        },
        other => panic!("{m} {path}: {other:?}"),
    };
    let ds = mor_at(&vm, "datastore");
    Targets {
        folder: mor_at(&vm, "parent"),
        pool: mor_at(&vm, "resourcePool"),
        browser: mor_at(&ds, "browser"),
        ds_name: env.name_of(&ds).unwrap_or_default(),
        ds,
        vm,
    }
}

/// Calls `method` and checks its TaskInfo; returns the task's result.
async fn call(
    env: &Env,
    this: &Moref,
    method: &str,
    args: &str,
    entity: &Moref,
    description_id: &str,
) -> Option<Val> {
    let entity_name = env.name_of(entity).unwrap_or_default();
    let task = env.task(this, method, args).await;
    let want = Expect {
        method,
        description_id,
        entity,
        entity_name: &entity_name,
    };
    let result = check(&env.info(&task), &want, true);
    let declared = kind(method);
    assert!(
        declared.is_some_and(|k| super::conforms(k.returns, result.as_ref())),
        "{method}: result {result:?} is not the declared {declared:?}"
    );
    if let Some(k) = declared {
        env.called.borrow_mut().insert(k.wsdl);
    }
    result
}

fn as_mor(v: Option<Val>) -> Moref {
    match v {
        Some(Val::Mor(m)) => m,
        other => panic!("not a reference: {other:?}"),
    }
}

/// Power, reconfiguration and the other VM methods without a result.
async fn vm_tasks(env: &Env, t: &Targets) {
    let vm = &t.vm;
    for (method, args, id) in [
        ("ResetVM_Task", "", "VirtualMachine.reset"),
        ("SuspendVM_Task", "", "VirtualMachine.suspend"),
        ("PowerOnVM_Task", "", "VirtualMachine.powerOn"),
        ("PowerOffVM_Task", "", "VirtualMachine.powerOff"),
        (
            "CustomizeVM_Task",
            "<spec><globalIPSettings/></spec>",
            "VirtualMachine.customize",
        ),
        (
            "UpgradeVM_Task",
            "<version>vmx-21</version>",
            "VirtualMachine.upgradeVirtualHardware",
        ),
        (
            "ReconfigVM_Task",
            "<spec><numCPUs>2</numCPUs></spec>",
            "VirtualMachine.reconfigure",
        ),
    ] {
        call(env, vm, method, args, vm, id).await;
    }
}

/// Snapshots: a snapshot is no ManagedEntity, so its own tasks name its VM.
async fn snapshot_tasks(env: &Env, t: &Targets) {
    let vm = &t.vm;
    let args = "<name>s1</name><memory>false</memory><quiesce>false</quiesce>";
    let id = "VirtualMachine.createSnapshot";
    let s1 = as_mor(call(env, vm, "CreateSnapshot_Task", args, vm, id).await);
    let args = "<name>s2</name><memory>false</memory>";
    let id = "VirtualMachine.createSnapshotEx";
    let s2 = as_mor(call(env, vm, "CreateSnapshotEx_Task", args, vm, id).await);
    let id = "VirtualMachine.revertToCurrentSnapshot";
    call(env, vm, "RevertToCurrentSnapshot_Task", "", vm, id).await;
    call(
        env,
        &s1,
        "RevertToSnapshot_Task",
        "",
        vm,
        "vm.Snapshot.revert",
    )
    .await;
    let args = "<removeChildren>false</removeChildren>";
    call(
        env,
        &s2,
        "RemoveSnapshot_Task",
        args,
        vm,
        "vm.Snapshot.remove",
    )
    .await;
    let id = "VirtualMachine.removeAllSnapshots";
    call(env, vm, "RemoveAllSnapshots_Task", "", vm, id).await;
}

/// Clone, rename, move, create and destroy.
async fn inventory_tasks(env: &Env, t: &Targets) {
    let (vm, folder) = (&t.vm, &t.folder);
    let spec = "<spec><powerOn>false</powerOn><template>false</template></spec>";
    let args = format!("{}<name>clone1</name>{spec}", mor("folder", folder));
    let clone = as_mor(call(env, vm, "CloneVM_Task", &args, vm, "VirtualMachine.clone").await);
    // entityName is the name before the rename.
    let renamed = env
        .task(&clone, "Rename_Task", "<newName>renamed</newName>")
        .await;
    let want = Expect {
        method: "Rename_Task",
        description_id: "VirtualMachine.rename",
        entity: &clone,
        entity_name: "clone1",
    };
    check(&env.info(&renamed), &want, true);
    assert_eq!(env.name_of(&clone).as_deref(), Some("renamed"));
    let args = "<newName>vms</newName>";
    call(env, folder, "Rename_Task", args, folder, "Folder.rename").await;
    let sub = env
        .returned(folder, "CreateFolder", "<name>sub</name>", "Folder")
        .await;
    let args = mor("list", &clone);
    call(
        env,
        &sub,
        "MoveIntoFolder_Task",
        &args,
        &sub,
        "Folder.moveInto",
    )
    .await;
    let files = format!("<files><vmPathName>[{}]</vmPathName></files>", t.ds_name);
    let args = format!(
        "<config><name>created</name>{files}</config>{}",
        mor("pool", &t.pool)
    );
    let id = "Folder.createVm";
    let created = as_mor(call(env, folder, "CreateVM_Task", &args, folder, id).await);
    // Destroyed, the entity stays named in the task.
    let id = "VirtualMachine.destroy";
    call(env, &created, "Destroy_Task", "", &created, id).await;
    assert_eq!(env.name_of(&created), None);
}

/// The datastore browser is no ManagedEntity: its tasks name the datastore searched.
async fn browser_tasks(env: &Env, t: &Targets) {
    let (browser, ds) = (&t.browser, &t.ds);
    let path = format!("<datastorePath>[{}]</datastorePath>", t.ds_name);
    let id = "host.DatastoreBrowser.search";
    let found = call(env, browser, "SearchDatastore_Task", &path, ds, id).await;
    // The datastore's top level holds each VM's folder.
    let folders: Vec<String> = match found.as_ref().and_then(|r| r.path("file")) {
        Some(Val::Array(_, files)) => files
            .iter()
            .filter_map(|f| f.path("path").and_then(Val::as_str).map(str::to_string))
            .collect(),
        other => panic!("no files: {other:?}"),
    };
    let vm_name = env.name_of(&t.vm).unwrap_or_default();
    assert!(folders.contains(&vm_name), "{folders:?}");
    let id = "host.DatastoreBrowser.searchSubFolders";
    call(
        env,
        browser,
        "SearchDatastoreSubFolders_Task",
        &path,
        ds,
        id,
    )
    .await;
}

#[tokio::test]
async fn every_task_names_its_method_a_managed_entity_and_a_result_of_the_declared_type() {
    let env = Env::new().await;
    let t = targets(&env);
    vm_tasks(&env, &t).await;
    snapshot_tasks(&env, &t).await;
    inventory_tasks(&env, &t).await;
    browser_tasks(&env, &t).await;
    let implemented: BTreeSet<&str> = IMPLEMENTED.iter().map(|k| k.wsdl).collect();
    assert_eq!(*env.called.borrow(), implemented);
}

#[tokio::test]
async fn injected_failures_describe_their_tasks_as_the_real_calls_do() {
    let env = Env::new().await;
    let t = targets(&env);
    let snap = env
        .task(
            &t.vm,
            "CreateSnapshot_Task",
            "<name>s</name><memory>false</memory><quiesce>false</quiesce>",
        )
        .await;
    let snapshot = match env.info(&snap).get("result") {
        Some(Val::Any(v)) => as_mor(Some((**v).clone())),
        other => panic!("no snapshot: {other:?}"),
    };
    let path = format!("<datastorePath>[{}]</datastorePath>", t.ds_name);
    let mut failed = BTreeSet::new();
    for k in IMPLEMENTED.iter() {
        let (this, args, entity) = match k.wsdl {
            "RevertToSnapshot_Task" | "RemoveSnapshot_Task" => (&snapshot, "", &t.vm),
            "SearchDatastore_Task" | "SearchDatastoreSubFolders_Task" => {
                (&t.browser, path.as_str(), &t.ds)
            }
            "CreateVM_Task" | "MoveIntoFolder_Task" => (&t.folder, "", &t.folder),
            _ => (&t.vm, "", &t.vm),
        };
        let rule = Injection::fail(k.wsdl, Target::Any, "SystemError").expect("a known fault");
        env.sim.set_injections(vec![rule]);
        let task = env.task(this, k.wsdl, args).await;
        let entity_name = env.name_of(entity).unwrap_or_default();
        let description_id = super::description_id(&this.ty, k.wsdl);
        let want = Expect {
            method: k.wsdl,
            description_id: &description_id,
            entity,
            entity_name: &entity_name,
        };
        check(&env.info(&task), &want, false);
        failed.insert(k.wsdl);
    }
    assert_eq!(failed.len(), IMPLEMENTED.len());
    // A method the simulator lacks, made to fail, is described as vCenter would.
    env.sim.set_injections(vec![Injection::fail(
        "RelocateVM_Task",
        Target::Any,
        "Timedout",
    )
    .expect("a known fault")]);
    let task = env.task(&t.vm, "RelocateVM_Task", "").await;
    let name = env.name_of(&t.vm).unwrap_or_default();
    let want = Expect {
        method: "RelocateVM_Task",
        description_id: "VirtualMachine.relocate",
        entity: &t.vm,
        entity_name: &name,
    };
    check(&env.info(&task), &want, false);
}
