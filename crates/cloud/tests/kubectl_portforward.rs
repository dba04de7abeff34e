//! `kubectl port-forward` (the machine's kubectl, a client nobody here wrote) into a simulated
//! cluster, over both of kubectl's protocols: SPDY tunnelled in WebSocket (its default since
//! 1.31) and the plain SPDY/3.1 upgrade it falls back to (`KUBECTL_PORT_FORWARD_WEBSOCKETS=
//! false` forces it). kubectl falls back silently, so each test reads the server's
//! `/metrics` to see which protocol was spoken. Through the forward, etcdctl 3.4 talks to
//! an etcd member (member list, endpoint status and health, alarms, put, get, watch,
//! snapshot save) and kubectl to a control plane's API server.

mod common;
use common::three_control_planes as shape;
use infrasim_cloud::{Cloud, CloudConfig};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A cluster and the files kubectl and etcdctl need.
struct Fixture {
    name: String,
    _cloud: Cloud,
    client: kube::Client,
    dir: PathBuf,
    /// Removes `dir` (the kubeconfig and etcd client files) when the test ends.
    _files: tempfile::TempDir,
}

async fn fixture(name: &str, ports: std::ops::RangeInclusive<u16>) -> Fixture {
    let cloud = Cloud::new(CloudConfig {
        ports,
        ..CloudConfig::default()
    });
    let info = cloud.create_cluster(shape(name)).await.expect("a cluster");
    let pki = cloud.pki(name).expect("PKI");
    let etcd_client = pki
        .etcd_ca
        .client_cert("kube-apiserver-etcd-client", &[])
        .expect("a client certificate");
    let files = tempfile::Builder::new()
        .prefix(&format!("kubectl-pf-{name}-"))
        .tempdir()
        .expect("a temp dir");
    let dir = files.path().to_path_buf();
    for (file, text) in [
        ("kubeconfig", info.kubeconfig.as_str()),
        ("etcd-ca.crt", pki.etcd_ca.cert_pem.as_str()),
        ("etcd-client.crt", etcd_client.cert_pem.as_str()),
        ("etcd-client.key", etcd_client.key_pem.as_str()),
    ] {
        std::fs::write(dir.join(file), text).expect("write");
    }
    let client = common::client(&info.kubeconfig).await;
    Fixture {
        name: name.to_string(),
        _cloud: cloud,
        client,
        dir,
        _files: files,
    }
}

/// Sessions the server counted for `protocol` (its `/metrics` line).
async fn sessions(client: &kube::Client, protocol: &str) -> u64 {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    let text = client.request_text(request).await.expect("/metrics");
    let line = format!("infrasim_port_forward_sessions_total{{protocol=\"{protocol}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&line))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {line:?} in /metrics:\n{text}"))
}

