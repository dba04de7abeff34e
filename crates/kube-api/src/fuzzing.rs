//! The request-decoding surface in one function, for the fuzz target (`fuzz/`) and for a
//! test that runs it over seeds and random input in every CI run.
//!
//! Input layout: `method \n path?query \n content-type \n accept \n body`. Every decoder a
//! request meets runs: routing, query parsing, selectors, body decoding (JSON, YAML,
//! protobuf), then the whole handler against an in-memory server. Nothing may panic.

use crate::pki::CertificateAuthority;
use crate::{ApiConfig, ApiServer, Identity};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use std::sync::OnceLock;

struct Harness {
    runtime: tokio::runtime::Runtime,
    server: ApiServer,
}

fn harness() -> Option<&'static Harness> {
    static HARNESS: OnceLock<Option<Harness>> = OnceLock::new();
    HARNESS
        .get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            let server = runtime.block_on(async {
                let store =
                    infrasim_store::Store::in_memory(infrasim_store::StoreConfig::default());
                let group = store.create_group("fuzz").ok()?;
                let ca = CertificateAuthority::generate("fuzz").ok()?;
                Some(ApiServer::new(
                    group,
                    ca,
                    store.clock().clone(),
                    ApiConfig::default(),
                ))
            })?;
            Some(Harness { runtime, server })
        })
        .as_ref()
}

/// Feeds one input through every request decoder and the full handler.
pub fn exercise(data: &[u8]) {
    let mut parts = data.splitn(5, |b| *b == b'\n');
    let method = String::from_utf8_lossy(parts.next().unwrap_or_default()).to_string();
    let target = String::from_utf8_lossy(parts.next().unwrap_or_default()).to_string();
    let content_type = String::from_utf8_lossy(parts.next().unwrap_or_default()).to_string();
    let accept = String::from_utf8_lossy(parts.next().unwrap_or_default()).to_string();
    let body = parts.next().unwrap_or_default().to_vec();

    let (path, query) = target.split_once('?').unwrap_or((target.as_str(), ""));
    let _ = crate::request::route(path);
    let q = crate::request::Query::parse(Some(query));
    if let Some(s) = q.get("labelSelector") {
        let _ = crate::selectors::LabelSelector::parse(s);
    }
    if let Some(s) = q.get("fieldSelector") {
        let _ = crate::selectors::FieldSelector::parse(s, "Pod");
    }
    let _ = crate::protobuf::decode(&body);

    let Some(h) = harness() else { return };
    let Ok(method) = http::Method::from_bytes(method.as_bytes()) else {
        return;
    };
    let mut builder = http::Request::builder()
        .method(method)
        .uri(if target.starts_with('/') {
            target.clone()
        } else {
            format!("/{target}")
        });
    if !content_type.is_empty() {
        builder = builder.header(http::header::CONTENT_TYPE, content_type);
    }
    if !accept.is_empty() {
        builder = builder.header(http::header::ACCEPT, accept);
    }
    let Ok(req) = builder.body(Full::new(Bytes::from(body))) else {
        return;
    };
    let admin = Identity {
        user: "fuzz".into(),
        groups: vec!["system:masters".into()],
    };
    h.runtime.block_on(async {
        // The handler itself, not `ApiServer::handle`: that one turns panics into 500s, and
        // the fuzzer must see them.
        let req = crate::http::erase_body(req);
        let resp = crate::handler::handle(h.server.state.clone(), req, Some(admin)).await;
        // Watches stream forever: read a little of any body, never wait on it.
        let mut body = resp.into_body();
        let _ = tokio::time::timeout(std::time::Duration::from_millis(5), body.frame()).await;
    });
}

#[cfg(test)]
mod tests {
    use super::exercise;

    #[test]
    fn seeds_and_random_inputs_do_not_panic() {
        let seeds: &[&[u8]] = &[
            b"POST\n/api/v1/namespaces/default/configmaps\napplication/json\n\n{\"metadata\":{\"name\":\"a\"}}",
            b"POST\n/api/v1/namespaces/default/configmaps\napplication/json\n\n{\"metadata\":{\"name\":5}}",
            b"POST\n/api/v1/namespaces\napplication/yaml\n\nmetadata: {name: x}",
            b"POST\n/api/v1/namespaces\napplication/vnd.kubernetes.protobuf\n\nk8s\0\x0a\x02\x0a\x00\x12\x05\x0a\x03\x0a\x01x",
            b"PATCH\n/api/v1/namespaces/default\napplication/json-patch+json\n\n[{\"op\":\"remove\",\"path\":\"/metadata\"}]",
            b"PATCH\n/api/v1/namespaces/default\napplication/merge-patch+json\n\n{\"metadata\":null}",
            b"GET\n/api/v1/pods?labelSelector=a+in+(b,&fieldSelector=spec.nodeName%3D%3D&limit=-1&continue=%%%\n\napplication/json;as=Table;v=v1;g=meta.k8s.io\n",
            b"GET\n/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=99999999999999999999\n\n\n",
            b"DELETE\n/api/v1/namespaces/kube-system\napplication/json\n\n{\"propagationPolicy\":\"Sideways\"}",
            b"PUT\n/apis/apps/v1/namespaces/default/deployments/x\napplication/json\n\n[]",
        ];
        for seed in seeds {
            exercise(seed);
        }
        // Random mutations of the seeds: bytes flipped, truncated, spliced.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..300 {
            let seed = seeds[(next() % seeds.len() as u64) as usize];
            let mut input = seed.to_vec();
            for _ in 0..(next() % 6) {
                if input.is_empty() {
                    break;
                }
                let i = (next() % input.len() as u64) as usize;
                match next() % 3 {
                    0 => input[i] = next() as u8,
                    1 => input.truncate(i),
                    _ => input.insert(i, next() as u8),
                }
            }
            exercise(&input);
        }
    }
}
