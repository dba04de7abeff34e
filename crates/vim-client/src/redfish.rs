//! The Redfish service infrasim's vCenter simulators serve beside `/sdk` (a BMC per VM, see
//! `infrasim_vsphere_sim::bmc`), reached over the same connection and trust: what a
//! controller that makes VMs into hosts needs of it (their BMC accounts). A real vCenter has
//! no such service; against one these calls fail with a 404.

use crate::{Client, Error, Result};
use bytes::Bytes;
use http_body_util::Full;
use serde_json::{json, Value};

impl Client {
    /// The server's host and port (where its Redfish service listens too).
    pub fn authority(&self) -> String {
        let base = self.base();
        base.strip_prefix("https://").unwrap_or(&base).to_string()
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
    /// Whether there is a Redfish service at all (a real vCenter has none: nothing to do).
    /// The client's own user is left as it is, and must have that password.
    pub async fn ensure_redfish_account(
        &self,
        user: &str,
        password: &str,
        role: &str,
    ) -> Result<bool> {
        const ACCOUNTS: &str = "/redfish/v1/AccountService/Accounts";
        let own = self.credentials();
        if user == own.username {
            if password != own.password {
                return Err(Error::Config(format!(
                    "{user} is the vCenter's administrator, whose password is another"
                )));
            }
            return Ok(true);
        }
        let (status, list) = self.redfish(http::Method::GET, ACCOUNTS, None).await?;
        if status == http::StatusCode::NOT_FOUND {
            return Ok(false);
        }
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
                return check(status, &body, path).map(|()| true);
            }
        }
        let new = json!({"UserName": user, "Password": password, "RoleId": role});
        let (status, body) = self
            .redfish(http::Method::POST, ACCOUNTS, Some(new))
            .await?;
        check(status, &body, ACCOUNTS).map(|()| true)
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
