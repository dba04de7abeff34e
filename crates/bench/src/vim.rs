//! A small vim25 SOAP client for the benchmarks: one keep-alive connection with its session
//! cookie, a logged-in session and the service content it needs, the calls the loads make
//! (retrieve, list through a view, clone and wait for the task), and a scan for leaf texts
//! in the answers. Both servers of `bench vsphere` and the vcsim controller's `bench vcsim`
//! are driven through it.

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

pub(crate) const USER: &str = "administrator@vsphere.local";
pub(crate) const PASSWORD: &str = "bench-password";

/// The managed objects a session needs from the service content.
#[derive(Debug, Clone)]
pub(crate) struct Content {
    pub(crate) search_index: String,
    session_manager: String,
    pub(crate) property_collector: String,
    pub(crate) view_manager: String,
    pub(crate) root_folder: String,
}

impl Content {
    /// RetrieveServiceContent's references.
    pub(crate) async fn read(conn: &mut Conn) -> anyhow::Result<Content> {
        let body = conn.call(RETRIEVE_CONTENT).await?;
        Ok(Content {
            search_index: text_of(&body, "searchIndex")?,
            session_manager: text_of(&body, "sessionManager")?,
            property_collector: text_of(&body, "propertyCollector")?,
            view_manager: text_of(&body, "viewManager")?,
            root_folder: text_of(&body, "rootFolder")?,
        })
    }
}

/// Polls until the server answers RetrieveServiceContent (or exits).
pub(crate) async fn wait_for_service(
    connector: &tokio_rustls::TlsConnector,
    addr: SocketAddr,
    child: &mut tokio::process::Child,
) -> anyhow::Result<Content> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("the server exited while starting: {status}");
        }
        let answer = match Conn::open(connector, addr).await {
            Ok(mut conn) => Content::read(&mut conn).await,
            Err(e) => Err(e),
        };
        match answer {
            Ok(content) => return Ok(content),
            Err(e) if Instant::now() > deadline => {
                return Err(e.context("the server did not answer in 10 minutes"))
            }
            Err(_) => {}
        }
        // Often enough that the poll adds little to a start of a few milliseconds; tokio's
        // timer counts whole milliseconds, so this blocks its worker for the short wait.
        std::thread::sleep(Duration::from_micros(250));
    }
}

pub(crate) const CURRENT_TIME: &str = r#"<CurrentTime xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></CurrentTime>"#;

const RETRIEVE_CONTENT: &str = r#"<RetrieveServiceContent xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></RetrieveServiceContent>"#;

/// One HTTP/1.1 keep-alive connection with a session cookie.
pub(crate) struct Conn {
    send: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    cookie: Option<String>,
}

impl Conn {
    pub(crate) async fn open(
        connector: &tokio_rustls::TlsConnector,
        addr: SocketAddr,
    ) -> anyhow::Result<Conn> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let tls = connector
            .connect(ServerName::try_from("localhost")?.to_owned(), tcp)
            .await?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        tokio::spawn(conn);
        Ok(Conn { send, cookie: None })
    }

    /// Posts one SOAP body; the answer's XML, or the fault as an error.
    pub(crate) async fn call(&mut self, body: &str) -> anyhow::Result<String> {
        let envelope = format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
        );
        let mut req = http::Request::post("/sdk")
            .header(http::header::HOST, "localhost")
            .header(http::header::CONTENT_TYPE, "text/xml; charset=utf-8")
            .header("SOAPAction", "\"urn:vim25/7.0.3.0\"");
        if let Some(c) = &self.cookie {
            req = req.header(http::header::COOKIE, c.as_str());
        }
        self.send.ready().await.context("the connection closed")?;
        let resp = self
            .send
            .send_request(req.body(Full::new(Bytes::from(envelope)))?)
            .await?;
        if let Some(set) = resp.headers().get(http::header::SET_COOKIE) {
            let set = set.to_str()?;
            self.cookie = Some(set.split(';').next().unwrap_or(set).to_string());
        }
        let status = resp.status();
        let text = String::from_utf8(resp.into_body().collect().await?.to_bytes().to_vec())?;
        if !status.is_success() || text.contains("<faultstring>") {
            let fault =
                text_of(&text, "faultstring").unwrap_or_else(|_| text.chars().take(300).collect());
            anyhow::bail!("SOAP fault ({status}): {fault}");
        }
        Ok(text)
    }
}

