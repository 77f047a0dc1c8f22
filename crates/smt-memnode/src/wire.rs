//! The memory node's messages. One SMT message carries one request; its
//! response is the RPC's response. All integers are little-endian.
//!
//! ```text
//! request                               response
//!  0  u8   version (1)                   0  u8   version (1)
//!  1  u8   op (READ 0x01, WRITE 0x02,    1  u8   op (echoed)
//!          INFO 0x03)                    2  u16  count (echoed)
//!  2  u16  count: pages (0 for INFO)     4  u8   status of the request (OK 0x00,
//!  4  u32  reserved, 0                           else nothing follows)
//!  8  READ:  count × address u64         5  [3]  reserved, 0
//!     WRITE: count × { address u64,      8  READ:  count × { status u8, [3] 0,
//!            key ID u32, u32 0,                    key ID u32, then 4112 bytes
//!            4112 sealed bytes }                   only if status is OK }
//!                                           WRITE: count × status u8
//!                                           INFO:  capacity_pages u64,
//!                                                  address_limit u64,
//!                                                  used_pages u64,
//!                                                  page_size u32,
//!                                                  sealed_len u32,
//!                                                  max_batch u32
//! ```
//!
//! The key ID is the compute node's name for the key that sealed the page
//! (`smt_pagecrypt::KeyId`); the node stores it and returns it, nothing
//! more. Addresses are byte addresses of 4096-byte pages.

use std::fmt;

use smt_pagecrypt::{PAGE_SIZE, SEALED_LEN};

/// The format's version.
pub const VERSION: u8 = 1;
/// Most pages in one request (1 MiB of page data).
pub const MAX_BATCH: usize = 256;
/// Bytes before the per-page part, in requests and responses.
pub const HEADER_LEN: usize = 8;
/// Bytes of one WRITE entry.
pub const WRITE_ENTRY_LEN: usize = 16 + SEALED_LEN;
/// Bytes of a READ entry's fixed part (before the sealed page).
pub const READ_ENTRY_HEAD: usize = 8;

/// An operation code; unknown values survive a round trip and print in hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Op(pub u8);

impl Op {
    /// Fetch sealed pages by address.
    pub const READ: Op = Op(0x01);
    /// Store sealed pages at addresses, replacing what was there.
    pub const WRITE: Op = Op(0x02);
    /// Ask for the node's capacity, limits and use ([`Info`]).
    pub const INFO: Op = Op(0x03);
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Op::READ => f.write_str("READ"),
            Op::WRITE => f.write_str("WRITE"),
            Op::INFO => f.write_str("INFO"),
            Op(x) => write!(f, "Op({x:#04x})"),
        }
    }
}

/// A whole request's verdict.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestStatus(pub u8);

impl RequestStatus {
    /// The request was served; per-page statuses follow.
    pub const OK: Self = Self(0x00);
    /// Too short, too long, or a reserved field not zero.
    pub const MALFORMED: Self = Self(0x01);
    /// The version byte is not [`VERSION`]: client and node differ.
    pub const UNSUPPORTED_VERSION: Self = Self(0x02);
    /// The op byte is none of [`Op`]'s constants.
    pub const UNKNOWN_OP: Self = Self(0x03);
    /// More than [`MAX_BATCH`] pages.
    pub const TOO_MANY_PAGES: Self = Self(0x04);
}

impl fmt::Debug for RequestStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::OK => f.write_str("OK"),
            Self::MALFORMED => f.write_str("MALFORMED"),
            Self::UNSUPPORTED_VERSION => f.write_str("UNSUPPORTED_VERSION"),
            Self::UNKNOWN_OP => f.write_str("UNKNOWN_OP"),
            Self::TOO_MANY_PAGES => f.write_str("TOO_MANY_PAGES"),
            Self(x) => write!(f, "RequestStatus({x:#04x})"),
        }
    }
}

/// One page's verdict.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PageStatus(pub u8);

impl PageStatus {
    /// The page was read or written.
    pub const OK: Self = Self(0x00);
    /// The address is not a multiple of 4096.
    pub const MISALIGNED: Self = Self(0x01);
    /// The address is at or beyond the node's address limit.
    pub const OUT_OF_RANGE: Self = Self(0x02);
    /// READ of a page nobody wrote.
    pub const NOT_WRITTEN: Self = Self(0x03);
    /// WRITE of a new page when the node holds its capacity.
    pub const NO_CAPACITY: Self = Self(0x04);

