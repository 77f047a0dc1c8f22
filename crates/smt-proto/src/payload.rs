//! What an application hands the endpoint to send: its own bytes, kept
//! without a copy, or a borrowed slice, copied once.

use bytes::Bytes;

/// A message's data for [`crate::Endpoint::send_request`] and
/// [`crate::Endpoint::send_response`].
///
/// Owned bytes ([`Bytes`], `Vec<u8>`, `String`) are sealed straight from
/// the caller's memory as the message's packets leave: no copy of the
/// data is made. A borrowed slice is sealed at once if the message is
/// small (at most [`Payload::EAGER_LIMIT`] bytes), else copied once and
/// then sealed the same way.
#[derive(Clone, Debug)]
pub enum Payload<'a> {
    /// The caller keeps its bytes; the endpoint copies what it needs.
    Borrowed(&'a [u8]),
    /// The endpoint shares the caller's bytes (a reference count).
    Owned(Bytes),
}

impl Payload<'_> {
    /// Largest message sealed whole when it is sent (above it, records are
    /// sealed as their first packet leaves, so one call never spends long
    /// sealing: a 64 MiB message takes tens of milliseconds).
    pub const EAGER_LIMIT: usize = 64 * 1024;

    /// Largest borrowed message copied into a reused buffer of the
    /// endpoint's pool. A larger one is copied into fresh memory, whose
    /// pages fault in as the copy writes them: O(length) work in the call
    /// that sends it (a 256 MiB copy took over a second on a loaded
    /// two-core machine). A driver that calls the endpoint under a lock,
    /// which keeps it from receiving and answering meanwhile, makes that
    /// copy itself first, outside the lock, and hands over owned bytes.
    pub const POOLED_COPY_LIMIT: usize = crate::buffers::MAX_CLASS;

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Payload::Borrowed(s) => s,
            Payload::Owned(b) => b,
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes as owned [`Bytes`]: shared when owned, copied when
    /// borrowed.
    pub fn into_bytes(self) -> Bytes {
        match self {
            Payload::Borrowed(s) => Bytes::copy_from_slice(s),
            Payload::Owned(b) => b,
        }
    }
}

impl<'a> From<&'a [u8]> for Payload<'a> {
    fn from(s: &'a [u8]) -> Self {
        Payload::Borrowed(s)
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for Payload<'a> {
    fn from(s: &'a [u8; N]) -> Self {
        Payload::Borrowed(s)
    }
}

impl<'a> From<&'a Vec<u8>> for Payload<'a> {
    fn from(s: &'a Vec<u8>) -> Self {
        Payload::Borrowed(s)
    }
}

impl<'a> From<&'a str> for Payload<'a> {
    fn from(s: &'a str) -> Self {
        Payload::Borrowed(s.as_bytes())
    }
}

impl From<Bytes> for Payload<'_> {
    fn from(b: Bytes) -> Self {
        Payload::Owned(b)
    }
}

impl From<&Bytes> for Payload<'_> {
    fn from(b: &Bytes) -> Self {
        Payload::Owned(b.clone())
    }
}

impl From<Vec<u8>> for Payload<'_> {
    fn from(v: Vec<u8>) -> Self {
        Payload::Owned(Bytes::from(v))
    }
}

impl From<String> for Payload<'_> {
    fn from(s: String) -> Self {
        Payload::Owned(Bytes::from(s))
    }
}
