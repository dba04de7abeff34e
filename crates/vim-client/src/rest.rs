//! The vSphere Automation API (`/rest`, the spelling govmomi's `vapi/rest` client and CAPV
//! speak) beside SOAP, for what SOAP does not offer: cluster modules, the anti-affinity
//! groups CAPV keeps a control plane's and a MachineDeployment's VMs in, and tags, which CAPV
//! attaches to the VMs it makes.
//!
//! It has a session of its own (`POST /rest/com/vmware/cis/session` with the same user's
//! basic credentials, answered with a token sent back as `vmware-api-session-id`), logged in
//! on first use and again when the server forgets it (401), as the SOAP session is.

use crate::{Client, Error, Moref, Result};
use bytes::Bytes;
use http_body_util::Full;
use serde_json::{json, Value};

const SESSION_HEADER: &str = "vmware-api-session-id";

impl Client {
    fn rest_token(&self) -> Option<String> {
        self.rest_token
            .read()
            .map(|t| t.clone())
            .unwrap_or_default()
    }

    async fn rest_login(&self) -> Result<String> {
        use base64::Engine;
        let c = self.credentials();
        let basic = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", c.username, c.password));
        let request = http::Request::post(format!("{}/rest/com/vmware/cis/session", self.base()))
            .header(http::header::AUTHORIZATION, format!("Basic {basic}"))
            .body(Full::new(Bytes::new()))
            .map_err(|e| Error::Config(e.to_string()))?;
        let (status, _, body) = self.send(request).await?;
        let value = answer(status, &body)?;
        let token = value
            .as_str()
            .ok_or_else(|| Error::Answer("the REST login returned no token".into()))?
            .to_string();
        if let Ok(mut t) = self.rest_token.write() {
            *t = Some(token.clone());
        }
        Ok(token)
    }

    /// One vAPI call (`path` after `/rest`, with its query): the answer's `value`. A server
    /// that forgot the session gets one login again.
    pub async fn rest(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let mut token = match self.rest_token() {
            Some(t) => t,
            None => self.rest_login().await?,
        };
        for attempt in 0..2 {
            let payload = body.as_ref().map(Value::to_string).unwrap_or_default();
            let request = http::Request::builder()
                .method(method.clone())
                .uri(format!("{}/rest{path}", self.base()))
                .header(SESSION_HEADER, &token)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(payload)))
                .map_err(|e| Error::Config(e.to_string()))?;
            let (status, _, bytes) = self.send(request).await?;
            if status == http::StatusCode::UNAUTHORIZED && attempt == 0 {
                token = self.rest_login().await?;
                continue;
            }
            return answer(status, &bytes);
        }
        Err(Error::Answer(
            "the REST session could not be renewed".into(),
        ))
    }

    /// Makes a cluster module in the compute cluster `cluster`; its ID.
    pub async fn create_cluster_module(&self, cluster: &Moref) -> Result<String> {
        let value = self
            .rest(
                http::Method::POST,
                "/vcenter/cluster/modules",
                Some(json!({"spec": {"cluster": cluster.value}})),
            )
            .await?;
        value
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| Error::Answer(format!("a module ID, not {value}")))
    }

    /// The VMs of a module; `None` when there is no such module.
    pub async fn cluster_module_members(&self, module: &str) -> Result<Option<Vec<String>>> {
        let path = format!("/vcenter/cluster/modules/vm/{module}/members");
        match self.rest(http::Method::GET, &path, None).await {
            Ok(v) => Ok(Some(
                v["vms"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|vm| vm.as_str().map(str::to_string))
                    .collect(),
            )),
            Err(e) if e.fault_kind() == Some("not_found") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Adds (`add`) a VM to a module or takes it out (`remove`).
    pub async fn change_cluster_module(
        &self,
        module: &str,
        action: &str,
        vm: &Moref,
    ) -> Result<()> {
        let path = format!("/vcenter/cluster/modules/vm/{module}/members?~action={action}");
        self.rest(http::Method::POST, &path, Some(json!({"vms": [vm.value]})))
            .await
            .map(drop)
    }

    /// Deletes a module; one already gone is not an error.
    pub async fn delete_cluster_module(&self, module: &str) -> Result<()> {
        let path = format!("/vcenter/cluster/modules/{module}");
        match self.rest(http::Method::DELETE, &path, None).await {
            Err(e) if e.fault_kind() != Some("not_found") => Err(e),
            _ => Ok(()),
        }
    }
}

impl Client {
    /// Attaches tags (by ID) to an object, as govmomi's tag manager does for CAPV's
    /// `tagIDs`; a tag that cannot be attached (unknown, or refused by its category) fails.
    pub async fn attach_tags(&self, tags: &[String], obj: &Moref) -> Result<()> {
        let body = json!({"object_id": {"id": obj.value, "type": obj.ty}, "tag_ids": tags});
        let value = self
            .rest(
                http::Method::POST,
                "/com/vmware/cis/tagging/tag-association?~action=attach-multiple-tags-to-object",
                Some(body),
            )
            .await?;
        if value["success"] == json!(false) {
            let message = value["error_messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| {
                    e.pointer("/value/messages/0/default_message")
                        .and_then(Value::as_str)
                })
                .collect::<Vec<_>>()
                .join("; ");
            return Err(Error::Fault {
                kind: "tagging".into(),
                message,
            });
        }
        Ok(())
    }

    /// The IDs of the tags attached to an object.
    pub async fn attached_tags(&self, obj: &Moref) -> Result<Vec<String>> {
        let body = json!({"object_id": {"id": obj.value, "type": obj.ty}});
        let value = self
            .rest(
                http::Method::POST,
                "/com/vmware/cis/tagging/tag-association?~action=list-attached-tags",
                Some(body),
            )
            .await?;
        Ok(value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t.as_str().map(str::to_string))
            .collect())
    }
}

