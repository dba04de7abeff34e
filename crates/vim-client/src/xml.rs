//! Reading SOAP answers: faults, managed object references and property values, into a
//! small tree ([`Val`]) rather than generated types, since a controller reads a handful of
//! properties and the vim25 schema has thousands of types.

use crate::Error;

const XSI: &str = "http://www.w3.org/2001/XMLSchema-instance";

/// A managed object reference: its type and its server-side id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Moref {
    pub ty: String,
    pub value: String,
}

impl Moref {
    pub fn new(ty: impl Into<String>, value: impl Into<String>) -> Moref {
        Moref {
            ty: ty.into(),
            value: value.into(),
        }
    }

    /// As a request element named `tag`.
    pub fn element(&self, tag: &str) -> String {
        format!(
            r#"<{tag} type="{}">{}</{tag}>"#,
            escape(&self.ty),
            escape(&self.value)
        )
    }
}

impl std::fmt::Display for Moref {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.ty, self.value)
    }
}

/// A property value.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Text(String),
    Moref(Moref),
    /// An `ArrayOf...` value.
    List(Vec<Val>),
    /// A data object: its fields in document order (a repeated field appears repeatedly),
    /// after its `xsi:type` as a field named `@type` when the answer gave one.
    Object(Vec<(String, Val)>),
}

impl Val {
    pub fn text(&self) -> Option<&str> {
        match self {
            Val::Text(t) => Some(t),
            _ => None,
        }
    }

    pub fn moref(&self) -> Option<&Moref> {
        match self {
            Val::Moref(m) => Some(m),
            _ => None,
        }
    }

    /// A data object's type (`VirtualVmxnet3`), when the answer gave it.
    pub fn type_name(&self) -> Option<&str> {
        self.field("@type").and_then(Val::text)
    }

    /// A data object's first field named `name`.
    pub fn field(&self, name: &str) -> Option<&Val> {
        match self {
            Val::Object(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Every field named `name` of a data object (a list field repeats its name).
    pub fn fields_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Val> + 'a {
        let fields = match self {
            Val::Object(fields) => fields.as_slice(),
            _ => &[],
        };
        fields
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v)
    }

    /// An array's items; a single value is a list of one.
    pub fn items(&self) -> Vec<&Val> {
        match self {
            Val::List(items) => items.iter().collect(),
            other => vec![other],
        }
    }

    fn parse(node: roxmltree::Node) -> Val {
        let children: Vec<_> = node.children().filter(|c| c.is_element()).collect();
        let xsi_type = node.attribute((XSI, "type")).unwrap_or("");
        if xsi_type.starts_with("ArrayOf") {
            return Val::List(children.into_iter().map(Val::parse).collect());
        }
        // A data object with no fields set (`<fault xsi:type="InvalidState"/>`) is still an
        // object of its type: only primitives (`xsd:*`) and untyped leaves are text.
        let data_type = !xsi_type.is_empty() && !xsi_type.starts_with("xsd:");
        if children.is_empty() && data_type && node.text().is_none_or(|t| t.trim().is_empty()) {
            return Val::Object(vec![("@type".to_string(), Val::Text(xsi_type.into()))]);
        }
        if children.is_empty() {
            let text = node.text().unwrap_or("").to_string();
            return match node.attribute("type") {
                Some(ty) => Val::Moref(Moref::new(ty, text)),
                None => Val::Text(text),
            };
        }
        let typed =
            (!xsi_type.is_empty()).then(|| ("@type".to_string(), Val::Text(xsi_type.into())));
        Val::Object(
            typed
                .into_iter()
                .chain(
                    children
                        .into_iter()
                        .map(|c| (c.tag_name().name().to_string(), Val::parse(c))),
                )
                .collect(),
        )
    }
}

/// One object's properties from RetrievePropertiesEx.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectContent {
    pub obj: Moref,
    pub props: Vec<(String, Val)>,
}

impl ObjectContent {
    pub fn prop(&self, path: &str) -> Option<&Val> {
        self.props.iter().find(|(p, _)| p == path).map(|(_, v)| v)
    }

    /// A property's text, or "" when absent (unset properties are left out of answers).
    pub fn text(&self, path: &str) -> &str {
        self.prop(path).and_then(Val::text).unwrap_or("")
    }
}

/// A parsed answer body: what it returned.
pub struct Answer {
    returnvals: Vec<Val>,
}

impl Answer {
    /// Reads `text`; a SOAP fault in it is returned as the error.
    pub fn new(text: &str) -> Result<Answer, Error> {
        let doc =
            roxmltree::Document::parse(text).map_err(|e| Error::Answer(format!("not XML: {e}")))?;
        if let Some(fault) = doc.descendants().find(|n| n.has_tag_name("Fault")) {
            return Err(fault_of(fault));
        }
        let returnvals = doc
            .descendants()
            .filter(|n| n.has_tag_name("returnval"))
            .map(Val::parse)
            .collect();
        Ok(Answer { returnvals })
    }

    /// The `returnval` elements' values.
    pub fn returnvals(&self) -> &[Val] {
        &self.returnvals
    }

    /// The one `returnval`, or an error naming the method.
    pub fn returnval(&self, method: &str) -> Result<Val, Error> {
        self.returnvals
            .first()
            .cloned()
            .ok_or_else(|| Error::Answer(format!("{method} returned nothing")))
    }

