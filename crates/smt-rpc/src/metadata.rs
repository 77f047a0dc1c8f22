//! Metadata: key/value pairs that travel with a request (headers) or a
//! response (trailers), beside the message.

use serde::{Deserialize, Serialize};

use crate::Status;

/// Longest key, in bytes.
pub const MAX_KEY_LEN: usize = 128;

/// Key/value pairs in the order they were added; a key may repeat.
/// Keys are lowercase ASCII letters, digits, `-`, `_` and `.` (gRPC's
/// header rule, without HTTP/2's reserved `:` names); values are any
/// bytes. The whole envelope must fit in one SMT message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata(Vec<(String, Vec<u8>)>);

impl Metadata {
    /// Empty metadata.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `key` with `value` (after any earlier values of `key`). A key
    /// outside the allowed alphabet is [`crate::Code::InvalidArgument`],
    /// saying which character is wrong.
    pub fn insert(&mut self, key: &str, value: impl Into<Vec<u8>>) -> Result<&mut Self, Status> {
        check_key(key)?;
        self.0.push((key.to_owned(), value.into()));
        Ok(self)
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_slice())
    }

    /// The first value of `key`, if it is UTF-8.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        std::str::from_utf8(self.get(key)?).ok()
    }

    /// Every value of `key`, in order.
    pub fn get_all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_slice())
    }

    /// Removes every value of `key`; returns how many there were.
    pub fn remove(&mut self, key: &str) -> usize {
        let before = self.0.len();
        self.0.retain(|(k, _)| k != key);
        before - self.0.len()
    }

    /// The entries in insertion order, as (key, value).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_slice()))
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Checks keys read from the wire (a peer's metadata is input).
    pub(crate) fn validate(&self) -> Result<(), Status> {
        self.0.iter().try_for_each(|(k, _)| check_key(k))
    }
}

fn check_key(key: &str) -> Result<(), Status> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(Status::invalid_argument(format!(
            "metadata key {key:?} must be 1 to {MAX_KEY_LEN} bytes long"
        )));
    }
    let allowed = |c: char| matches!(c, 'a'..='z' | '0'..='9' | '-' | '_' | '.');
    match key.chars().find(|&c| !allowed(c)) {
        None => Ok(()),
        Some(c) => Err(Status::invalid_argument(format!(
            "metadata key {key:?} has {c:?}: use lowercase ASCII letters, digits, '-', '_' and '.'"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_repeat_in_order_and_bad_keys_are_refused() {
        let mut m = Metadata::new();
        m.insert("x-trace", "a")
            .unwrap()
            .insert("x-trace", "b")
            .unwrap();
        assert_eq!(m.get_str("x-trace"), Some("a"));
        assert_eq!(m.get_all("x-trace").count(), 2);
        let e = m.insert("X-Trace", "c").unwrap_err();
        assert!(e.message().contains("'X'"), "{e}");
        assert!(m.insert("", "c").is_err());
        assert_eq!(m.remove("x-trace"), 2);
        assert!(m.is_empty());
    }
}
