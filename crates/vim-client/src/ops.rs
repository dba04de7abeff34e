//! What a controller does with a vCenter, built on [`Client::call`]: find objects through a
//! container view, read properties, clone and reconfigure VMs, power them and destroy them,
//! follow the tasks those start, and mark VMs with custom fields.

use crate::xml::{escape, Moref, ObjectContent, Val};
use crate::{Client, Error, Result};
use std::time::Duration;

/// Where and how a clone is made.
#[derive(Debug, Clone, PartialEq)]
pub struct CloneSpec {
    pub name: String,
    pub folder: Moref,
    pub pool: Moref,
    pub datastore: Option<Moref>,
    pub cpus: Option<i64>,
    pub memory_mb: Option<i64>,
    pub power_on: bool,
    /// `<deviceChange>` elements for the clone's configuration (see [`replace_nics`]).
    pub device_change: String,
    /// `config.extraConfig` keys and values for the clone (CAPV's `guestinfo.userdata`).
    pub extra_config: Vec<(String, String)>,
}

/// What a NIC is attached to.
#[derive(Debug, Clone, PartialEq)]
pub enum NetworkBacking {
    /// A standard port group (a `Network`).
    Network { name: String, network: Moref },
    /// A distributed port group, by its switch's UUID and its key.
    Portgroup {
        switch_uuid: String,
        portgroup_key: String,
    },
}

/// `<deviceChange>` elements that replace every NIC in `devices` (a VM's
/// `config.hardware.device`) with one NIC on `backing`, of the first NIC's type.
pub fn replace_nics(devices: &Val, backing: &NetworkBacking) -> String {
    let nics: Vec<&Val> = devices
        .items()
        .into_iter()
        .filter(|d| d.field("macAddress").is_some())
        .collect();
    let ty = nics
        .first()
        .and_then(|n| n.type_name())
        .unwrap_or("VirtualVmxnet3")
        .to_string();
    let mut out = String::new();
    for nic in &nics {
        let key = nic.field("key").and_then(Val::text).unwrap_or("0");
        let nic_ty = nic.type_name().unwrap_or(&ty);
        out.push_str(&format!(
            r#"<deviceChange><operation>remove</operation><device xsi:type="{}"><key>{}</key></device></deviceChange>"#,
            escape(nic_ty),
            escape(key)
        ));
    }
    let backing = match backing {
        NetworkBacking::Network { name, network } => format!(
            r#"<backing xsi:type="VirtualEthernetCardNetworkBackingInfo"><deviceName>{}</deviceName>{}</backing>"#,
            escape(name),
            network.element("network")
        ),
        NetworkBacking::Portgroup {
            switch_uuid,
            portgroup_key,
        } => format!(
            r#"<backing xsi:type="VirtualEthernetCardDistributedVirtualPortBackingInfo"><port><switchUuid>{}</switchUuid><portgroupKey>{}</portgroupKey></port></backing>"#,
            escape(switch_uuid),
            escape(portgroup_key)
        ),
    };
    out.push_str(&format!(
        r#"<deviceChange><operation>add</operation><device xsi:type="{}"><key>-1</key>{backing}<connectable><startConnected>true</startConnected><allowGuestControl>true</allowGuestControl><connected>true</connected></connectable><addressType>generated</addressType></device></deviceChange>"#,
        escape(&ty)
    ));
    out
}

/// Where a task stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskState {
    Queued,
    Running,
    /// Done; what it made (a clone's VM), if anything.
    Success(Option<Moref>),
    /// Failed: the fault's type (`InvalidPowerState`) and message.
    Error {
        kind: String,
        message: String,
    },
}

impl Client {
    /// `paths` of every object of type `ty` under the root folder, through a container view
    /// (one RetrievePropertiesEx, and a ContinueRetrievePropertiesEx per further page).
    pub async fn list(&self, ty: &str, paths: &[&str]) -> Result<Vec<ObjectContent>> {
        let view = self.container_view(ty).await?;
        let spec = format!(
            r#"<specSet><propSet><type>{}</type>{}</propSet>{}</specSet>"#,
            escape(ty),
            path_set(paths),
            through_view(&view)
        );
        let listed = self.retrieve(&spec).await;
        // The view is the server's memory: give it back even when the listing failed.
        let destroyed = self
            .call(&format!(
                r#"<DestroyView xmlns="urn:vim25">{}</DestroyView>"#,
                view.element("_this")
            ))
            .await;
        let listed = listed?;
        destroyed?;
        Ok(listed)
    }

