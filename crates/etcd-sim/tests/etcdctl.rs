//! etcdctl 3.4 (Debian's etcd-client), a client nobody here wrote, against a simulated
//! three-member cluster served over TLS with client certificates, as kubeadm runs etcd.

use infrasim_etcd_sim::pb::etcdserverpb::AlarmType;
use infrasim_etcd_sim::{serve, tls_config, EtcdCluster, MemberService};
use infrasim_kube_api::pki::CertificateAuthority;
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// A cluster of three started members, each served on its own loopback port, and the files
/// etcdctl needs to reach them.
struct Fixture {
    cluster: EtcdCluster,
    ids: Vec<u64>,
    endpoints: Vec<String>,
    dir: PathBuf,
    /// Removes `dir` (certificates, snapshots, a restored etcd's data) when the test ends.
    _files: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn three_members() -> Fixture {
    let ca = CertificateAuthority::generate("etcd-ca").expect("a CA");
    let serving = ca
        .serving_cert(
            "etcd",
            &["localhost".into()],
            &[IpAddr::V4(Ipv4Addr::LOCALHOST)],
        )
        .expect("a serving certificate");
    let client = ca
        .client_cert("kube-apiserver-etcd-client", &[])
        .expect("a client certificate");
    let files = tempfile::Builder::new()
        .prefix("etcdctl-")
        .tempdir()
        .expect("a temp dir");
    let dir = files.path().to_path_buf();
    std::fs::write(dir.join("ca.crt"), &ca.cert_pem).expect("write");
    std::fs::write(dir.join("client.crt"), &client.cert_pem).expect("write");
    std::fs::write(dir.join("client.key"), &client.key_pem).expect("write");
    let tls = tls_config(&ca.cert_pem, &serving.cert_pem, &serving.key_pem).expect("TLS");
    let cluster = EtcdCluster::new(infrasim_clock::SystemClock::shared());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let stopped = futures::future::FutureExt::shared(async move {
        let _ = stopped.await;
    });
    let mut ids = Vec::new();
    let mut endpoints = Vec::new();
    for name in ["cp-0", "cp-1", "cp-2"] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!(
            "https://127.0.0.1:{}",
            listener.local_addr().expect("addr").port()
        );
        let id = cluster.start_member(name, &format!("https://{name}:2380"), &url);
        let routes = MemberService::new(cluster.clone(), id).routes();
        tokio::spawn(serve(routes, listener, tls.clone(), stopped.clone()));
        ids.push(id);
        endpoints.push(url);
    }
    Fixture {
        cluster,
        ids,
        endpoints,
        dir,
        _files: files,
        _stop: stop,
    }
}

impl Fixture {
    fn etcdctl(&self, endpoint: usize) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("etcdctl");
        cmd.env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoints[endpoint]))
            .arg(format!("--cacert={}", self.dir.join("ca.crt").display()))
            .arg(format!("--cert={}", self.dir.join("client.crt").display()))
            .arg(format!("--key={}", self.dir.join("client.key").display()))
            .arg("--command-timeout=10s")
            .kill_on_drop(true);
        cmd
    }

    /// Runs etcdctl against member `endpoint`; its stdout, or the test fails with stderr.
    async fn run(&self, endpoint: usize, args: &[&str]) -> String {
        let out = self
            .etcdctl(endpoint)
            .args(args)
            .output()
            .await
            .expect("etcdctl runs (Debian's etcd-client; scripts/test-all installs it)");
        assert!(
            out.status.success(),
            "etcdctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    async fn json(&self, endpoint: usize, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-w", "json"]);
        let out = self.run(endpoint, &all).await;
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    }
}

