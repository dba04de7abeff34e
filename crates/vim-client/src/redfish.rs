//! The Redfish service infrasim's vCenter simulators serve beside `/sdk` (a BMC per VM, see
//! `infrasim_vsphere_sim::bmc`), reached over the same connection and trust: what a
//! controller that makes VMs into hosts needs of it (their BMC accounts). A real vCenter has
//! no such service; against one these calls fail with a 404.

use crate::{Client, Error, Result};
use bytes::Bytes;
use http_body_util::Full;
use serde_json::{json, Value};

impl Client {
    /// The address of the system VM `name` on this server's Redfish service, as a
    /// BareMetalHost's `bmc.address` names it.
    pub fn redfish_system_address(&self, name: &str) -> String {
        let base = self.base();
        let authority = base.strip_prefix("https://").unwrap_or(&base);
        let name = percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC);
        format!("redfish+https://{authority}/redfish/v1/Systems/{name}")
    }

    /// One Redfish request as this client's user (HTTP Basic): the status and JSON body.
    pub async fn redfish(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(http::StatusCode, Value)> {
        use base64::Engine;
        let c = self.credentials();
        let basic = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", c.username, c.password));
        let payload = body.as_ref().map(Value::to_string).unwrap_or_default();
        let request = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base()))
            .header(http::header::AUTHORIZATION, format!("Basic {basic}"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(payload)))
            .map_err(|e| Error::Config(e.to_string()))?;
        let (status, _, bytes) = self.send(request).await?;
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .map_err(|e| Error::Answer(format!("HTTP {status} from {path}: not JSON: {e}")))?
        };
        Ok((status, value))
    }

    /// Makes sure the Redfish service has an account `user` with `password` and `role`
    /// (made, or its password and role set), as this client's user (its administrator).
    pub async fn ensure_redfish_account(
        &self,
        user: &str,
        password: &str,
        role: &str,
    ) -> Result<()> {
        const ACCOUNTS: &str = "/redfish/v1/AccountService/Accounts";
        let (status, list) = self.redfish(http::Method::GET, ACCOUNTS, None).await?;
        check(status, &list, ACCOUNTS)?;
        let members = list["Members"].as_array().cloned().unwrap_or_default();
        for member in members {
            let Some(path) = member["@odata.id"].as_str() else {
                continue;
            };
            let (status, account) = self.redfish(http::Method::GET, path, None).await?;
            check(status, &account, path)?;
            if account["UserName"] == user {
                let patch = json!({"Password": password, "RoleId": role, "Enabled": true});
                let (status, body) = self.redfish(http::Method::PATCH, path, Some(patch)).await?;
                return check(status, &body, path);
            }
        }
        let new = json!({"UserName": user, "Password": password, "RoleId": role});
        let (status, body) = self
            .redfish(http::Method::POST, ACCOUNTS, Some(new))
            .await?;
        check(status, &body, ACCOUNTS)
    }
}

/// A Redfish answer's error as a fault: its message id and message.
fn check(status: http::StatusCode, body: &Value, path: &str) -> Result<()> {
    if status.is_success() {
        return Ok(());
    }
    let info = &body["error"]["@Message.ExtendedInfo"][0];
    Err(Error::Fault {
        kind: info["MessageId"]
            .as_str()
            .map_or_else(|| format!("HTTP {status}"), str::to_string),
        message: format!("{path}: {}", info["Message"].as_str().unwrap_or("")),
    })
}