impl Client {
    /// The ID of the tag named `tag` in the category named `category`, as govmomi's
    /// `GetTagForCategory` finds it (CAPV's check of a failure domain's region and zone);
    /// `None` when either does not exist.
    pub async fn tag_in_category(&self, tag: &str, category: &str) -> Result<Option<String>> {
        let Some(category) = self.named("category", category, None).await? else {
            return Ok(None);
        };
        self.named("tag", tag, Some(&category)).await
    }

    /// The names of the tags attached to an object (govmomi's `HasTag` compares names).
    pub async fn attached_tag_names(&self, obj: &Moref) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for id in self.attached_tags(obj).await? {
            let path = format!("/com/vmware/cis/tagging/tag/id:{id}");
            if let Some(name) = self.rest(http::Method::GET, &path, None).await?["name"].as_str() {
                names.push(name.to_string());
            }
        }
        Ok(names)
    }

    /// The ID of the tagging `kind` (`category` or `tag`) named `name`: among every
    /// category, or among the tags of the category with ID `within`. The vAPI has no lookup
    /// by name, so each candidate is read, as govmomi's tag manager reads them.
    async fn named(&self, kind: &str, name: &str, within: Option<&str>) -> Result<Option<String>> {
        let ids = match within {
            None => {
                let path = format!("/com/vmware/cis/tagging/{kind}");
                self.rest(http::Method::GET, &path, None).await?
            }
            Some(category) => {
                let path = format!(
                    "/com/vmware/cis/tagging/tag/id:{category}?~action=list-tags-for-category"
                );
                self.rest(http::Method::POST, &path, None).await?
            }
        };
        for id in ids
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let path = format!("/com/vmware/cis/tagging/{kind}/id:{id}");
            if self.rest(http::Method::GET, &path, None).await?["name"] == json!(name) {
                return Ok(Some(id.to_string()));
            }
        }
        Ok(None)
    }
}

/// A vAPI answer: the `value` of a success (null when there is none), or its error as a
/// fault whose kind is the error's short name (`not_found`, `invalid_argument`).
fn answer(status: http::StatusCode, body: &[u8]) -> Result<Value> {
    let parsed: Value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(body)
            .map_err(|e| Error::Answer(format!("HTTP {status}: not JSON: {e}")))?
    };
    if status.is_success() {
        return Ok(parsed.get("value").cloned().unwrap_or(Value::Null));
    }
    // `/rest` errors: `{"type": "com.vmware.vapi.std.errors.not_found", "value": {...}}`.
    let kind = parsed["type"].as_str().unwrap_or("");
    let kind = kind.rsplit('.').next().unwrap_or(kind).to_string();
    let message = parsed["value"]["messages"][0]["default_message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    Err(Error::Fault {
        kind: if kind.is_empty() {
            format!("HTTP {status}")
        } else {
            kind
        },
        message,
    })
}
