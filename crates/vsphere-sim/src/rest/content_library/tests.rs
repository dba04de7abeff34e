//! The content library service end to end through a simulator's REST handler.

use super::deploy::vm_folder_of;
use super::ovf::{read_ovf, OvfSystem};
use super::*;
use crate::simulator::Simulator;
use crate::value::Val;
use crate::SimConfig;
use bytes::Bytes;
use infrasim_clock::FakeClock;
use std::sync::Arc;

const OVF: &str = r#"<?xml version="1.0"?>
<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1"
  xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData">
  <VirtualSystem ovf:id="ubuntu-2204">
<VirtualHardwareSection>
  <Item><rasd:ResourceType>3</rasd:ResourceType><rasd:VirtualQuantity>4</rasd:VirtualQuantity></Item>
  <Item><rasd:AllocationUnits>byte * 2^30</rasd:AllocationUnits>
    <rasd:ResourceType>4</rasd:ResourceType><rasd:VirtualQuantity>2</rasd:VirtualQuantity></Item>
</VirtualHardwareSection>
  </VirtualSystem>
</Envelope>"#;

/// A simulator and a REST session token on it.
fn session() -> (Simulator, String) {
    let config = SimConfig {
        password: "pw".into(),
        ..SimConfig::default()
    };
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let sim = Simulator::new(config, Arc::new(clock));
    let basic = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        "administrator@vsphere.local:pw",
    );
    let (_, token) = call_with(
        &sim,
        &[("authorization", &format!("Basic {basic}"))],
        "POST",
        "/api/session",
        b"",
    );
    (sim, token.as_str().unwrap().to_string())
}