/// A logged-in client of one server.
pub(crate) struct Session {
    pub(crate) conn: Conn,
    pub(crate) content: Content,
}

impl Session {
    pub(crate) async fn login(
        connector: &tokio_rustls::TlsConnector,
        addr: SocketAddr,
        content: &Content,
    ) -> anyhow::Result<Session> {
        Session::login_as(connector, addr, content, USER, PASSWORD).await
    }

    /// Logs in as `user` (the password is XML-escaped as a client would).
    pub(crate) async fn login_as(
        connector: &tokio_rustls::TlsConnector,
        addr: SocketAddr,
        content: &Content,
        user: &str,
        password: &str,
    ) -> anyhow::Result<Session> {
        let mut conn = Conn::open(connector, addr).await?;
        let escape = |s: &str| {
            s.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
        };
        conn.call(&format!(
            r#"<Login xmlns="urn:vim25"><_this type="SessionManager">{}</_this><userName>{}</userName><password>{}</password></Login>"#,
            content.session_manager,
            escape(user),
            escape(password)
        ))
        .await?;
        anyhow::ensure!(conn.cookie.is_some(), "Login set no session cookie");
        Ok(Session {
            conn,
            content: content.clone(),
        })
    }

    /// RetrievePropertiesEx of `paths` of one object.
    pub(crate) async fn retrieve(
        &mut self,
        ty: &str,
        value: &str,
        paths: &[&str],
    ) -> anyhow::Result<String> {
        let paths: String = paths
            .iter()
            .map(|p| format!("<pathSet>{p}</pathSet>"))
            .collect();
        self.conn
            .call(&format!(
                r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">{}</_this><specSet><propSet><type>{ty}</type>{paths}</propSet><objectSet><obj type="{ty}">{value}</obj></objectSet></specSet><options/></RetrievePropertiesEx>"#,
                self.content.property_collector
            ))
            .await
    }

    pub(crate) async fn retrieve_vm(&mut self, vm: &str) -> anyhow::Result<()> {
        let body = self
            .retrieve(
                "VirtualMachine",
                vm,
                &["name", "runtime.powerState", "config.uuid"],
            )
            .await?;
        anyhow::ensure!(
            body.contains("powerState"),
            "RetrievePropertiesEx answered no powerState"
        );
        Ok(())
    }

    pub(crate) async fn parent_folder(&mut self, vm: &str) -> anyhow::Result<String> {
        let body = self.retrieve("VirtualMachine", vm, &["parent"]).await?;
        text_of(&body, "val")
    }

    /// Every VM's reference, through a container view over the root folder, with its name and
    /// power state retrieved; the view is destroyed after.
    /// A container view over every VM (the root folder, recursive), made in this session.
    pub(crate) async fn vm_view(&mut self) -> anyhow::Result<String> {
        let c = &self.content;
        let body = format!(
            r#"<CreateContainerView xmlns="urn:vim25"><_this type="ViewManager">{}</_this><container type="Folder">{}</container><type>VirtualMachine</type><recursive>true</recursive></CreateContainerView>"#,
            c.view_manager, c.root_folder
        );
        text_of(&self.conn.call(&body).await?, "returnval")
    }