#[tokio::test]
async fn member_list_and_endpoint_status_report_the_members_as_etcd_does() {
    let f = three_members().await;
    let list = f.json(1, &["member", "list"]).await;
    let members = list["members"].as_array().expect("members");
    let mut names: Vec<&str> = members.iter().filter_map(|m| m["name"].as_str()).collect();
    names.sort();
    assert_eq!(names, ["cp-0", "cp-1", "cp-2"]);
    let mut ids: Vec<u64> = members.iter().filter_map(|m| m["ID"].as_u64()).collect();
    ids.sort();
    let mut want = f.ids.clone();
    want.sort();
    assert_eq!(ids, want);
    assert_eq!(list["header"]["member_id"].as_u64(), Some(f.ids[1]));

    let status = f.json(2, &["endpoint", "status"]).await;
    let status = &status[0]["Status"];
    assert_eq!(status["version"], "3.5.16");
    assert_eq!(status["leader"].as_u64(), Some(f.ids[0]));
    assert_eq!(status["header"]["member_id"].as_u64(), Some(f.ids[2]));
    assert_eq!(status["raftTerm"].as_u64(), Some(1));

    let health = f
        .etcdctl(0)
        .args(["endpoint", "health"])
        .output()
        .await
        .expect("runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&health.stdout),
        String::from_utf8_lossy(&health.stderr)
    );
    assert!(
        health.status.success() && said.contains("is healthy"),
        "{said}"
    );
}