    /// A container view of every object of type `ty` under the root folder.
    pub async fn container_view(&self, ty: &str) -> Result<Moref> {
        let c = self.content();
        self.call(&format!(
            r#"<CreateContainerView xmlns="urn:vim25">{}{}<type>{}</type><recursive>true</recursive></CreateContainerView>"#,
            c.view_manager.element("_this"),
            c.root_folder.element("container"),
            escape(ty)
        ))
        .await?
        .returnval("CreateContainerView")?
        .moref()
        .cloned()
        .ok_or_else(|| Error::Answer("CreateContainerView returned no view".into()))
    }

    /// `paths` of one object.
    pub async fn properties(&self, obj: &Moref, paths: &[&str]) -> Result<ObjectContent> {
        let spec = format!(
            r#"<specSet><propSet><type>{}</type>{}</propSet><objectSet>{}</objectSet></specSet>"#,
            escape(&obj.ty),
            path_set(paths),
            obj.element("obj")
        );
        self.retrieve(&spec)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| Error::Fault {
                kind: "ManagedObjectNotFound".into(),
                message: format!("{obj} is gone"),
            })
    }

    /// RetrievePropertiesEx of `spec_set`, every page.
    async fn retrieve(&self, spec_set: &str) -> Result<Vec<ObjectContent>> {
        let collector = self.content().property_collector.element("_this");
        let answer = self
            .call(&format!(
                r#"<RetrievePropertiesEx xmlns="urn:vim25">{collector}{spec_set}<options/></RetrievePropertiesEx>"#
            ))
            .await?;
        let (mut objects, mut token) = answer.objects();
        while let Some(t) = token {
            let answer = self
                .call(&format!(
                    r#"<ContinueRetrievePropertiesEx xmlns="urn:vim25">{collector}<token>{}</token></ContinueRetrievePropertiesEx>"#,
                    escape(&t)
                ))
                .await?;
            let (more, next) = answer.objects();
            objects.extend(more);
            token = next;
        }
        Ok(objects)
    }

    /// The object at an inventory path (`DC0/host/DC0_C0`), if there is one.
    pub async fn find_by_inventory_path(&self, path: &str) -> Result<Option<Moref>> {
        let answer = self
            .call(&format!(
                r#"<FindByInventoryPath xmlns="urn:vim25">{}<inventoryPath>{}</inventoryPath></FindByInventoryPath>"#,
                self.content().search_index.element("_this"),
                escape(path)
            ))
            .await?;
        Ok(answer.returnvals().first().and_then(Val::moref).cloned())
    }

    /// Starts cloning `source`; the task.
    pub async fn clone_vm(&self, source: &Moref, spec: &CloneSpec) -> Result<Moref> {
        let datastore = spec
            .datastore
            .as_ref()
            .map(|d| d.element("datastore"))
            .unwrap_or_default();
        let body = format!(
            r#"<CloneVM_Task xmlns="urn:vim25">{}{}<name>{}</name><spec><location>{datastore}{}</location><template>false</template><config>{}{}{}</config><powerOn>{}</powerOn></spec></CloneVM_Task>"#,
            source.element("_this"),
            spec.folder.element("folder"),
            escape(&spec.name),
            spec.pool.element("pool"),
            hardware(spec.cpus, spec.memory_mb),
            spec.device_change,
            extra_config(&spec.extra_config),
            spec.power_on
        );
        self.task("CloneVM_Task", &body).await
    }

    /// Starts creating a VM in `folder` on `pool` (and `host`, else the pool's first) from
    /// `config`, the inner XML of a VirtualMachineConfigSpec; the task.
    pub async fn create_vm(
        &self,
        folder: &Moref,
        config: &str,
        pool: &Moref,
        host: Option<&Moref>,
    ) -> Result<Moref> {
        let body = format!(
            r#"<CreateVM_Task xmlns="urn:vim25">{}<config>{config}</config>{}{}</CreateVM_Task>"#,
            folder.element("_this"),
            pool.element("pool"),
            host.map(|h| h.element("host")).unwrap_or_default()
        );
        self.task("CreateVM_Task", &body).await
    }

    /// Starts changing a VM's CPUs and memory; the task.
    pub async fn reconfigure(
        &self,
        vm: &Moref,
        cpus: Option<i64>,
        memory_mb: Option<i64>,
    ) -> Result<Moref> {
        let body = format!(
            r#"<ReconfigVM_Task xmlns="urn:vim25">{}<spec>{}</spec></ReconfigVM_Task>"#,
            vm.element("_this"),
            hardware(cpus, memory_mb)
        );
        self.task("ReconfigVM_Task", &body).await
    }

    /// Starts setting `config.extraConfig` keys of a VM (an empty value removes a key); the
    /// task.
    pub async fn reconfigure_extra_config(
        &self,
        vm: &Moref,
        pairs: &[(String, String)],
    ) -> Result<Moref> {
        let body = format!(
            r#"<ReconfigVM_Task xmlns="urn:vim25">{}<spec>{}</spec></ReconfigVM_Task>"#,
            vm.element("_this"),
            extra_config(pairs)
        );
        self.task("ReconfigVM_Task", &body).await
    }

    /// Starts a task-returning method that takes only its object (`PowerOnVM_Task`,
    /// `PowerOffVM_Task`, `Destroy_Task`); the task.
    pub async fn start(&self, method: &str, obj: &Moref) -> Result<Moref> {
        let body = format!(
            r#"<{method} xmlns="urn:vim25">{}</{method}>"#,
            obj.element("_this")
        );
        self.task(method, &body).await
    }

    /// Calls a method that takes only its object and returns nothing (`ShutdownGuest`,
    /// `RebootGuest`).
    pub async fn invoke(&self, method: &str, obj: &Moref) -> Result<()> {
        let body = format!(
            r#"<{method} xmlns="urn:vim25">{}</{method}>"#,
            obj.element("_this")
        );
        self.call(&body).await.map(drop)
    }

    async fn task(&self, method: &str, body: &str) -> Result<Moref> {
        self.call(body)
            .await?
            .returnval(method)?
            .moref()
            .cloned()
            .ok_or_else(|| Error::Answer(format!("{method} returned no task")))
    }

    /// Where `task` stands.
    pub async fn task_state(&self, task: &Moref) -> Result<TaskState> {
        let info = self.properties(task, &["info"]).await?;
        let info = info
            .prop("info")
            .ok_or_else(|| Error::Answer(format!("{task} has no info")))?;
        let state = info.field("state").and_then(Val::text).unwrap_or("");
        Ok(match state {
            "queued" => TaskState::Queued,
            "running" => TaskState::Running,
            "success" => TaskState::Success(info.field("result").and_then(Val::moref).cloned()),
            _ => {
                let error = info.field("error");
                TaskState::Error {
                    kind: fault_kind(error),
                    message: describe_error(error),
                }
            }
        })
    }

    /// Waits for `task` to end (polling, from 10 ms up to half a second apart), up to
    /// `limit`; what it made, or its fault as [`Error::Fault`].
    pub async fn wait(&self, task: &Moref, limit: Duration) -> Result<Option<Moref>> {
        let deadline = tokio::time::Instant::now() + limit;
        let mut pause = Duration::from_millis(10);
        loop {
            match self.task_state(task).await? {
                TaskState::Success(made) => return Ok(made),
                TaskState::Error { kind, message } => return Err(Error::Fault { kind, message }),
                TaskState::Queued | TaskState::Running => {}
            }
            if tokio::time::Instant::now() + pause > deadline {
                return Err(Error::Transport(format!("{task} did not end in {limit:?}")));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    /// The key of the VM custom field `name`, defined if the vCenter lacks it.
    pub async fn custom_field(&self, name: &str) -> Result<i64> {
        let manager = self
            .content()
            .custom_fields_manager
            .clone()
            .ok_or_else(|| {
                Error::Answer("this server has no custom fields (an ESXi host?)".into())
            })?;
        let fields = self.properties(&manager, &["field"]).await?;
        let existing = fields
            .prop("field")
            .into_iter()
            .flat_map(Val::items)
            .find(|f| {
                f.field("name").and_then(Val::text) == Some(name)
                    && f.field("managedObjectType").and_then(Val::text) == Some("VirtualMachine")
            });
        let def = match existing {
            Some(def) => def.clone(),
            None => self
                .call(&format!(
                    r#"<AddCustomFieldDef xmlns="urn:vim25">{}<name>{}</name><moType>VirtualMachine</moType></AddCustomFieldDef>"#,
                    manager.element("_this"),
                    escape(name)
                ))
                .await?
                .returnval("AddCustomFieldDef")?,
        };
        def.field("key")
            .and_then(Val::text)
            .and_then(|k| k.parse().ok())
            .ok_or_else(|| Error::Answer(format!("the custom field {name} has no key")))
    }

    /// Sets custom field `key` of `entity` to `value`.
    pub async fn set_custom_field(&self, entity: &Moref, key: i64, value: &str) -> Result<()> {
        let manager = self
            .content()
            .custom_fields_manager
            .clone()
            .ok_or_else(|| Error::Answer("this server has no custom fields".into()))?;
        self.call(&format!(
            r#"<SetField xmlns="urn:vim25">{}{}<key>{key}</key><value>{}</value></SetField>"#,
            manager.element("_this"),
            entity.element("entity"),
            escape(value)
        ))
        .await
        .map(drop)
    }
}

/// A VM's custom field value by key, from its `customValue` property.
pub fn custom_value(vm: &ObjectContent, key: i64) -> Option<&str> {
    let key = key.to_string();
    vm.prop("customValue")?
        .items()
        .into_iter()
        .find(|v| v.field("key").and_then(Val::text) == Some(&key))?
        .field("value")
        .and_then(Val::text)
}

/// An objectSet of every object in a container view (the view itself skipped).
pub(crate) fn through_view(view: &Moref) -> String {
    format!(
        r#"<objectSet>{}<skip>true</skip><selectSet xsi:type="TraversalSpec"><name>view</name><type>ContainerView</type><path>view</path><skip>false</skip></selectSet></objectSet>"#,
        view.element("obj")
    )
}

pub(crate) fn path_set(paths: &[&str]) -> String {
    paths
        .iter()
        .map(|p| format!("<pathSet>{}</pathSet>", escape(p)))
        .collect()
}

/// The CPU and memory part of a VirtualMachineConfigSpec, in schema order.
fn hardware(cpus: Option<i64>, memory_mb: Option<i64>) -> String {
    let cpus = cpus
        .map(|n| format!("<numCPUs>{n}</numCPUs>"))
        .unwrap_or_default();
    let memory = memory_mb
        .map(|m| format!("<memoryMB>{m}</memoryMB>"))
        .unwrap_or_default();
    format!("{cpus}{memory}")
}

/// `<extraConfig>` elements (OptionValues with string values), in a config spec's
/// schema place: after `deviceChange`.
fn extra_config(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            format!(
                r#"<extraConfig><key>{}</key><value xsi:type="xsd:string">{}</value></extraConfig>"#,
                escape(k),
                escape(v)
            )
        })
        .collect()
}