    /// What the status means, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Self::OK => "ok",
            Self::MISALIGNED => "the address is not a multiple of the 4096-byte page size",
            Self::OUT_OF_RANGE => "the address is beyond the memory node's address limit",
            Self::NOT_WRITTEN => "the page was never written",
            Self::NO_CAPACITY => "the memory node is full (its page capacity is reached)",
            _ => "unknown page status",
        }
    }
}

impl fmt::Debug for PageStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::OK => f.write_str("OK"),
            Self::MISALIGNED => f.write_str("MISALIGNED"),
            Self::OUT_OF_RANGE => f.write_str("OUT_OF_RANGE"),
            Self::NOT_WRITTEN => f.write_str("NOT_WRITTEN"),
            Self::NO_CAPACITY => f.write_str("NO_CAPACITY"),
            Self(x) => write!(f, "PageStatus({x:#04x})"),
        }
    }
}

/// A sealed page with its key ID, as written and read.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredPage {
    /// The compute node's ID of the key that sealed the page; opaque here.
    pub key: u32,
    /// The sealed page (ciphertext of page ‖ CRC-64 ‖ 0^8).
    pub bytes: Box<[u8; SEALED_LEN]>,
}

impl fmt::Debug for StoredPage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredPage")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// A parsed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// READ of the pages at these byte addresses, answered in this order.
    Read(Vec<u64>),
    /// WRITE of these pages at these byte addresses.
    Write(Vec<(u64, StoredPage)>),
    /// INFO: the node's facts.
    Info,
}

/// Node facts an INFO returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    /// Most pages the node holds at once.
    pub capacity_pages: u64,
    /// Byte addresses must be below this.
    pub address_limit: u64,
    /// Pages held now.
    pub used_pages: u64,
    /// Bytes of a plaintext page (4096).
    pub page_size: u32,
    /// Bytes of a sealed page (4112).
    pub sealed_len: u32,
    /// Most pages in one request ([`MAX_BATCH`]).
    pub max_batch: u32,
}

/// A parsed response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// Per requested address, in request order: the stored page or why
    /// there is none.
    Read(Vec<Result<StoredPage, PageStatus>>),
    /// Per written page, in request order, its verdict.
    Write(Vec<PageStatus>),
    /// The node's facts.
    Info(Info),
    /// The request as a whole was refused.
    Refused {
        /// The request's op, echoed.
        op: Op,
        /// Why it was refused (never [`RequestStatus::OK`]).
        status: RequestStatus,
    },
}

/// Why bytes are not a valid message; says which field.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// Fewer bytes than the header, or than the entries its count
    /// announces.
    Short {
        /// Bytes the message needs at least.
        need: usize,
        /// Bytes it has.
        have: usize,
    },
    /// More bytes than the header's count accounts for.
    Trailing {
        /// Bytes the header's op and count imply.
        expected: usize,
        /// Bytes the message has.
        have: usize,
    },
    /// The version byte is not [`VERSION`].
    Version(u8),
    /// The op byte is not a known [`Op`].
    UnknownOp(Op),
    /// The count exceeds [`MAX_BATCH`].
    TooManyPages(usize),
    /// The named reserved field is not zero.
    Reserved(&'static str),
    /// A response's request status is not a known [`RequestStatus`].
    UnknownStatus(RequestStatus),
}

impl WireError {
    /// The status a node answers this error with.
    pub fn status(&self) -> RequestStatus {
        match self {
            Self::Version(_) => RequestStatus::UNSUPPORTED_VERSION,
            Self::UnknownOp(_) => RequestStatus::UNKNOWN_OP,
            Self::TooManyPages(_) => RequestStatus::TOO_MANY_PAGES,
            _ => RequestStatus::MALFORMED,
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Short { need, have } => {
                write!(f, "message too short: {have} bytes, at least {need} needed")
            }
            Self::Trailing { expected, have } => {
                write!(f, "message is {have} bytes, its header says {expected}")
            }
            Self::Version(v) => write!(f, "unsupported version {v} (this node speaks {VERSION})"),
            Self::UnknownOp(op) => write!(f, "unknown operation {op:?}"),
            Self::TooManyPages(n) => write!(f, "{n} pages in one request; at most {MAX_BATCH}"),
            Self::Reserved(what) => write!(f, "reserved field {what} is not zero"),
            Self::UnknownStatus(s) => write!(f, "unknown request status {s:?}"),
        }
    }
}