    pub(crate) async fn list_vms(&mut self) -> anyhow::Result<Vec<String>> {
        let view = self.vm_view().await?;
        let mut body = self
            .conn
            .call(&format!(
                r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">{}</_this><specSet>{}</specSet><options/></RetrievePropertiesEx>"#,
                self.content.property_collector,
                vm_view_spec(&view)
            ))
            .await?;
        let mut vms = Vec::new();
        loop {
            vms.extend(texts_of(&body, "obj"));
            let Ok(token) = text_of(&body, "token") else {
                break;
            };
            body = self.conn.call(&format!(
                r#"<ContinueRetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">{}</_this><token>{token}</token></ContinueRetrievePropertiesEx>"#,
                self.content.property_collector
            )).await?;
        }
        self.conn
            .call(&format!(r#"<DestroyView xmlns="urn:vim25"><_this type="ContainerView">{view}</_this></DestroyView>"#))
            .await?;
        Ok(vms)
    }

    /// Clones `vm` into `folder` as `name` and waits for the task as pyvmomi's `WaitForTask`
    /// does: a filter on its `info.state`, WaitForUpdatesEx until it ends, the filter
    /// destroyed.
    pub(crate) async fn clone_vm(
        &mut self,
        vm: &str,
        folder: &str,
        name: &str,
    ) -> anyhow::Result<()> {
        let task = text_of(
            &self
                .conn
                .call(&format!(
                    r#"<CloneVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this><folder type="Folder">{folder}</folder><name>{name}</name><spec><location/><template>false</template><powerOn>false</powerOn></spec></CloneVM_Task>"#
                ))
                .await?,
            "returnval",
        )?;
        let pc = self.content.property_collector.clone();
        let filter = text_of(
            &self
                .conn
                .call(&format!(
                    r#"<CreateFilter xmlns="urn:vim25"><_this type="PropertyCollector">{pc}</_this><spec><propSet><type>Task</type><pathSet>info.state</pathSet><pathSet>info.error</pathSet></propSet><objectSet><obj type="Task">{task}</obj></objectSet></spec><partialUpdates>false</partialUpdates></CreateFilter>"#
                ))
                .await?,
            "returnval",
        )?;
        let mut version = String::new();
        let outcome = loop {
            let body = self
                .conn
                .call(&format!(
                    r#"<WaitForUpdatesEx xmlns="urn:vim25"><_this type="PropertyCollector">{pc}</_this><version>{version}</version><options><maxWaitSeconds>60</maxWaitSeconds></options></WaitForUpdatesEx>"#
                ))
                .await?;
            if let Ok(v) = text_of(&body, "version") {
                version = v;
            }
            if body.contains(">success<") {
                break Ok(());
            }
            if body.contains(">error<") {
                break Err(anyhow::anyhow!("clone {name} failed"));
            }
        };
        self.conn
            .call(&format!(
                r#"<DestroyPropertyFilter xmlns="urn:vim25"><_this type="PropertyFilter">{filter}</_this></DestroyPropertyFilter>"#
            ))
            .await?;
        outcome
    }
}

/// A filter spec (its `propSet` and `objectSet`) asking every VM of the container view `view`
/// its name and power state.
pub(crate) fn vm_view_spec(view: &str) -> String {
    format!(
        r#"<propSet><type>VirtualMachine</type><pathSet>name</pathSet><pathSet>runtime.powerState</pathSet></propSet><objectSet><obj type="ContainerView">{view}</obj><skip>true</skip><selectSet xsi:type="TraversalSpec"><name>view</name><type>ContainerView</type><path>view</path><skip>false</skip></selectSet></objectSet>"#
    )
}

/// The text of the first element named `tag` (any attributes) in `xml`.
pub(crate) fn text_of(xml: &str, tag: &str) -> anyhow::Result<String> {
    texts_of(xml, tag)
        .into_iter()
        .next()
        .with_context(|| format!("no <{tag}> in the answer"))
}

/// The texts of every element named `tag` (without a namespace prefix) in `xml`. A scan, not
/// a parser: the answers are the servers' own well-formed SOAP, and the bench only needs leaf
/// texts such as references and tokens.
fn texts_of(xml: &str, tag: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = xml;
    let open = format!("<{tag}");
    while let Some(i) = rest.find(&open) {
        rest = &rest[i + open.len()..];
        // `<tag>` or `<tag attr…>`, not `<tagOther…>`.
        if !rest.starts_with('>') && !rest.starts_with(' ') {
            continue;
        }
        let Some(start) = rest.find('>') else { break };
        let Some(end) = rest[start..].find('<') else {
            break;
        };
        out.push(rest[start + 1..start + end].to_string());
        rest = &rest[start + end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_read_by_exact_tag() {
        let xml = r#"<returnval><obj type="VirtualMachine">vm-1</obj><objSet>x</objSet><obj type="VirtualMachine">vm-2</obj><token>7</token></returnval>"#;
        assert_eq!(texts_of(xml, "obj"), ["vm-1", "vm-2"]);
        assert_eq!(text_of(xml, "token").unwrap(), "7");
        assert!(text_of(xml, "missing").is_err());
    }
}
