//! The service end to end over an in-memory backend: logins, ETags, resets and what a boot
//! takes from the override and the media, and the errors a BMC gives. (The vSphere-backed
//! service is proved with sushy and pyvmomi in the end-to-end suite.)

use base64::Engine as _;
use http::{HeaderMap, HeaderValue, Method};
use infrasim_redfish::{Hardware, Machines, Nic, Power, PowerOp, Record, Request, Service};
use serde_json::{json, Value};
use std::sync::Mutex;

#[derive(Default)]
struct Rack {
    machines: Mutex<Vec<Hardware>>,
    ops: Mutex<Vec<PowerOp>>,
}

impl Rack {
    fn with_one() -> Self {
        let r = Rack::default();
        r.machines.lock().unwrap().push(Hardware {
            uuid: "4c4c4544-0001".into(),
            name: "node-0".into(),
            power: Power::Off,
            cpus: 4,
            cores_per_socket: 2,
            memory_mib: 4096,
            nics: vec![Nic {
                mac: "52:54:00:aa:bb:cc".into(),
                label: "Network adapter 1".into(),
                connected: true,
            }],
            disks: vec![],
            host_name: None,
            record: Record::default(),
        });
        r
    }
    fn record(&self) -> Record {
        self.machines.lock().unwrap()[0].record.clone()
    }
}

impl Machines for Rack {
    fn list(&self) -> Vec<Hardware> {
        self.machines.lock().unwrap().clone()
    }
    fn find(&self, id: &str) -> Option<Hardware> {
        self.list()
            .into_iter()
            .find(|h| h.uuid == id || h.name == id)
    }
    fn power(&self, id: &str, op: PowerOp) -> Result<(), String> {
        self.ops.lock().unwrap().push(op);
        let mut all = self.machines.lock().unwrap();
        let h = all.iter_mut().find(|h| h.uuid == id).ok_or("gone")?;
        h.power = match op {
            PowerOp::On | PowerOp::Restart => Power::On,
            PowerOp::Off | PowerOp::Shutdown => Power::Off,
        };
        Ok(())
    }
    fn keep(&self, id: &str, record: &Record) -> Result<(), String> {
        let mut all = self.machines.lock().unwrap();
        let h = all.iter_mut().find(|h| h.uuid == id).ok_or("gone")?;
        h.record = record.clone();
        Ok(())
    }
}

fn service() -> Service {
    Service::new(
        "svc-uuid",
        "admin",
        "secret",
        infrasim_clock::SystemClock::shared(),
    )
}

struct Call<'a> {
    svc: &'a Service,
    rack: &'a Rack,
    auth: Option<(&'static str, String)>,
}

