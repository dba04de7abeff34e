//! Many simulators in one process: each its own inventory, sessions, credentials, port and
//! certificate; stopping one frees its port and leaves the others answering.

use infrasim_clock::SystemClock;
use infrasim_vsphere_sim::{Instance, SimConfig};
use rustls::pki_types::{pem::PemObject, CertificateDer, ServerName};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

async fn start(password: &str) -> Instance {
    let config = SimConfig {
        password: password.into(),
        ..SimConfig::default()
    };
    Instance::start(
        config,
        "127.0.0.1:0".parse().unwrap(),
        SystemClock::shared(),
    )
    .await
    .unwrap()
}

/// The HTTP status of `GET path` over TLS to `addr`, trusting only `cert_pem`.
async fn https_get(addr: SocketAddr, cert_pem: &str, path: &str) -> std::io::Result<u16> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = connector.connect(name, tcp).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    tls.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    let text = String::from_utf8_lossy(&answer);
    Ok(text
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0))
}

async fn login(instance: &Instance, password: &str) -> Option<String> {
    let body = envelope(&format!(
        r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>administrator@vsphere.local</userName><password>{password}</password></Login>"#
    ));
    let r = instance.simulator().handle(&body, None, "test").await;
    r.set_cookie
        .map(|c| c.split(';').next().unwrap_or("").to_string())
}

fn folders(instance: &Instance) -> usize {
    instance
        .simulator()
        .with_inventory(|inv| inv.iter().filter(|o| o.moref.ty == "Folder").count())
}

#[tokio::test]
async fn two_simulators_share_nothing_and_stop_alone() {
    let (a, b) = (start("pass-a").await, start("pass-b").await);
    assert_ne!(a.addr(), b.addr());
    assert_ne!(a.cert().thumbprint_sha1, b.cert().thumbprint_sha1);
    assert!(a
        .url()
        .starts_with("https://administrator%40vsphere.local:pass-a@127.0.0.1:"));
    for i in [&a, &b] {
        let status = https_get(i.addr(), i.cert_pem(), "/sdk/vimServiceVersions.xml").await;
        assert_eq!(status.unwrap(), 200);
    }
    // Each has its own credentials and sessions.
    let cookie_a = login(&a, "pass-a").await.expect("a's password opens a");
    assert!(
        login(&b, "pass-a").await.is_none(),
        "a's password does not open b"
    );
    let fetch = envelope(
        r#"<Fetch xmlns="urn:vim25"><_this type="Folder">group-d1</_this><prop>childEntity</prop></Fetch>"#,
    );
    let on_b = b.simulator().handle(&fetch, Some(&cookie_a), "test").await;
    assert!(on_b.body.contains("NotAuthenticated"), "{}", on_b.body);
    // And its own inventory.
    let before = folders(&b);
    let create = envelope(
        r#"<CreateFolder xmlns="urn:vim25"><_this type="Folder">group-d1</_this><name>only-in-a</name></CreateFolder>"#,
    );
    let r = a.simulator().handle(&create, Some(&cookie_a), "test").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(folders(&a), before + 1);
    assert_eq!(folders(&b), before);

    // Stopping a frees its port and ends its open connections; b goes on.
    let addr_a = a.addr();
    let cert_a = a.cert_pem().to_string();
    let mut idle = tokio::net::TcpStream::connect(addr_a).await.unwrap();
    a.stop().await.unwrap();
    let mut buf = [0u8; 16];
    let ended = tokio::time::timeout(std::time::Duration::from_secs(10), idle.read(&mut buf)).await;
    assert!(matches!(ended, Ok(Ok(0)) | Ok(Err(_))), "{ended:?}");
    assert!(https_get(addr_a, &cert_a, "/sdk/vimServiceVersions.xml")
        .await
        .is_err());
    drop(
        tokio::net::TcpListener::bind(addr_a)
            .await
            .expect("the port is free again"),
    );
    let status = https_get(b.addr(), b.cert_pem(), "/sdk/vimServiceVersions.xml").await;
    assert_eq!(status.unwrap(), 200);
    b.stop().await.unwrap();
}
