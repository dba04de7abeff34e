//! Kubernetes API version priority, as kube-apiserver orders a group's versions in discovery
//! (the first is the preferred version): versions shaped like `v1`, `v2beta1`, `v1alpha3`
//! come first, GA before beta before alpha, higher major versions first, then higher beta
//! or alpha numbers; any other version string follows, in alphabetical order.

use std::cmp::Ordering;

/// A version's stability (declared in priority order: GA first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stability {
    Ga,
    Beta,
    Alpha,
}

/// `v<major>`, `v<major>beta<minor>`, `v<major>alpha<minor>`; `None` for anything else.
fn parse(version: &str) -> Option<(u64, Stability, u64)> {
    let rest = version.strip_prefix('v')?;
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let major = rest[..digits].parse::<u64>().ok().filter(|m| *m > 0)?;
    let tail = &rest[digits..];
    let (stability, minor) = if tail.is_empty() {
        (Stability::Ga, "0")
    } else if let Some(n) = tail.strip_prefix("beta") {
        (Stability::Beta, n)
    } else {
        (Stability::Alpha, tail.strip_prefix("alpha")?)
    };
    if stability != Stability::Ga
        && (minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    Some((major, stability, minor.parse().ok()?))
}

/// The order of `a` and `b` in discovery: `Less` when `a` has the higher priority.
pub fn priority_order(a: &str, b: &str) -> Ordering {
    match (parse(a), parse(b)) {
        (Some((ma, sa, na)), Some((mb, sb, nb))) => sa.cmp(&sb).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_kube_apiserver_sorts_them() {
        let mut versions = vec![
            "v1alpha1",
            "foo1",
            "v11alpha2",
            "v10beta3",
            "v12alpha1",
            "v1",
            "v3beta1",
            "v2",
            "v10",
            "foo10",
            "v11beta2",
            "v10beta1",
            "v10alpha10",
        ];
        versions.sort_by(|a, b| priority_order(a, b));
        assert_eq!(
            versions,
            [
                "v10",
                "v2",
                "v1",
                "v11beta2",
                "v10beta3",
                "v10beta1",
                "v3beta1",
                "v12alpha1",
                "v11alpha2",
                "v10alpha10",
                "v1alpha1",
                "foo1",
                "foo10",
            ]
        );
    }

    #[test]
    fn only_kube_shaped_versions_have_priority() {
        assert!(parse("v0").is_none());
        assert!(parse("v1beta").is_none());
        assert!(parse("v1gamma1").is_none());
        assert!(parse("1").is_none());
        assert_eq!(parse("v2beta3"), Some((2, Stability::Beta, 3)));
    }
}