impl Call<'_> {
    fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        extra: &[(&'static str, &str)],
    ) -> infrasim_redfish::Reply {
        let mut headers = HeaderMap::new();
        if let Some((name, value)) = &self.auth {
            headers.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        for (n, v) in extra {
            headers.insert(*n, HeaderValue::from_str(v).unwrap());
        }
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        self.svc.handle(
            self.rack,
            &Request {
                method: &method,
                path,
                query: None,
                headers: &headers,
                body: body.as_bytes(),
            },
        )
    }
    fn json(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let r = self.send(method, path, body, &[]);
        let v = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        (r.status, v)
    }
}

fn basic(user: &str, password: &str) -> Option<(&'static str, String)> {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    Some(("authorization", format!("Basic {token}")))
}

fn message_id(v: &Value) -> String {
    v["error"]["@Message.ExtendedInfo"][0]["MessageId"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

const SYSTEM: &str = "/redfish/v1/Systems/4c4c4544-0001";

#[test]
fn the_root_is_open_and_the_rest_needs_credentials() {
    let (svc, rack) = (service(), Rack::with_one());
    let anon = Call {
        svc: &svc,
        rack: &rack,
        auth: None,
    };
    let (status, root) = anon.json(Method::GET, "/redfish/v1/", None);
    assert_eq!(status, 200);
    assert_eq!(
        root["Links"]["Sessions"]["@odata.id"],
        "/redfish/v1/SessionService/Sessions"
    );
    let r = anon.send(Method::GET, "/redfish/v1/Systems", None, &[]);
    assert_eq!(r.status, 401);
    assert!(r.header("www-authenticate").is_some());
    let wrong = Call {
        svc: &svc,
        rack: &rack,
        auth: basic("admin", "nope"),
    };
    let (status, body) = wrong.json(Method::GET, "/redfish/v1/Systems", None);
    assert_eq!(
        (status, message_id(&body).as_str()),
        (401, "Base.1.16.ResourceAtUriUnauthorized")
    );
    let admin = Call {
        svc: &svc,
        rack: &rack,
        auth: basic("admin", "secret"),
    };
    let (status, systems) = admin.json(Method::GET, "/redfish/v1/Systems", None);
    assert_eq!(status, 200);
    assert_eq!(systems["Members"][0]["@odata.id"], SYSTEM);
}

#[test]
fn a_session_logs_in_works_and_logs_out() {
    let (svc, rack) = (service(), Rack::with_one());
    let anon = Call {
        svc: &svc,
        rack: &rack,
        auth: None,
    };
    let login = anon.send(
        Method::POST,
        "/redfish/v1/SessionService/Sessions",
        Some(json!({"UserName": "admin", "Password": "secret"})),
        &[],
    );
    assert_eq!(login.status, 201);
    let token = login.header("x-auth-token").unwrap().to_string();
    let location = login.header("location").unwrap().to_string();
    let s = Call {
        svc: &svc,
        rack: &rack,
        auth: Some(("x-auth-token", token)),
    };
    assert_eq!(s.json(Method::GET, SYSTEM, None).0, 200);
    // By name too, as sushy-tools allows.
    assert_eq!(
        s.json(Method::GET, "/redfish/v1/Systems/node-0", None).1["Id"],
        "4c4c4544-0001"
    );
    assert_eq!(s.send(Method::DELETE, &location, None, &[]).status, 204);
    assert_eq!(s.json(Method::GET, SYSTEM, None).0, 401);
    let bad = anon.send(
        Method::POST,
        "/redfish/v1/SessionService/Sessions",
        Some(json!({"UserName": "admin", "Password": "x"})),
        &[],
    );
    assert_eq!(bad.status, 401);
    assert!(bad.header("x-auth-token").is_none());
}

#[test]
fn a_stale_etag_is_refused_and_a_fresh_one_patches() {
    let (svc, rack) = (service(), Rack::with_one());
    let admin = Call {
        svc: &svc,
        rack: &rack,
        auth: basic("admin", "secret"),
    };
    let first = admin.send(Method::GET, SYSTEM, None, &[]);
    let etag = first.header("etag").unwrap().to_string();
    let body: Value = serde_json::from_slice(&first.body).unwrap();
    assert_eq!(body["@odata.etag"], etag.as_str());
    let pxe =
        json!({"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}});
    let r = admin.send(
        Method::PATCH,
        SYSTEM,
        Some(pxe.clone()),
        &[("if-match", &etag)],
    );
    assert_eq!(r.status, 200);
    let again = admin.send(Method::PATCH, SYSTEM, Some(pxe), &[("if-match", &etag)]);
    assert_eq!(again.status, 412, "the first PATCH changed the ETag");
    let strong = r
        .header("etag")
        .unwrap()
        .trim_start_matches("W/")
        .to_string();
    let cd = json!({"Boot": {"BootSourceOverrideTarget": "Cd"}});
    assert_eq!(
        admin
            .send(Method::PATCH, SYSTEM, Some(cd), &[("if-match", &strong)])
            .status,
        200
    );
    assert_eq!(rack.record().boot.target, "Cd");
    let now = admin.send(Method::GET, SYSTEM, None, &[]);
    let current = now.header("etag").unwrap();
    let unchanged = admin.send(Method::GET, SYSTEM, None, &[("if-none-match", current)]);
    assert_eq!(unchanged.status, 304);
    assert!(unchanged.body.is_empty());
}

#[test]
fn a_boot_takes_the_override_and_the_inserted_image_once() {
    let (svc, rack) = (service(), Rack::with_one());
    let admin = Call {
        svc: &svc,
        rack: &rack,
        auth: basic("admin", "secret"),
    };
    let media = "/redfish/v1/Managers/4c4c4544-0001/VirtualMedia/Cd";
    let (status, _) = admin.json(
        Method::POST,
        &format!("{media}/Actions/VirtualMedia.InsertMedia"),
        Some(json!({"Image": "http://images.example/ipa.iso"})),
    );
    assert_eq!(status, 204);
    let (_, cd) = admin.json(Method::GET, media, None);
    assert_eq!(
        (cd["Inserted"].clone(), cd["ImageName"].clone()),
        (json!(true), json!("ipa.iso"))
    );
    let boot =
        json!({"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}});
    assert_eq!(admin.json(Method::PATCH, SYSTEM, Some(boot)).0, 200);
    let reset = format!("{SYSTEM}/Actions/ComputerSystem.Reset");
    assert_eq!(
        admin
            .json(Method::POST, &reset, Some(json!({"ResetType": "On"})))
            .0,
        204
    );
    let (_, sys) = admin.json(Method::GET, SYSTEM, None);
    assert_eq!(sys["PowerState"], "On");
    assert_eq!(sys["Oem"]["Infrasim"]["LastBoot"]["Source"], "Cd");
    assert_eq!(
        sys["Oem"]["Infrasim"]["LastBoot"]["Image"],
        "http://images.example/ipa.iso"
    );
    assert_eq!(
        sys["Boot"]["BootSourceOverrideEnabled"], "Disabled",
        "a Once override is spent"
    );
    assert_eq!(
        admin
            .json(
                Method::POST,
                &reset,
                Some(json!({"ResetType": "ForceRestart"}))
            )
            .0,
        204
    );
    assert_eq!(rack.record().last_boot.unwrap().source, "Hdd");
    // On when on changes nothing; ForceOff powers off; Nmi when off is refused.
    assert_eq!(
        admin
            .json(Method::POST, &reset, Some(json!({"ResetType": "On"})))
            .0,
        204
    );
    assert_eq!(
        *rack.ops.lock().unwrap(),
        vec![PowerOp::On, PowerOp::Restart]
    );
    admin.json(Method::POST, &reset, Some(json!({"ResetType": "ForceOff"})));
    let (status, body) = admin.json(Method::POST, &reset, Some(json!({"ResetType": "Nmi"})));
    assert_eq!(status, 409, "{body}");
    let eject = format!("{media}/Actions/VirtualMedia.EjectMedia");
    assert_eq!(admin.send(Method::POST, &eject, None, &[]).status, 204);
    assert!(rack.record().media.is_empty());
}

#[test]
fn pending_bios_settings_apply_at_the_next_boot() {
    let (svc, rack) = (service(), Rack::with_one());
    let admin = Call {
        svc: &svc,
        rack: &rack,
        auth: basic("admin", "secret"),
    };
    let settings = format!("{SYSTEM}/Bios/Settings");
    let (status, _) = admin.json(
        Method::PATCH,
        &settings,
        Some(json!({"Attributes": {"ProcTurboMode": "Disabled"}})),
    );
    assert_eq!(status, 200);
    let (_, bios) = admin.json(Method::GET, &format!("{SYSTEM}/Bios"), None);
    assert_eq!(
        bios["Attributes"]["ProcTurboMode"], "Enabled",
        "not before a boot"
    );
    let reset = format!("{SYSTEM}/Actions/ComputerSystem.Reset");
    admin.json(Method::POST, &reset, Some(json!({"ResetType": "On"})));
    let (_, bios) = admin.json(Method::GET, &format!("{SYSTEM}/Bios"), None);
    assert_eq!(bios["Attributes"]["ProcTurboMode"], "Disabled");
    let (status, body) = admin.json(
        Method::PATCH,
        &settings,
        Some(json!({"Attributes": {"NoSuch": 1}})),
    );
    assert_eq!(
        (status, message_id(&body).as_str()),
        (400, "Base.1.16.PropertyUnknown")
    );
    let (status, _) = admin.json(
        Method::PATCH,
        &settings,
        Some(json!({"Attributes": {"ProcCoreDisable": "many"}})),
    );
    assert_eq!(status, 400);
}

#[test]
fn bad_requests_get_the_errors_a_bmc_gives() {
    let (svc, rack) = (service(), Rack::with_one());
    let admin = Call {
        svc: &svc,
        rack: &rack,
        auth: basic("admin", "secret"),
    };
    let reset = format!("{SYSTEM}/Actions/ComputerSystem.Reset");
    let (status, body) = admin.json(Method::POST, &reset, Some(json!({"ResetType": "Explode"})));
    assert_eq!(
        (status, message_id(&body).as_str()),
        (400, "Base.1.16.ActionParameterValueNotInList")
    );
    let (status, body) = admin.json(Method::POST, &reset, Some(json!({})));
    assert_eq!(
        (status, message_id(&body).as_str()),
        (400, "Base.1.16.ActionParameterMissing")
    );
    let raw = admin.svc.handle(
        &rack,
        &Request {
            method: &Method::PATCH,
            path: SYSTEM,
            query: None,
            headers: &{
                let mut h = HeaderMap::new();
                let (n, v) = basic("admin", "secret").unwrap();
                h.insert(n, HeaderValue::from_str(&v).unwrap());
                h
            },
            body: b"{\"Boot\": ",
        },
    );
    assert_eq!(raw.status, 400);
    let (status, body) = admin.json(Method::GET, "/redfish/v1/Systems/nope", None);
    assert_eq!(
        (status, message_id(&body).as_str()),
        (404, "Base.1.16.ResourceMissingAtURI")
    );
    assert_eq!(admin.json(Method::GET, "/redfish/v1/Nothing", None).0, 404);
    let r = admin.send(Method::DELETE, SYSTEM, None, &[]);
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD, PATCH"));
    let (status, _) = admin.json(Method::PATCH, SYSTEM, Some(json!({"PowerState": "On"})));
    assert_eq!(status, 400);
    let (status, body) = admin.json(
        Method::PATCH,
        SYSTEM,
        Some(json!({"Boot": {"BootSourceOverrideTarget": "Tape"}})),
    );
    assert_eq!(
        (status, message_id(&body).as_str()),
        (400, "Base.1.16.PropertyValueNotInList")
    );
    assert_eq!(
        rack.record(),
        Record::default(),
        "refused requests change nothing"
    );
}

#[test]
fn a_read_only_account_reads_and_changes_nothing() {
    let (svc, rack) = (service(), Rack::with_one());
    let admin = Call {
        svc: &svc,
        rack: &rack,
        auth: basic("admin", "secret"),
    };
    let (status, acct) = admin.json(
        Method::POST,
        "/redfish/v1/AccountService/Accounts",
        Some(json!({"UserName": "viewer", "Password": "v", "RoleId": "ReadOnly"})),
    );
    assert_eq!(status, 201);
    assert_eq!(acct["Password"], Value::Null);
    let viewer = Call {
        svc: &svc,
        rack: &rack,
        auth: basic("viewer", "v"),
    };
    assert_eq!(viewer.json(Method::GET, SYSTEM, None).0, 200);
    let reset = format!("{SYSTEM}/Actions/ComputerSystem.Reset");
    let (status, body) = viewer.json(Method::POST, &reset, Some(json!({"ResetType": "On"})));
    assert_eq!(
        (status, message_id(&body).as_str()),
        (403, "Base.1.16.InsufficientPrivilege")
    );
    assert!(rack.ops.lock().unwrap().is_empty());
    let path = acct["@odata.id"].as_str().unwrap();
    assert_eq!(admin.send(Method::DELETE, path, None, &[]).status, 204);
    assert_eq!(viewer.json(Method::GET, SYSTEM, None).0, 401);
}