/// A task's `info.error` (a LocalizedMethodFault) as one line.
/// The type of a task's fault (`LocalizedMethodFault.fault`'s `xsi:type`).
fn fault_kind(error: Option<&Val>) -> String {
    error
        .and_then(|e| e.field("fault"))
        .and_then(Val::type_name)
        .unwrap_or("TaskFailed")
        .to_string()
}

fn describe_error(error: Option<&Val>) -> String {
    error
        .and_then(|e| e.field("localizedMessage"))
        .and_then(Val::text)
        .filter(|m| !m.is_empty())
        .unwrap_or("the task failed without saying why")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_follows_the_schema_order_and_leaves_out_what_is_unset() {
        assert_eq!(
            hardware(Some(4), Some(1024)),
            "<numCPUs>4</numCPUs><memoryMB>1024</memoryMB>"
        );
        assert_eq!(hardware(None, Some(512)), "<memoryMB>512</memoryMB>");
        assert_eq!(hardware(None, None), "");
    }

    #[test]
    fn extra_config_values_are_typed_strings_and_escaped() {
        let pairs = [("guestinfo.userdata".to_string(), "a<b".to_string())];
        assert_eq!(
            extra_config(&pairs),
            r#"<extraConfig><key>guestinfo.userdata</key><value xsi:type="xsd:string">a&lt;b</value></extraConfig>"#
        );
    }

    #[test]
    fn nics_are_replaced_by_one_of_the_first_ones_type_on_the_backing() {
        let nic = |key: &str| {
            Val::Object(vec![
                ("@type".into(), Val::Text("VirtualE1000".into())),
                ("key".into(), Val::Text(key.into())),
                ("macAddress".into(), Val::Text("00:50:56:00:00:01".into())),
            ])
        };
        let disk = Val::Object(vec![("key".into(), Val::Text("2000".into()))]);
        let devices = Val::List(vec![disk, nic("4000"), nic("4001")]);
        let backing = NetworkBacking::Portgroup {
            switch_uuid: "u".into(),
            portgroup_key: "dvportgroup-1".into(),
        };
        let xml = replace_nics(&devices, &backing);
        assert_eq!(xml.matches("<operation>remove</operation>").count(), 2);
        assert!(xml.contains(r#"<device xsi:type="VirtualE1000"><key>4001</key>"#));
        assert!(!xml.contains("<key>2000</key>"), "only NICs go");
        assert!(xml.contains("<portgroupKey>dvportgroup-1</portgroupKey>"));
        assert!(xml.ends_with("</device></deviceChange>"));
    }

    #[test]
    fn custom_values_are_found_by_key() {
        let vm = ObjectContent {
            obj: Moref::new("VirtualMachine", "vm-1"),
            props: vec![(
                "customValue".into(),
                Val::List(vec![Val::Object(vec![
                    ("key".into(), Val::Text("101".into())),
                    ("value".into(), Val::Text("default/g".into())),
                ])]),
            )],
        };
        assert_eq!(custom_value(&vm, 101), Some("default/g"));
        assert_eq!(custom_value(&vm, 102), None);
    }
}