impl std::error::Error for WireError {}

struct Header {
    op: Op,
    count: usize,
    status: u8,
}

fn header(b: &[u8]) -> Result<Header, WireError> {
    if b.len() < HEADER_LEN {
        return Err(WireError::Short {
            need: HEADER_LEN,
            have: b.len(),
        });
    }
    if b[0] != VERSION {
        return Err(WireError::Version(b[0]));
    }
    Ok(Header {
        op: Op(b[1]),
        count: usize::from(u16::from_le_bytes([b[2], b[3]])),
        status: b[4],
    })
}

fn exact(b: &[u8], expected: usize) -> Result<(), WireError> {
    match b.len().cmp(&expected) {
        std::cmp::Ordering::Less => Err(WireError::Short {
            need: expected,
            have: b.len(),
        }),
        std::cmp::Ordering::Greater => Err(WireError::Trailing {
            expected,
            have: b.len(),
        }),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn sealed_at(b: &[u8], at: usize) -> Box<[u8; SEALED_LEN]> {
    let mut page = Box::new([0u8; SEALED_LEN]);
    page.copy_from_slice(&b[at..at + SEALED_LEN]);
    page
}

fn put_header(out: &mut Vec<u8>, op: Op, count: usize, status: u8) {
    out.push(VERSION);
    out.push(op.0);
    out.extend_from_slice(&(count as u16).to_le_bytes());
    out.push(status);
    out.extend_from_slice(&[0; 3]);
}

impl Request {
    /// Parses a request; the error says what is wrong and maps to the
    /// status the node answers with ([`WireError::status`]).
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        let h = header(b)?;
        if b[4..HEADER_LEN] != [0; 4] {
            return Err(WireError::Reserved("header bytes 4-7"));
        }
        if h.count > MAX_BATCH {
            return Err(WireError::TooManyPages(h.count));
        }
        match h.op {
            Op::READ => {
                exact(b, HEADER_LEN + 8 * h.count)?;
                let addrs = (0..h.count).map(|i| u64_at(b, HEADER_LEN + 8 * i));
                Ok(Request::Read(addrs.collect()))
            }
            Op::WRITE => {
                exact(b, HEADER_LEN + WRITE_ENTRY_LEN * h.count)?;
                (0..h.count)
                    .map(|i| parse_write_entry(b, HEADER_LEN + WRITE_ENTRY_LEN * i))
                    .collect::<Result<_, _>>()
                    .map(Request::Write)
            }
            Op::INFO => exact(b, HEADER_LEN).map(|()| Request::Info),
            op => Err(WireError::UnknownOp(op)),
        }
    }

    /// Bytes of the encoded request.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + match self {
                Request::Read(a) => 8 * a.len(),
                Request::Write(p) => WRITE_ENTRY_LEN * p.len(),
                Request::Info => 0,
            }
    }

    /// Encodes the request (at most [`MAX_BATCH`] pages: more is the
    /// caller's bug, refused by the node with TOO_MANY_PAGES).
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.reserve(self.buffer_len());
        match self {
            Request::Read(addrs) => {
                put_header(out, Op::READ, addrs.len(), 0);
                addrs
                    .iter()
                    .for_each(|a| out.extend_from_slice(&a.to_le_bytes()));
            }
            Request::Write(pages) => {
                put_header(out, Op::WRITE, pages.len(), 0);
                for (addr, page) in pages {
                    emit_write_entry(out, *addr, page.key, &page.bytes);
                }
            }
            Request::Info => put_header(out, Op::INFO, 0, 0),
        }
    }
}