#[tokio::test]
async fn keys_are_put_read_watched_and_leased() {
    let f = three_members().await;
    let mut watch = f
        .etcdctl(1)
        .args(["watch", "--prefix", "app/"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("etcdctl watch starts");
    let mut lines = BufReader::new(watch.stdout.take().expect("stdout")).lines();
    // The watch is registered once etcdctl has connected; puts retried until it reports.
    let mut seen = Vec::new();
    for attempt in 0..50 {
        assert_eq!(
            f.run(0, &["put", "app/a", &format!("v{attempt}")])
                .await
                .trim(),
            "OK"
        );
        if let Ok(Ok(Some(line))) =
            tokio::time::timeout(Duration::from_millis(200), lines.next_line()).await
        {
            seen.push(line);
            break;
        }
    }
    for _ in 0..2 {
        let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
            .await
            .expect("the watch reports the put")
            .expect("read")
            .expect("a line");
        seen.push(line);
    }
    assert_eq!(seen[0], "PUT");
    assert_eq!(seen[1], "app/a");

    assert_eq!(
        f.run(2, &["get", "app/a", "--print-value-only"])
            .await
            .trim()
            .chars()
            .next(),
        Some('v')
    );
    let lease = f.run(0, &["lease", "grant", "60"]).await;
    let id = lease
        .split_whitespace()
        .nth(1)
        .expect("lease <id> granted")
        .to_string();
    f.run(0, &["put", "--lease", &id, "app/leased", "x"]).await;
    let ttl = f.run(0, &["lease", "timetolive", &id, "--keys"]).await;
    assert!(ttl.contains("app/leased"), "{ttl}");
    f.run(0, &["lease", "revoke", &id]).await;
    assert_eq!(f.run(1, &["get", "app/leased"]).await, "");
    assert_eq!(f.run(1, &["del", "app/a"]).await.trim(), "1");
}

#[tokio::test]
async fn alarms_leader_moves_and_member_removal() {
    let f = three_members().await;
    f.cluster
        .lock()
        .members
        .activate_alarm(f.ids[1], AlarmType::Nospace);
    let alarms = f.run(0, &["alarm", "list"]).await;
    assert!(alarms.contains("alarm:NOSPACE"), "{alarms}");
    f.run(0, &["alarm", "disarm"]).await;
    assert_eq!(f.run(0, &["alarm", "list"]).await, "");

    // MoveLeader goes to the leader; any other member refuses.
    let target = format!("{:x}", f.ids[2]);
    let refused = f
        .etcdctl(1)
        .args(["move-leader", &target])
        .output()
        .await
        .expect("runs");
    assert!(!refused.status.success());
    let moved = f
        .etcdctl(0)
        .args([
            "--endpoints",
            &f.endpoints.join(","),
            "move-leader",
            &target,
        ])
        .output()
        .await
        .expect("runs");
    assert!(
        moved.status.success(),
        "{}",
        String::from_utf8_lossy(&moved.stderr)
    );
    assert_eq!(f.cluster.leader(), Some(f.ids[2]));

    let removed = format!("{:x}", f.ids[0]);
    let out = f.run(2, &["member", "remove", &removed]).await;
    assert!(out.contains("removed from cluster"), "{out}");
    let list = f.json(2, &["member", "list"]).await;
    assert_eq!(list["members"].as_array().map(Vec::len), Some(2));
    // The removed member's own endpoint no longer serves.
    let gone = f
        .etcdctl(0)
        .args(["member", "list"])
        .output()
        .await
        .expect("runs");
    assert!(!gone.status.success());
}

#[tokio::test]
async fn a_snapshot_saves_and_reads_back_as_etcds_backend_file() {
    let f = three_members().await;
    for (k, v) in [("a", "1"), ("b", "2"), ("a", "3")] {
        f.run(0, &["put", k, v]).await;
    }
    let path = f.dir.join("snap.db");
    let path = path.to_str().expect("a UTF-8 path");
    f.run(1, &["snapshot", "save", path]).await;
    let out = tokio::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["snapshot", "status", path, "-w", "json"])
        .output()
        .await
        .expect("etcdctl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    // Two live keys (a at revision 4, b at 3) and the meta bucket's entry.
    assert_eq!(status["revision"].as_i64(), Some(4), "{status}");
    assert_eq!(status["totalKey"].as_i64(), Some(3), "{status}");
}

/// A port nobody listens on now.
async fn free_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    listener.local_addr().expect("addr").port()
}

#[tokio::test]
async fn a_snapshot_restores_into_debians_etcd_which_then_serves_its_keys() {
    let f = three_members().await;
    for (k, v) in [("/a", "1"), ("/b", "2"), ("/a", "3")] {
        f.run(0, &["put", k, v]).await;
    }
    let snapshot = f.dir.join("restore.db");
    let data = f.dir.join("restored");
    f.run(2, &["snapshot", "save", &snapshot.to_string_lossy()])
        .await;
    let (client, peer) = (free_port().await, free_port().await);
    let peer_url = format!("http://127.0.0.1:{peer}");
    let client_url = format!("http://127.0.0.1:{client}");
    let cluster = format!("restored={peer_url}");
    let restore = tokio::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["snapshot", "restore", &snapshot.to_string_lossy()])
        .arg(format!("--data-dir={}", data.display()))
        .args(["--name=restored", &format!("--initial-cluster={cluster}")])
        .arg(format!("--initial-advertise-peer-urls={peer_url}"))
        .output()
        .await
        .expect("etcdctl runs");
    assert!(
        restore.status.success(),
        "{}",
        String::from_utf8_lossy(&restore.stderr)
    );
    let _etcd = tokio::process::Command::new("etcd")
        .arg(format!("--data-dir={}", data.display()))
        .args(["--name=restored", &format!("--initial-cluster={cluster}")])
        .arg(format!("--listen-peer-urls={peer_url}"))
        .arg(format!("--initial-advertise-peer-urls={peer_url}"))
        .arg(format!("--listen-client-urls={client_url}"))
        .arg(format!("--advertise-client-urls={client_url}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("etcd runs (Debian's etcd-server; scripts/test-all installs it)");
    let get = || {
        tokio::process::Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={client_url}"))
            .args(["get", "--prefix", "/", "-w", "json"])
            .output()
    };
    let mut answer = None;
    for _ in 0..100 {
        match get().await {
            Ok(out) if out.status.success() => {
                answer = Some(out.stdout);
                break;
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
    let answer: Value =
        serde_json::from_slice(&answer.expect("the restored etcd answers")).expect("JSON");
    let kvs: Vec<(String, String)> = answer["kvs"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|kv| {
            let text = |field: &str| {
                let b64 = kv[field].as_str().unwrap_or("");
                // etcdctl's JSON carries keys and values in base64.
                use base64::Engine;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .unwrap_or_default();
                String::from_utf8(bytes).unwrap_or_default()
            };
            (text("key"), text("value"))
        })
        .collect();
    assert_eq!(
        kvs,
        [
            ("/a".to_string(), "3".to_string()),
            ("/b".into(), "2".into())
        ]
    );
    // The keys keep their history's revisions: /a last written at 4, /b at 3.
    let revisions: Vec<i64> = answer["kvs"]
        .as_array()
        .map(|kvs| {
            kvs.iter()
                .filter_map(|kv| kv["mod_revision"].as_i64())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(revisions, [4, 3]);
}
