//! vCenter credentials as the controllers that drive a vCenter keep them: read from a Secret,
//! or made up for a simulator a controller starts itself.

use infrasim_vim_client::{Credentials, Trust};
use k8s_openapi::api::core::v1::Secret;

/// A vCenter Secret's credentials (`server`, `username`, `password`, and `thumbprint` or
/// `caBundle`); why they cannot be read.
pub fn read_secret(secret: &Secret) -> Result<Credentials, String> {
    let key = |k: &str| -> Option<String> {
        let data = secret.data.as_ref()?.get(k)?;
        String::from_utf8(data.0.clone())
            .ok()
            .map(|s| s.trim().to_string())
    };
    let need = |k: &str| {
        key(k)
            .filter(|v| !v.is_empty())
            .ok_or(format!("no key {k}"))
    };
    let trust = match (key("thumbprint"), key("caBundle")) {
        (Some(t), _) if !t.is_empty() => Trust::Thumbprint(t),
        (_, Some(ca)) if !ca.is_empty() => Trust::CaBundle(ca),
        _ => return Err("neither a thumbprint nor a caBundle to trust the server by".into()),
    };
    Ok(Credentials {
        server: need("server")?,
        username: need("username")?,
        password: need("password")?,
        trust,
    })
}

/// A random password for a simulator a controller starts.
pub fn password() -> String {
    use rand::distr::{Alphanumeric, SampleString};
    Alphanumeric.sample_string(&mut rand::rng(), 20)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        let data: BTreeMap<String, ByteString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
            .collect();
        Secret {
            data: Some(data),
            ..Secret::default()
        }
    }

    #[test]
    fn a_secret_needs_a_server_credentials_and_something_to_trust() {
        let full = [
            ("server", "127.0.0.1:8989"),
            ("username", "u"),
            ("password", "p"),
            ("thumbprint", "AB:CD"),
        ];
        let c = read_secret(&secret(&full)).unwrap();
        assert_eq!(c.trust, Trust::Thumbprint("AB:CD".into()));
        let untrusted = read_secret(&secret(&full[..3])).unwrap_err();
        assert!(untrusted.contains("thumbprint"), "{untrusted}");
        let no_password = [("server", "s"), ("username", "u"), ("caBundle", "pem")];
        assert_eq!(
            read_secret(&secret(&no_password)).unwrap_err(),
            "no key password"
        );
    }
}
