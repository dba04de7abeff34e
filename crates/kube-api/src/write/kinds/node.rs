//! A Node's write: a kubelet registers its Node with capacity and conditions, so a create
//! keeps the request's status.

use super::KindStrategy;

pub(super) struct Node;

impl KindStrategy for Node {
    fn keeps_status_on_create(&self) -> bool {
        true
    }
}