/// `kubectl port-forward` to `pod`'s `port` on a free local port; the child and that port.
async fn port_forward(dir: &Path, websockets: bool, pod: &str, port: u16) -> (Child, u16) {
    let mut child = Command::new("kubectl")
        .arg(format!("--kubeconfig={}", dir.join("kubeconfig").display()))
        .args(["-n", "kube-system", "port-forward", "--address=127.0.0.1"])
        .arg(format!("pod/{pod}"))
        .arg(format!(":{port}"))
        .env(
            "KUBECTL_PORT_FORWARD_WEBSOCKETS",
            if websockets { "true" } else { "false" },
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl runs (the machine's kubectl)");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    // "Forwarding from 127.0.0.1:41234 -> 2379"
    let local = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            let port = line
                .strip_prefix("Forwarding from 127.0.0.1:")
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|p| p.parse::<u16>().ok());
            if let Some(port) = port {
                return Some(port);
            }
        }
        None
    })
    .await
    .ok()
    .flatten();
    let Some(local) = local else {
        let out = child.wait_with_output().await.expect("kubectl output");
        panic!(
            "kubectl port-forward did not start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // Keep reading stdout ("Handling connection for ...") so kubectl never blocks on it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, local)
}

/// etcdctl with the etcd client files against `127.0.0.1:port`; what it printed (some
/// commands, `endpoint health` among them, answer on stderr).
async fn etcdctl(dir: &Path, port: u16, args: &[&str]) -> String {
    let out = Command::new("etcdctl")
        .arg(format!("--endpoints=https://127.0.0.1:{port}"))
        .arg(format!("--cacert={}", dir.join("etcd-ca.crt").display()))
        .arg(format!("--cert={}", dir.join("etcd-client.crt").display()))
        .arg(format!("--key={}", dir.join("etcd-client.key").display()))
        .arg("--command-timeout=20s")
        .args(args)
        .env("ETCDCTL_API", "3")
        .output()
        .await
        .expect("etcdctl runs (Debian's etcd-client; scripts/test-all installs it)");
    assert!(
        out.status.success(),
        "etcdctl {args:?} through kubectl port-forward failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// etcdctl's calls through one kubectl port-forward to the second control plane's member.
async fn etcdctl_through_kubectl(f: &Fixture, websockets: bool) {
    let node = format!("{}-control-plane-1", f.name);
    let (mut kubectl, port) = port_forward(&f.dir, websockets, &format!("etcd-{node}"), 2379).await;
    let members = etcdctl(&f.dir, port, &["member", "list"]).await;
    for n in 0..3 {
        assert!(
            members.contains(&format!(
                ", started, {}-control-plane-{n}, https://",
                f.name
            )),
            "{members}"
        );
    }
    let status = etcdctl(&f.dir, port, &["endpoint", "status", "-w", "json"]).await;
    assert!(status.contains("\"version\":\"3.5.16\""), "{status}");
    let health = etcdctl(&f.dir, port, &["endpoint", "health"]).await;
    assert!(health.contains("is healthy"), "{health}");
    assert_eq!(etcdctl(&f.dir, port, &["alarm", "list"]).await.trim(), "");
    let key = if websockets { "/tunnelled" } else { "/spdy" };
    assert_eq!(
        etcdctl(&f.dir, port, &["put", key, "both ways"])
            .await
            .trim(),
        "OK"
    );
    let got = etcdctl(&f.dir, port, &["get", key, "--print-value-only"]).await;
    assert_eq!(got.trim(), "both ways");
    watch_through(f, port, key).await;
    let snapshot = f.dir.join(format!("{}.db", key.trim_start_matches('/')));
    let saved = etcdctl(
        &f.dir,
        port,
        &["snapshot", "save", &snapshot.to_string_lossy()],
    )
    .await;
    assert!(saved.contains("Snapshot saved"), "{saved}");
    assert!(std::fs::metadata(&snapshot).map(|m| m.len()).unwrap_or(0) > 0);
    let _ = kubectl.kill().await;
}

/// `etcdctl watch` through the forward sees a put made through another connection of it.
async fn watch_through(f: &Fixture, port: u16, key: &str) {
    let mut watch = Command::new("etcdctl")
        .arg(format!("--endpoints=https://127.0.0.1:{port}"))
        .arg(format!("--cacert={}", f.dir.join("etcd-ca.crt").display()))
        .arg(format!(
            "--cert={}",
            f.dir.join("etcd-client.crt").display()
        ))
        .arg(format!("--key={}", f.dir.join("etcd-client.key").display()))
        .args(["watch", key])
        .env("ETCDCTL_API", "3")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("etcdctl watch starts");
    let mut lines = BufReader::new(watch.stdout.take().expect("stdout")).lines();
    // The watch is registered once etcdctl has connected: put until it reports.
    let mut seen = Vec::new();
    for attempt in 0..50 {
        let value = format!("watched-{attempt}");
        etcdctl(&f.dir, port, &["put", key, &value]).await;
        let next = tokio::time::timeout(Duration::from_millis(300), lines.next_line()).await;
        if let Ok(Ok(Some(line))) = next {
            seen.push(line);
            break;
        }
    }
    // etcdctl prints the event type, the key, then the value, a line each.
    assert_eq!(seen.first().map(String::as_str), Some("PUT"), "{seen:?}");
    let key_line = tokio::time::timeout(Duration::from_secs(5), lines.next_line()).await;
    assert!(
        matches!(key_line, Ok(Ok(Some(ref k))) if k == key),
        "{key_line:?}"
    );
    let _ = watch.kill().await;
}

#[tokio::test]
async fn kubectl_port_forward_over_spdy_in_websocket_reaches_etcd() {
    let f = fixture("pfw", 23600..=23610).await;
    let protocol = "SPDY/3.1+portforward.k8s.io";
    let before = sessions(&f.client, protocol).await;
    etcdctl_through_kubectl(&f, true).await;
    assert_eq!(sessions(&f.client, protocol).await, before + 1);
    assert_eq!(
        sessions(&f.client, "SPDY/3.1").await,
        0,
        "kubectl fell back"
    );
}

#[tokio::test]
async fn kubectl_port_forward_over_plain_spdy_reaches_etcd() {
    let f = fixture("pfs", 23611..=23620).await;
    etcdctl_through_kubectl(&f, false).await;
    assert_eq!(sessions(&f.client, "SPDY/3.1").await, 1);
    assert_eq!(sessions(&f.client, "SPDY/3.1+portforward.k8s.io").await, 0);
}

#[tokio::test]
async fn kubectl_port_forward_reaches_a_control_planes_api_server_and_reports_errors() {
    let f = fixture("pfa", 23621..=23630).await;
    for websockets in [true, false] {
        let node = "pfa-control-plane-2";
        let (mut kubectl, port) =
            port_forward(&f.dir, websockets, &format!("kube-apiserver-{node}"), 6443).await;
        // kubectl through kubectl: the forwarded API server serves the same cluster.
        let out = Command::new("kubectl")
            .arg(format!(
                "--kubeconfig={}",
                f.dir.join("kubeconfig").display()
            ))
            .arg(format!("--server=https://127.0.0.1:{port}"))
            .args(["get", "nodes", "-o", "name"])
            .output()
            .await
            .expect("kubectl runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("node/{node}")));
        let _ = kubectl.kill().await;

        // Nothing listens on 2379 in the API server's pod: the error travels back on the
        // error stream and kubectl reports it, rather than hanging.
        let (kubectl, port) =
            port_forward(&f.dir, websockets, &format!("kube-apiserver-{node}"), 2379).await;
        let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("kubectl accepts");
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(
            Duration::from_secs(20),
            tokio::io::AsyncReadExt::read(&mut conn, &mut buf),
        )
        .await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "the forward is closed, not hung"
        );
        drop(conn);
        let mut kubectl = kubectl;
        let _ = kubectl.kill().await;
        let out = kubectl.wait_with_output().await.expect("kubectl output");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("nothing listens there"), "{stderr}");
    }
}

#[tokio::test]
async fn a_thousand_connections_through_kubectl_leave_no_task_behind() {
    let f = fixture("pfl", 23631..=23640).await;
    for websockets in [true, false] {
        let (mut kubectl, port) =
            port_forward(&f.dir, websockets, "etcd-pfl-control-plane-0", 2379).await;
        let connect_and_close = |n: usize| async move {
            for _ in 0..n {
                let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .expect("kubectl accepts");
                // A byte of a TLS record, so the stream pair surely exists, then goodbye.
                let _ = tokio::io::AsyncWriteExt::write_all(&mut conn, &[0x16]).await;
                drop(conn);
            }
        };
        let what = format!("connections through kubectl (websockets={websockets})");
        common::leaves_no_task(&what, connect_and_close).await;
        let _ = kubectl.kill().await;
    }
}