    /// A RetrievePropertiesEx (or Continue...) answer: its objects and the token of the
    /// next page, if any.
    pub fn objects(&self) -> (Vec<ObjectContent>, Option<String>) {
        let Some(result) = self.returnvals.first() else {
            return (Vec::new(), None);
        };
        let Val::Object(fields) = result else {
            return (Vec::new(), None);
        };
        let mut objects = Vec::new();
        let mut token = None;
        for (name, val) in fields {
            match name.as_str() {
                "token" => token = val.text().map(str::to_string),
                "objects" => objects.extend(object_content(val)),
                _ => {}
            }
        }
        (objects, token)
    }
}

fn object_content(val: &Val) -> Option<ObjectContent> {
    let obj = val.field("obj")?.moref()?.clone();
    let Val::Object(fields) = val else {
        return None;
    };
    let props = fields
        .iter()
        .filter(|(n, _)| n == "propSet")
        .filter_map(|(_, p)| {
            let name = p.field("name")?.text()?.to_string();
            Some((
                name,
                p.field("val").cloned().unwrap_or(Val::Text(String::new())),
            ))
        })
        .collect();
    Some(ObjectContent { obj, props })
}

/// A fault's type (from its detail: `<NotAuthenticatedFault xsi:type="NotAuthenticated">`)
/// and message.
fn fault_of(fault: roxmltree::Node) -> Error {
    let message = fault
        .descendants()
        .find(|n| n.has_tag_name("faultstring"))
        .and_then(|n| n.text())
        .unwrap_or("")
        .to_string();
    let kind = fault
        .descendants()
        .find(|n| n.has_tag_name("detail"))
        .and_then(|d| d.children().find(|c| c.is_element()))
        .map(|d| match d.attribute((XSI, "type")) {
            Some(t) => t.to_string(),
            None => d.tag_name().name().trim_end_matches("Fault").to_string(),
        })
        .unwrap_or_else(|| "SoapFault".into());
    Error::Fault { kind, message }
}

/// Escapes text for an XML element or attribute.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENVELOPE: &str = r#"<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns="urn:vim25"><soapenv:Body>BODY</soapenv:Body></soapenv:Envelope>"#;

    #[test]
    fn an_empty_data_object_keeps_its_type() {
        let a = answer(r#"<X><returnval><error xsi:type="LocalizedMethodFault"><fault xsi:type="InvalidState"></fault><localizedMessage>m</localizedMessage></error></returnval></X>"#).unwrap();
        let error = &a.returnvals()[0];
        let fault = error.field("error").and_then(|e| e.field("fault"));
        assert_eq!(fault.and_then(Val::type_name), Some("InvalidState"));
        let text = answer(r#"<X><returnval xsi:type="xsd:string"></returnval></X>"#).unwrap();
        assert_eq!(text.returnvals()[0].text(), Some(""));
    }

    fn answer(body: &str) -> Result<Answer, Error> {
        Answer::new(&ENVELOPE.replace("BODY", body))
    }

    #[test]
    fn faults_carry_their_type_and_message() {
        let e = answer(r#"<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>The session is not authenticated.</faultstring><detail><NotAuthenticatedFault xsi:type="NotAuthenticated"><object type="Folder">group-d1</object></NotAuthenticatedFault></detail></soapenv:Fault>"#).err().unwrap();
        assert_eq!(e.fault_kind(), Some("NotAuthenticated"));
        assert!(e.to_string().contains("not authenticated"));
    }

    #[test]
    fn object_contents_read_texts_references_arrays_and_the_token() {
        let a = answer(r#"<RetrievePropertiesExResponse><returnval><token>7</token><objects><obj type="VirtualMachine">vm-1</obj><propSet><name>name</name><val xsi:type="xsd:string">a &amp; b</val></propSet><propSet><name>resourcePool</name><val type="ResourcePool" xsi:type="ManagedObjectReference">resgroup-1</val></propSet><propSet><name>customValue</name><val xsi:type="ArrayOfCustomFieldValue"><CustomFieldValue xsi:type="CustomFieldStringValue"><key>101</key><value>ns/g</value></CustomFieldValue></val></propSet></objects></returnval></RetrievePropertiesExResponse>"#).unwrap();
        let (objects, token) = a.objects();
        assert_eq!(token.as_deref(), Some("7"));
        let vm = &objects[0];
        assert_eq!(vm.obj, Moref::new("VirtualMachine", "vm-1"));
        assert_eq!(vm.text("name"), "a & b");
        assert_eq!(
            vm.prop("resourcePool").and_then(Val::moref),
            Some(&Moref::new("ResourcePool", "resgroup-1"))
        );
        let values = vm.prop("customValue").unwrap().items();
        assert_eq!(values.len(), 1);
        assert_eq!(values[0].field("value").and_then(Val::text), Some("ns/g"));
        assert_eq!(vm.text("absent"), "");
    }

    #[test]
    fn references_are_written_escaped() {
        assert_eq!(
            Moref::new("Folder", "a<b").element("_this"),
            r#"<_this type="Folder">a&lt;b</_this>"#
        );
    }
}