/// Encodes a WRITE request straight from borrowed pages (no copies into
/// [`StoredPage`]s).
pub fn emit_write(out: &mut Vec<u8>, pages: &[(u64, u32, &[u8; SEALED_LEN])]) {
    out.reserve(HEADER_LEN + WRITE_ENTRY_LEN * pages.len());
    put_header(out, Op::WRITE, pages.len(), 0);
    for (addr, key, bytes) in pages {
        emit_write_entry(out, *addr, *key, bytes);
    }
}

fn emit_write_entry(out: &mut Vec<u8>, addr: u64, key: u32, bytes: &[u8; SEALED_LEN]) {
    out.extend_from_slice(&addr.to_le_bytes());
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(bytes);
}

fn parse_write_entry(b: &[u8], at: usize) -> Result<(u64, StoredPage), WireError> {
    if u32_at(b, at + 12) != 0 {
        return Err(WireError::Reserved("WRITE entry bytes 12-15"));
    }
    let page = StoredPage {
        key: u32_at(b, at + 8),
        bytes: sealed_at(b, at + 16),
    };
    Ok((u64_at(b, at), page))
}

impl Response {
    /// Encodes the response.
    pub fn emit(&self, out: &mut Vec<u8>) {
        match self {
            Response::Read(pages) => {
                put_header(out, Op::READ, pages.len(), 0);
                for p in pages {
                    emit_read_entry(out, p.as_ref().map(|s| (s.key, &*s.bytes)).map_err(|e| *e));
                }
            }
            Response::Write(statuses) => {
                put_header(out, Op::WRITE, statuses.len(), 0);
                out.extend(statuses.iter().map(|s| s.0));
            }
            Response::Info(i) => {
                put_header(out, Op::INFO, 0, 0);
                for x in [i.capacity_pages, i.address_limit, i.used_pages] {
                    out.extend_from_slice(&x.to_le_bytes());
                }
                for x in [i.page_size, i.sealed_len, i.max_batch] {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
            Response::Refused { op, status } => put_header(out, *op, 0, status.0),
        }
    }

    /// Parses a response (the client's side).
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        let h = header(b)?;
        if h.status != RequestStatus::OK.0 {
            exact(b, HEADER_LEN)?;
            return Ok(Response::Refused {
                op: h.op,
                status: RequestStatus(h.status),
            });
        }
        match h.op {
            Op::READ => parse_read(b, h.count).map(Response::Read),
            Op::WRITE => {
                exact(b, HEADER_LEN + h.count)?;
                Ok(Response::Write(
                    b[HEADER_LEN..].iter().map(|&s| PageStatus(s)).collect(),
                ))
            }
            Op::INFO => {
                exact(b, HEADER_LEN + 36)?;
                Ok(Response::Info(Info {
                    capacity_pages: u64_at(b, 8),
                    address_limit: u64_at(b, 16),
                    used_pages: u64_at(b, 24),
                    page_size: u32_at(b, 32),
                    sealed_len: u32_at(b, 36),
                    max_batch: u32_at(b, 40),
                }))
            }
            op => Err(WireError::UnknownOp(op)),
        }
    }
}

/// Appends one READ entry: a status, and the page when it is OK.
pub fn emit_read_entry(out: &mut Vec<u8>, page: Result<(u32, &[u8; SEALED_LEN]), PageStatus>) {
    match page {
        Ok((key, bytes)) => {
            out.extend_from_slice(&[PageStatus::OK.0, 0, 0, 0]);
            out.extend_from_slice(&key.to_le_bytes());
            out.extend_from_slice(bytes);
        }
        Err(status) => {
            out.extend_from_slice(&[status.0, 0, 0, 0]);
            out.extend_from_slice(&[0; 4]);
        }
    }
}

fn parse_read(b: &[u8], count: usize) -> Result<Vec<Result<StoredPage, PageStatus>>, WireError> {
    let mut at = HEADER_LEN;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        if b.len() < at + READ_ENTRY_HEAD {
            return Err(WireError::Short {
                need: at + READ_ENTRY_HEAD,
                have: b.len(),
            });
        }
        let status = PageStatus(b[at]);
        let key = u32_at(b, at + 4);
        at += READ_ENTRY_HEAD;
        if status != PageStatus::OK {
            out.push(Err(status));
            continue;
        }
        if b.len() < at + SEALED_LEN {
            return Err(WireError::Short {
                need: at + SEALED_LEN,
                have: b.len(),
            });
        }
        out.push(Ok(StoredPage {
            key,
            bytes: sealed_at(b, at),
        }));
        at += SEALED_LEN;
    }
    exact(b, at).map(|()| out)
}

