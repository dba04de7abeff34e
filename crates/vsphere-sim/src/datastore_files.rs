//! The files uploaded to datastores, in memory, per datastore: what `/folder` requests
//! (`datastore_http`) store and read, and what the datastore browser lists beside the VMs'
//! own files. Also the query helpers those requests share.

use bytes::Bytes;
use std::collections::BTreeMap;

/// A simulator's uploaded files, by (datastore reference value, path).
#[derive(Debug, Default)]
pub(crate) struct DatastoreFiles {
    files: BTreeMap<(String, String), Bytes>,
}

/// What a file request came to: HTTP status, body and its content type.
#[derive(Debug)]
pub struct FileAnswer {
    pub status: u16,
    pub body: Bytes,
    pub content_type: &'static str,
}

impl FileAnswer {
    pub(crate) fn text(status: u16, text: &str) -> FileAnswer {
        FileAnswer {
            status,
            body: Bytes::from(text.to_string()),
            content_type: "text/plain; charset=utf-8",
        }
    }
}

impl DatastoreFiles {
    /// Stores `body` at `path`: 201 for a new file, 200 for one replaced.
    pub fn put(&mut self, datastore: &str, path: &str, body: Bytes) -> FileAnswer {
        let key = (datastore.to_string(), path.to_string());
        let status = if self.files.insert(key, body).is_some() {
            200
        } else {
            201
        };
        FileAnswer::text(status, "")
    }

    /// The files on `datastore`, as (path, size).
    pub fn paths(&self, datastore: &str) -> Vec<(String, i64)> {
        self.files
            .iter()
            .filter(|((ds, _), _)| ds == datastore)
            .map(|((_, path), body)| (path.clone(), body.len() as i64))
            .collect()
    }

    pub fn get(&self, datastore: &str, path: &str) -> FileAnswer {
        match self.files.get(&(datastore.to_string(), path.to_string())) {
            Some(body) => FileAnswer {
                status: 200,
                body: body.clone(),
                content_type: "application/octet-stream",
            },
            None => FileAnswer::text(404, "file not found"),
        }
    }

    pub fn delete(&mut self, datastore: &str, path: &str) -> FileAnswer {
        match self
            .files
            .remove(&(datastore.to_string(), path.to_string()))
        {
            Some(_) => FileAnswer::text(204, ""),
            None => FileAnswer::text(404, "file not found"),
        }
    }
}

/// The value of query parameter `name`, percent-decoded.
pub(crate) fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| percent_decode(v))
    })
}

/// Percent-decoding, with `+` as a space, as Go's query encoding writes one.
pub(crate) fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_put_got_and_deleted_per_datastore() {
        let mut files = DatastoreFiles::default();
        assert_eq!(
            files
                .put("datastore-1", "iso/a.iso", Bytes::from("x"))
                .status,
            201
        );
        assert_eq!(
            files
                .put("datastore-1", "iso/a.iso", Bytes::from("y"))
                .status,
            200
        );
        assert_eq!(files.get("datastore-1", "iso/a.iso").body, "y");
        assert_eq!(files.get("datastore-2", "iso/a.iso").status, 404);
        assert_eq!(files.delete("datastore-1", "iso/a.iso").status, 204);
        assert_eq!(files.get("datastore-1", "iso/a.iso").status, 404);
    }

    #[test]
    fn query_values_are_decoded() {
        let q = "dcPath=DC%200&dsName=LocalDS_0";
        assert_eq!(query_param(q, "dcPath").as_deref(), Some("DC 0"));
        assert_eq!(query_param(q, "dsName").as_deref(), Some("LocalDS_0"));
        assert_eq!(percent_decode("a%2"), "a%2");
    }
}