fn call_with(
    sim: &Simulator,
    headers: &[(&str, &str)],
    method: &str,
    url: &str,
    body: &[u8],
) -> (u16, Value) {
    let mut map = http::HeaderMap::new();
    map.insert(http::header::HOST, "127.0.0.1:8989".parse().unwrap());
    for (k, v) in headers {
        map.insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    let (path, query) = url
        .split_once('?')
        .map_or((url, None), |(p, q)| (p, Some(q)));
    let method = Method::from_bytes(method.as_bytes()).unwrap();
    let a = sim.handle_rest(&method, path, query, &map, body).unwrap();
    (
        a.status,
        serde_json::from_str(&a.body).unwrap_or(Value::Null),
    )
}

fn call(sim: &Simulator, token: &str, method: &str, url: &str, body: Value) -> (u16, Value) {
    let body = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    call_with(sim, &[("vmware-api-session-id", token)], method, url, &body)
}

fn first(sim: &Simulator, ty: &str) -> String {
    sim.with_inventory(|inv| {
        inv.iter()
            .find(|o| o.moref.ty == ty)
            .unwrap()
            .moref
            .value
            .clone()
    })
}

/// A library on the first datastore with an OVF item, its file uploaded; (library, item).
fn ovf_item(sim: &Simulator, token: &str) -> (String, String) {
    let ds = first(sim, "Datastore");
    let (status, library) = call(
        sim,
        token,
        "POST",
        "/rest/com/vmware/content/local-library",
        json!({"create_spec": {"name": "templates", "type": "LOCAL",
               "storage_backings": [{"type": "DATASTORE", "datastore_id": ds}]}}),
    );
    assert_eq!(status, 200, "{library}");
    let library = library["value"].as_str().unwrap().to_string();
    let (_, item) = call(
        sim,
        token,
        "POST",
        "/rest/com/vmware/content/library/item",
        json!({"create_spec": {"name": "ubuntu", "library_id": library, "type": "ovf"}}),
    );
    let item = item["value"].as_str().unwrap().to_string();
    let (_, session) = call(
        sim,
        token,
        "POST",
        "/rest/com/vmware/content/library/item/update-session",
        json!({"create_spec": {"library_item_id": item}}),
    );
    let session = session["value"].as_str().unwrap().to_string();
    let add = format!(
        "/rest/com/vmware/content/library/item/updatesession/file/id:{session}?~action=add"
    );
    let (status, file) = call(
        sim,
        token,
        "POST",
        &add,
        json!({"file_spec": {"name": "ubuntu.ovf", "source_type": "PUSH", "size": OVF.len()}}),
    );
    assert_eq!(status, 200, "{file}");
    assert_eq!(file["value"]["status"], "WAITING_FOR_TRANSFER");
    let uri = file["value"]["upload_endpoint"]["uri"]
        .as_str()
        .unwrap()
        .to_string();
    let path = uri
        .strip_prefix("https://127.0.0.1:8989")
        .expect("our own server");
    let complete = format!(
        "/rest/com/vmware/content/library/item/update-session/id:{session}?~action=complete"
    );
    let (status, refused) = call(sim, token, "POST", &complete, Value::Null);
    assert_eq!(
        (status, refused["type"].as_str()),
        (
            400,
            Some("com.vmware.vapi.std.errors.not_allowed_in_current_state")
        )
    );
    let mut headers = http::HeaderMap::new();
    assert_eq!(
        sim.handle_upload(&Method::PUT, path, &headers, Bytes::from(OVF))
            .status,
        401
    );
    headers.insert("vmware-api-session-id", token.parse().unwrap());
    assert_eq!(
        sim.handle_upload(&Method::PUT, path, &headers, Bytes::from(OVF))
            .status,
        200
    );
    assert_eq!(call(sim, token, "POST", &complete, Value::Null).0, 200);
    (library, item)
}

#[test]
fn both_spellings_route_to_the_same_resources() {
    assert_eq!(
        route(Form::Rest, "/com/vmware/content/local-library/id:a"),
        Some(Target::Library("a".into()))
    );
    assert_eq!(
        route(Form::Api, "/content/library/a"),
        Some(Target::Library("a".into()))
    );
    assert_eq!(
        route(Form::Api, "/content/library/item/i/file"),
        Some(Target::ItemFiles(Some("i".into())))
    );
    assert_eq!(
        route(
            Form::Rest,
            "/com/vmware/content/library/item/updatesession/file"
        ),
        Some(Target::SessionFiles(None))
    );
    assert_eq!(
        route(Form::Api, "/content/library/item/update-session/s/file"),
        Some(Target::SessionFiles(Some("s".into())))
    );
    assert_eq!(
        route(Form::Rest, "/com/vmware/vcenter/ovf/library-item/id:i"),
        Some(Target::Ovf("i".into()))
    );
    assert_eq!(route(Form::Api, "/com/vmware/content/library"), None);
    assert_eq!(route(Form::Rest, "/vcenter/cluster/modules"), None);
}

#[test]
fn an_ovf_gives_its_name_cpus_and_memory() {
    let ovf = read_ovf(OVF.as_bytes());
    assert_eq!(
        ovf,
        OvfSystem {
            name: Some("ubuntu-2204".into()),
            cpus: Some(4),
            memory_mb: Some(2048)
        }
    );
    assert_eq!(read_ovf(b"not xml"), OvfSystem::default());
}

#[test]
fn an_uploaded_ovf_item_deploys_as_a_vm_in_the_target_pool_and_folder() {
    let (sim, token) = session();
    let (library, item) = ovf_item(&sim, &token);
    let (_, got) = call(
        &sim,
        &token,
        "GET",
        &format!("/api/content/library/item/{item}"),
        Value::Null,
    );
    assert_eq!(
        (got["type"].as_str(), got["size"].as_u64()),
        (Some("ovf"), Some(OVF.len() as u64))
    );
    let (_, found) = call(
        &sim,
        &token,
        "POST",
        "/api/content/library/item?action=find",
        json!({"library_id": library, "name": "ubuntu"}),
    );
    assert_eq!(found, json!([item]));

    let pool = first(&sim, "ResourcePool");
    let folder = sim
        .with_inventory(|inv| vm_folder_of(inv, &Moref::new("ResourcePool", &pool)))
        .unwrap();
    let deploy = format!("/rest/com/vmware/vcenter/ovf/library-item/id:{item}?~action=deploy");
    let spec = json!({"deployment_spec": {"name": "from-library", "accept_all_EULA": true},
                      "target": {"resource_pool_id": pool, "folder_id": folder.value}});
    let (status, result) = call(&sim, &token, "POST", &deploy, spec.clone());
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["value"]["succeeded"], true, "{result}");
    let vm = result["value"]["resource_id"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    sim.with_inventory(|inv| {
        let o = inv
            .get(&Moref::new("VirtualMachine", &vm))
            .expect("the deployed VM");
        assert_eq!(o.name(), "from-library");
        assert_eq!(
            o.props
                .get("resourcePool")
                .and_then(Val::as_mor)
                .map(|m| m.value.as_str()),
            Some(pool.as_str())
        );
        assert_eq!(o.props.get("parent").and_then(Val::as_mor), Some(&folder));
        assert!(matches!(
            o.path("config.hardware.numCPU"),
            Some(Val::Int(4))
        ));
        assert!(matches!(
            o.path("config.hardware.memoryMB"),
            Some(Val::Int(2048))
        ));
    });
    // The name is now taken: the deployment does not succeed, as vCenter reports it.
    let (_, again) = call(&sim, &token, "POST", &deploy, spec);
    assert_eq!(again["value"]["succeeded"], false, "{again}");
    let missing = "/api/vcenter/ovf/library-item/nope?action=deploy";
    assert_eq!(
        call(
            &sim,
            &token,
            "POST",
            missing,
            json!({"target": {"resource_pool_id": pool}})
        )
        .0,
        404
    );
}

#[test]
fn deleting_a_library_deletes_its_items_and_bad_requests_are_refused() {
    let (sim, token) = session();
    let (library, item) = ovf_item(&sim, &token);
    let (status, err) = call_with(
        &sim,
        &[("vmware-api-session-id", &token)],
        "POST",
        "/api/content/local-library",
        b"{not json",
    );
    assert_eq!(
        (status, err["error_type"].as_str()),
        (400, Some("INVALID_ARGUMENT"))
    );
    let (status, _) = call(
        &sim,
        &token,
        "POST",
        "/api/content/local-library",
        json!({"name": "x", "storage_backings": [{"type": "DATASTORE", "datastore_id": "datastore-404"}]}),
    );
    assert_eq!(status, 400);
    let (status, _) = call(
        &sim,
        &token,
        "POST",
        "/rest/com/vmware/content/library/item",
        json!({"create_spec": {"name": "ubuntu", "library_id": library, "type": "ovf"}}),
    );
    assert_eq!(status, 400, "a second item of the same name");
    assert_eq!(
        call(
            &sim,
            &token,
            "DELETE",
            &format!("/api/content/local-library/{library}"),
            Value::Null
        )
        .0,
        204
    );
    let (status, err) = call(
        &sim,
        &token,
        "GET",
        &format!("/rest/com/vmware/content/library/item/id:{item}"),
        Value::Null,
    );
    assert_eq!(
        (status, err["type"].as_str()),
        (404, Some("com.vmware.vapi.std.errors.not_found"))
    );
    assert_eq!(
        call(
            &sim,
            &token,
            "GET",
            "/rest/com/vmware/content/library",
            Value::Null
        )
        .1,
        json!({"value": []})
    );
}