/// The page size the format assumes.
pub const PAGE: u64 = PAGE_SIZE as u64;

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(x: u8) -> Box<[u8; SEALED_LEN]> {
        Box::new([x; SEALED_LEN])
    }

    #[test]
    fn requests_round_trip() {
        let reqs = [
            Request::Read(vec![0, 4096, 1 << 40]),
            Request::Write(vec![(
                8192,
                StoredPage {
                    key: 7,
                    bytes: sealed(3),
                },
            )]),
            Request::Info,
        ];
        for r in reqs {
            let mut b = Vec::new();
            r.emit(&mut b);
            assert_eq!(b.len(), r.buffer_len());
            assert_eq!(Request::parse(&b).unwrap(), r);
        }
    }

    /// Field by field, into a buffer that starts with a poison byte.
    #[test]
    fn a_read_request_byte_by_byte() {
        let mut b = vec![0xee];
        Request::Read(vec![0x1000]).emit(&mut b);
        assert_eq!(
            b,
            [0xee, 1, 0x01, 1, 0, 0, 0, 0, 0, 0x00, 0x10, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn responses_round_trip() {
        let resps = [
            Response::Read(vec![
                Ok(StoredPage {
                    key: 2,
                    bytes: sealed(9),
                }),
                Err(PageStatus::NOT_WRITTEN),
            ]),
            Response::Write(vec![PageStatus::OK, PageStatus::MISALIGNED]),
            Response::Info(Info {
                capacity_pages: 10,
                address_limit: 1 << 30,
                used_pages: 3,
                page_size: 4096,
                sealed_len: 4112,
                max_batch: 256,
            }),
            Response::Refused {
                op: Op(0x77),
                status: RequestStatus::UNKNOWN_OP,
            },
        ];
        for r in resps {
            let mut b = Vec::new();
            r.emit(&mut b);
            assert_eq!(Response::parse(&b).unwrap(), r);
        }
    }

    #[test]
    fn bad_requests_say_what_is_wrong_and_never_panic() {
        let mut read = Vec::new();
        Request::Read(vec![0, 4096]).emit(&mut read);
        let cases: Vec<(Vec<u8>, RequestStatus)> = vec![
            (vec![], RequestStatus::MALFORMED),
            (
                vec![2, 1, 0, 0, 0, 0, 0, 0],
                RequestStatus::UNSUPPORTED_VERSION,
            ),
            (vec![1, 9, 0, 0, 0, 0, 0, 0], RequestStatus::UNKNOWN_OP),
            (
                vec![1, 1, 0x01, 0x01, 0, 0, 0, 0],
                RequestStatus::TOO_MANY_PAGES,
            ),
            (read[..read.len() - 1].to_vec(), RequestStatus::MALFORMED),
            ([&read[..], &[0]].concat(), RequestStatus::MALFORMED),
            (vec![1, 3, 0, 0, 1, 0, 0, 0], RequestStatus::MALFORMED),
        ];
        for (bytes, status) in cases {
            let err = Request::parse(&bytes).unwrap_err();
            assert_eq!(err.status(), status, "{err}");
        }
        // Every prefix and every single-byte change parses or errs, never panics.
        let mut w = Vec::new();
        Request::Write(vec![(
            0,
            StoredPage {
                key: 1,
                bytes: sealed(1),
            },
        )])
        .emit(&mut w);
        for n in 0..w.len().min(64) {
            let _ = Request::parse(&w[..n]);
            let _ = Response::parse(&w[..n]);
            let mut c = w.clone();
            c[n] ^= 0xff;
            let _ = Request::parse(&c);
            let _ = Response::parse(&c);
        }
    }

    #[test]
    fn unknown_codes_print_in_hex() {
        assert_eq!(format!("{:?}", Op(0xab)), "Op(0xab)");
        assert_eq!(format!("{:?}", PageStatus(0x10)), "PageStatus(0x10)");
    }
}
