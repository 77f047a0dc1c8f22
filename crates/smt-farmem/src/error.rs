//! What can go wrong with a page, sorted by who is at fault.

use std::fmt;

use smt_memnode::wire::{PageStatus, RequestStatus, WireError};
use smt_pagecrypt::engine::PostError;
use smt_pagecrypt::IntegrityError;

/// Why one page could not be read or written.
#[derive(Debug)]
#[non_exhaustive]
pub enum PageError {
    /// The memory node refused the page (bad address, never written, full):
    /// the caller's address or the node's size is at fault.
    Node {
        /// The page's remote byte address.
        address: u64,
        /// The node's verdict on that page.
        status: PageStatus,
    },
    /// The page came back but failed its check: the memory node (or the
    /// path to it) changed, moved or replayed it, or it was sealed under
    /// another key.
    Integrity {
        /// The page's remote byte address.
        address: u64,
        /// Which check failed (the attack cannot be told apart).
        error: IntegrityError,
    },
    /// The node refused the whole request (a bug on one side: versions
    /// differ, or the request was malformed).
    Refused {
        /// The node's verdict on the request.
        status: RequestStatus,
    },
    /// The node's response did not parse.
    BadResponse(WireError),
    /// The SMT call failed (timeout, node gone); shared by the call's pages.
    Transport(std::sync::Arc<smt::Error>),
    /// The crypto engine refused the work.
    Engine(PostError),
}

impl fmt::Display for PageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Node { address, status } => {
                write!(f, "page {address:#x}: {}", status.describe())
            }
            Self::Integrity { address, error } => write!(f, "page {address:#x}: {error}"),
            Self::Refused { status } => {
                write!(f, "the memory node refused the request: {status:?}")
            }
            Self::BadResponse(e) => write!(f, "the memory node's response is malformed: {e}"),
            Self::Transport(e) => write!(f, "SMT call to the memory node failed: {e}"),
            Self::Engine(e) => write!(f, "crypto engine: {e}"),
        }
    }
}

impl std::error::Error for PageError {}

impl PageError {
    /// Whether the page failed its integrity check.
    pub fn is_integrity(&self) -> bool {
        matches!(self, Self::Integrity { .. })
    }
}

/// A client call failed as a whole, or was misused.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// The SMT endpoint failed.
    Smt(smt::Error),
    /// A batch larger than the node takes (split it, or use the batched
    /// calls, which split for you).
    BatchTooLarge {
        /// Pages in the refused request.
        pages: usize,
        /// Pages one request may carry ([`smt_memnode::wire::MAX_BATCH`]).
        max: usize,
    },
    /// Setting up the crypto engine failed.
    Engine(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Smt(e) => write!(f, "SMT: {e}"),
            Self::BatchTooLarge { pages, max } => write!(
                f,
                "{pages} pages in one request; at most {max} (read_pages/write_pages split larger batches)"
            ),
            Self::Engine(e) => write!(f, "crypto engine: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<smt::Error> for ClientError {
    fn from(e: smt::Error) -> Self {
        Self::Smt(e)
    }
}
