//! The SOAP envelope: parsing a request into its method, `_this` and arguments, and writing
//! responses and faults the way vCenter writes them.

use crate::fault::Fault;
use crate::value::{escape, Moref};

const ENVELOPE_OPEN: &str = concat!(
    r#"<?xml version="1.0" encoding="UTF-8"?>"#,
    r#"<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/" "#,
    r#"xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" "#,
    r#"xmlns:xsd="http://www.w3.org/2001/XMLSchema" "#,
    r#"xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>"#
);
const ENVELOPE_CLOSE: &str = "</soapenv:Body></soapenv:Envelope>";

/// An element of the request body, detached from the XML document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Element {
    pub name: String,
    /// `xsi:type`, without its prefix.
    pub xsi_type: Option<String>,
    /// The `type` attribute (managed object references).
    pub type_attr: Option<String>,
    pub text: String,
    pub children: Vec<Element>,
}

impl Element {
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    pub fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    pub fn text_of(&self, name: &str) -> Option<&str> {
        self.child(name).map(|c| c.text.as_str())
    }

    /// The element as a managed object reference.
    pub fn moref(&self) -> Option<Moref> {
        Some(Moref::new(self.type_attr.as_deref()?, self.text.trim()))
    }

    /// A boolean child (`true`/`1`).
    pub fn flag(&self, name: &str) -> Option<bool> {
        self.text_of(name).map(|t| matches!(t.trim(), "true" | "1"))
    }
}

/// A parsed request: the method and its arguments.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub this: Option<Moref>,
    pub args: Element,
    /// A session key sent in the SOAP header (`<vcSessionCookie>`), as pyvmomi and govmomi
    /// send it to the services beside vim25 (PBM).
    pub header_session: Option<String>,
}

fn convert(node: roxmltree::Node<'_, '_>, depth: usize) -> Result<Element, Fault> {
    if depth > 64 {
        return Err(Fault::invalid_request(
            "the request nests elements too deeply",
        ));
    }
    let xsi_type = node
        .attribute(("http://www.w3.org/2001/XMLSchema-instance", "type"))
        .map(|t| t.rsplit(':').next().unwrap_or(t).to_string());
    let mut el = Element {
        name: node.tag_name().name().to_string(),
        xsi_type,
        type_attr: node.attribute("type").map(str::to_string),
        text: String::new(),
        children: Vec::new(),
    };
    for child in node.children() {
        if child.is_element() {
            el.children.push(convert(child, depth + 1)?);
        } else if child.is_text() {
            el.text.push_str(child.text().unwrap_or(""));
        }
    }
    Ok(el)
}

/// The deepest element nesting accepted. SOAP requests nest a few levels; a document nested
/// thousands deep is an attack on the parser's stack, refused before parsing.
const MAX_DEPTH: usize = 128;

/// The element nesting depth of a document, by a quick scan (comments, CDATA and
/// declarations are skipped; attribute values cannot contain `<`).
fn nesting_depth(body: &str) -> usize {
    let bytes = body.as_bytes();
    let (mut depth, mut max, mut i) = (0usize, 0usize, 0usize);
    while i < bytes.len() {
        if bytes[i] != b'<' {
            i += 1;
            continue;
        }
        match bytes.get(i + 1) {
            Some(b'/') => depth = depth.saturating_sub(1),
            Some(b'!') | Some(b'?') => {}
            _ => {
                let end = bytes[i..].iter().position(|b| *b == b'>').map(|p| i + p);
                let self_closing = end.is_some_and(|e| e > 0 && bytes[e - 1] == b'/');
                if !self_closing {
                    depth += 1;
                    max = max.max(depth);
                }
            }
        }
        i += 1;
    }
    max
}

/// Parses a SOAP request body.
pub fn parse(body: &str) -> Result<Request, Fault> {
    if nesting_depth(body) > MAX_DEPTH {
        return Err(Fault::invalid_request(
            "the request nests elements too deeply",
        ));
    }
    let doc = roxmltree::Document::parse(body)
        .map_err(|e| Fault::invalid_request(&format!("malformed XML: {e}")))?;
    let root = doc.root_element();
    if root.tag_name().name() != "Envelope" {
        return Err(Fault::invalid_request("the request is not a SOAP envelope"));
    }
    let body = root
        .children()
        .find(|n| n.is_element() && n.tag_name().name() == "Body")
        .ok_or_else(|| Fault::invalid_request("the SOAP envelope has no Body"))?;
    let method = body
        .children()
        .find(|n| n.is_element())
        .ok_or_else(|| Fault::invalid_request("the SOAP Body names no method"))?;
    let args = convert(method, 0)?;
    let this = args.child("_this").and_then(Element::moref);
    let header_session = root
        .children()
        .find(|n| n.is_element() && n.tag_name().name() == "Header")
        .and_then(|h| {
            h.descendants()
                .find(|n| n.is_element() && n.tag_name().name() == "vcSessionCookie")
        })
        .and_then(|n| n.text())
        .map(|t| t.trim().to_string());
    Ok(Request {
        method: args.name.clone(),
        this,
        args,
        header_session,
    })
}

/// A response envelope around `<{method}Response xmlns="urn:vim25">{inner}</…>`.
pub fn response(method: &str, inner: &str) -> String {
    let mut out = String::with_capacity(inner.len() + ENVELOPE_OPEN.len() + 128);
    out.push_str(ENVELOPE_OPEN);
    out.push_str(&format!("<{method}Response xmlns=\"urn:vim25\">"));
    out.push_str(inner);
    out.push_str(&format!("</{method}Response>"));
    out.push_str(ENVELOPE_CLOSE);
    out
}

/// A fault envelope.
pub fn fault(f: &Fault) -> String {
    let mut out = String::from(ENVELOPE_OPEN);
    out.push_str("<soapenv:Fault><faultcode>");
    out.push_str(if f.client {
        "ClientFaultCode"
    } else {
        "ServerFaultCode"
    });
    out.push_str("</faultcode><faultstring>");
    out.push_str(&escape(&f.message));
    out.push_str("</faultstring><detail>");
    out.push_str(&format!(
        "<{ty}Fault xmlns=\"urn:vim25\" xsi:type=\"{ty}\">",
        ty = f.ty
    ));
    crate::value::write_fields(&mut out, &f.fields);
    out.push_str(&format!("</{}Fault>", f.ty));
    out.push_str("</detail></soapenv:Fault>");
    out.push_str(ENVELOPE_CLOSE);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_method_this_and_arguments() {
        let body = r#"<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>u&amp;1</userName><password>p</password></Login></soapenv:Body></soapenv:Envelope>"#;
        let r = parse(body).unwrap();
        assert_eq!(r.method, "Login");
        assert_eq!(r.this, Some(Moref::new("SessionManager", "SessionManager")));
        assert_eq!(r.args.text_of("userName"), Some("u&1"));
    }

    #[test]
    fn malformed_requests_are_client_faults() {
        for body in [
            "<not xml",
            "<a/>",
            "<Envelope/>",
            "<E:Envelope xmlns:E=\"x\"><E:Body/></E:Envelope>",
        ] {
            let f = parse(body).unwrap_err();
            assert!(f.client, "{body}");
            assert_eq!(f.ty, "InvalidRequest");
        }
    }
}
