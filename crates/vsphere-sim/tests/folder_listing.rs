//! `/folder` without a file: HTML listings of the datacenters, a datacenter's datastores and
//! a datastore's folders, each linking to the next level down, in the SOAP session.

use infrasim_clock::FakeClock;
use infrasim_vsphere_sim::simulator::Flavor;
use infrasim_vsphere_sim::{SimConfig, Simulator};
use std::sync::Arc;

fn sim(flavor: Flavor) -> Simulator {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let config = SimConfig {
        password: "pw".into(),
        flavor,
        ..SimConfig::default()
    };
    Simulator::new(config, Arc::new(clock))
}

/// Logs in through the session manager the service content names; the session cookie.
async fn login(s: &Simulator) -> String {
    let envelope = |body: &str| {
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
        )
    };
    let content = s
        .handle(&envelope(r#"<RetrieveServiceContent xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></RetrieveServiceContent>"#), None, "test")
        .await
        .body;
    let manager = content
        .split(r#"<sessionManager type="SessionManager">"#)
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .expect("a session manager");
    let r = s
        .handle(&envelope(&format!(r#"<Login xmlns="urn:vim25"><_this type="SessionManager">{manager}</_this><userName>administrator@vsphere.local</userName><password>pw</password></Login>"#)), None, "test")
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.set_cookie.expect("a session cookie")
}

/// GET `path?query`: status, content type, body.
fn get(s: &Simulator, path: &str, query: &str, cookie: Option<&str>) -> (u16, String, String) {
    let a = s.handle_file(&http::Method::GET, path, query, cookie, bytes::Bytes::new());
    let body = String::from_utf8_lossy(&a.body).into_owned();
    (a.status, a.content_type.to_string(), body)
}

/// The links of a listing, as (label, href).
fn links(html: &str) -> Vec<(String, String)> {
    html.split("<a href=\"")
        .skip(1)
        .filter_map(|rest| {
            let (href, rest) = rest.split_once("\">")?;
            let (label, _) = rest.split_once("</a>")?;
            Some((label.to_string(), href.replace("&amp;", "&")))
        })
        .collect()
}

#[tokio::test]
async fn each_listing_links_to_the_next_level_down() {
    let s = sim(Flavor::VCenter8);
    let cookie = login(&s).await;
    let cookie = Some(cookie.as_str());
    assert_eq!(get(&s, "/folder", "", None).0, 401);
    let (status, ty, body) = get(&s, "/folder", "", cookie);
    assert_eq!((status, ty.as_str()), (200, "text/html; charset=utf-8"));
    assert_eq!(
        links(&body),
        [("DC0".to_string(), "/folder?dcPath=DC0".to_string())]
    );
    let (status, _, body) = get(&s, "/folder", "dcPath=DC0", cookie);
    assert_eq!(status, 200);
    let to_ds = "/folder?dcPath=DC0&dsName=LocalDS_0";
    assert_eq!(links(&body), [("LocalDS_0".into(), to_ds.to_string())]);
    let (status, _, body) = get(&s, "/folder", "dcPath=DC0&dsName=LocalDS_0", cookie);
    assert_eq!(status, 200);
    let folder = links(&body)
        .into_iter()
        .find(|(label, _)| label == "DC0_H0_VM0/")
        .map(|(_, href)| href);
    let want = "/folder/DC0_H0_VM0/?dcPath=DC0&dsName=LocalDS_0";
    assert_eq!(folder.as_deref(), Some(want));
    let q = "dcPath=DC0&dsName=LocalDS_0";
    let (status, _, body) = get(&s, "/folder/DC0_H0_VM0/", q, cookie);
    assert_eq!(status, 200);
    let mut files: Vec<String> = links(&body).into_iter().map(|(l, _)| l).collect();
    files.sort();
    assert_eq!(files, ["DC0_H0_VM0.vmdk", "DC0_H0_VM0.vmx"]);
    // No such folder, a listing written to, a datastore without its datacenter.
    assert_eq!(get(&s, "/folder/nothing", q, cookie).0, 404);
    let put = s.handle_file(&http::Method::PUT, "/folder", "", cookie, "x".into());
    assert_eq!(put.status, 405);
    assert_eq!(get(&s, "/folder", "dsName=LocalDS_0", cookie).0, 404);
    assert_eq!(get(&s, "/folder", "dcPath=DC9", cookie).0, 404);
}

#[tokio::test]
async fn uploaded_files_are_listed_and_served_from_their_folder() {
    let s = sim(Flavor::VCenter8);
    let cookie = login(&s).await;
    let cookie = Some(cookie.as_str());
    let q = "dcPath=DC0&dsName=LocalDS_0";
    let put = s.handle_file(
        &http::Method::PUT,
        "/folder/iso/a b.iso",
        q,
        cookie,
        "iso".into(),
    );
    assert_eq!(put.status, 201);
    let (_, _, body) = get(&s, "/folder/iso", q, cookie);
    let want = "/folder/iso/a%20b.iso?dcPath=DC0&dsName=LocalDS_0";
    assert_eq!(links(&body), [("a b.iso".to_string(), want.to_string())]);
    let (status, ty, body) = get(&s, "/folder/iso/a%20b.iso", q, cookie);
    assert_eq!(
        (status, ty.as_str(), body.as_str()),
        (200, "application/octet-stream", "iso")
    );
}

#[tokio::test]
async fn an_esx_host_needs_no_dc_path() {
    let s = sim(Flavor::Esx8);
    let cookie = login(&s).await;
    let cookie = Some(cookie.as_str());
    let (status, _, body) = get(&s, "/folder", "", cookie);
    assert_eq!(status, 200);
    let to_dc = "/folder?dcPath=ha-datacenter";
    assert_eq!(links(&body), [("ha-datacenter".into(), to_dc.to_string())]);
    let ds = s.with_inventory(|inv| {
        inv.iter()
            .find(|o| o.moref.ty == "Datastore")
            .map(|o| o.name().to_string())
    });
    let query = format!("dsName={}", ds.expect("a datastore"));
    let (status, _, body) = get(&s, "/folder", &query, cookie);
    assert_eq!(status, 200);
    assert!(links(&body)
        .iter()
        .any(|(label, _)| label == "localhost.localdomain_VM0/"));
}
