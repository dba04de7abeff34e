//! Where a walk over an object is, for messages that name a field (`spec.items[0].name`).
//! Built on the stack as the walk descends and spelled out only when something is reported
//! there: most objects are valid and known, so most paths are never spelled, and a walk
//! allocates no string per field.

use std::fmt;

#[derive(Clone, Copy)]
pub(crate) enum FieldPath<'a> {
    Root,
    Key(&'a FieldPath<'a>, &'a str),
    Index(&'a FieldPath<'a>, usize),
}

impl fmt::Display for FieldPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldPath::Root => Ok(()),
            FieldPath::Key(FieldPath::Root, key) => f.write_str(key),
            FieldPath::Key(parent, key) => write!(f, "{parent}.{key}"),
            FieldPath::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FieldPath;

    #[test]
    fn spells_keys_and_indexes_as_kube_apiserver_does() {
        let spec = FieldPath::Key(&FieldPath::Root, "spec");
        let items = FieldPath::Key(&spec, "items");
        let first = FieldPath::Index(&items, 0);
        assert_eq!(
            FieldPath::Key(&first, "name").to_string(),
            "spec.items[0].name"
        );
        assert_eq!(FieldPath::Root.to_string(), "");
    }
}
