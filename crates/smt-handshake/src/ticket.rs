//! The SMT-ticket (the SMT paper §4.5.2): what a server publishes, for example in
//! DNS, so clients can send encrypted data in their first flight.
//!
//! A ticket carries (i) the server's long-term X25519 public key, (ii) its
//! certificate chain (leaf ECDSA P-256, issued by the datacenter CA), and
//! (iii) an ECDSA P-256 signature by the leaf's key over every other field,
//! plus a validity window of at most one hour and the server's name.
//!
//! # Encoding (version 1)
//!
//! Big-endian; `<n>` is a length prefix of n bytes.
//!
//! | Offset | Size | Field | Rule |
//! |---:|---:|---|---|
//! | 0 | 2 | version | `0x0001` |
//! | 2 | 2 | key share group | `0x001d` (x25519, TLS code point) |
//! | 4 | 2 | signature scheme | `0x0403` (ecdsa_secp256r1_sha256) |
//! | 6 | 8 | not_before | unix seconds |
//! | 14 | 8 | not_after | unix seconds, > not_before |
//! | 22 | 1 + n | server name `<1>` | 1..=253 bytes, a DNS name |
//! | | 1 + 32 | static public key `<1>` | exactly 32 bytes |
//! | | 1 | certificate count | 1..=4, leaf first |
//! | | (2 + len) × count | certificates `<2>` | DER, each 1..=65535 bytes |
//! | | 2 + s | signature `<2>` | ASN.1 DER ECDSA, 8..=72 bytes |
//!
//! The signature covers `"SMT ticket v1" || 0x00 || bytes[..signature]`:
//! every byte before the signature field, behind a context string no other
//! signer in the datacenter uses. The whole ticket is at most
//! [`MAX_TICKET_LEN`] bytes, and nothing may follow the signature.

use std::fmt;
use std::time::{Duration, SystemTime};

use aws_lc_rs::digest;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use rustls_pki_types::{
    CertificateDer, DnsName, ServerName, SignatureVerificationAlgorithm, UnixTime,
};
use webpki::{EndEntityCert, KeyUsage};

use crate::codec::{put_vec16, put_vec8, Reader};
use crate::keys::{is_usable_share, Hex, StaticKey, KEY_SHARE_LEN};
use crate::schedule::{TranscriptHash, HASH_LEN};
use crate::TicketError;

/// The longest validity a ticket may have, enforced when it is issued and
/// when it is verified: it bounds how long a stolen static key can decrypt
/// recorded 0-RTT data and how long the replay cache must remember.
pub const MAX_TICKET_LIFETIME: Duration = Duration::from_secs(3600);

/// The longest encoded ticket accepted (and issued).
pub const MAX_TICKET_LEN: usize = 16 * 1024;

/// The ticket format version this crate speaks.
pub const TICKET_VERSION: u16 = 0x0001;

/// TLS's code point for x25519 (RFC 8446 §4.2.7).
const GROUP_X25519: u16 = 0x001d;
/// TLS's code point for ecdsa_secp256r1_sha256 (RFC 8446 §4.2.3).
const SCHEME_ECDSA_P256_SHA256: u16 = 0x0403;
/// Domain separation for the ticket signature.
const SIGNATURE_CONTEXT: &[u8] = b"SMT ticket v1\0";
/// Longest certificate chain carried (leaf plus intermediates).
const MAX_CHAIN_LEN: usize = 4;
/// Longest DNS name (RFC 1035, without the trailing dot).
const MAX_NAME_LEN: usize = 253;
/// Bounds of an ASN.1 DER ECDSA P-256 signature.
const SIGNATURE_LEN: std::ops::RangeInclusive<usize> = 8..=72;

/// Signature algorithms accepted on the certificate chain (the CA's and
/// intermediates' signatures). The ticket itself is always signed with
/// ECDSA P-256 / SHA-256.
static CHAIN_ALGORITHMS: &[&dyn SignatureVerificationAlgorithm] = &[
    webpki::aws_lc_rs::ECDSA_P256_SHA256,
    webpki::aws_lc_rs::ECDSA_P256_SHA384,
    webpki::aws_lc_rs::ECDSA_P384_SHA256,
    webpki::aws_lc_rs::ECDSA_P384_SHA384,
    webpki::aws_lc_rs::ED25519,
];

/// A decoded SMT-ticket: well-formed, but not yet authenticated. Get one
/// from [`Ticket::issue`] (the server side) or [`Ticket::decode`] /
/// [`Ticket::from_base64`] (the client side), and turn it into a
/// [`VerifiedTicket`] with [`Ticket::verify`] before using it.
#[derive(Clone, PartialEq, Eq)]
pub struct Ticket {
    bytes: Vec<u8>,
    static_public: [u8; KEY_SHARE_LEN],
    not_before: u64,
    not_after: u64,
    name: String,
    chain: Vec<Vec<u8>>,
    /// `bytes[..signed_len]` is what the signature covers.
    signed_len: usize,
    signature: Vec<u8>,
}

impl Ticket {
    /// Issues a ticket for `static_key`, valid from `now` for `lifetime`
    /// (at most [`MAX_TICKET_LIFETIME`]), signed with `cert_key_pkcs8`, the
    /// PKCS#8 ECDSA P-256 key of the leaf certificate `cert_chain_der[0]`.
    ///
    /// Fails with [`TicketError::LifetimeTooLong`] for a lifetime over one
    /// hour (or under one second) and [`TicketError::InvalidInput`] if the
    /// name is not a DNS name, the chain is empty or too long, or the key is
    /// not the leaf's; with [`TicketError::WrongName`] if the leaf does not
    /// cover `name` (no client would accept the ticket).
    pub fn issue<C: AsRef<[u8]>>(
        static_key: &StaticKey,
        cert_chain_der: &[C],
        cert_key_pkcs8: &[u8],
        name: &str,
        now: SystemTime,
        lifetime: Duration,
    ) -> Result<Self, TicketError> {
        let seconds = lifetime.as_secs();
        if seconds == 0 || lifetime > MAX_TICKET_LIFETIME {
            return Err(TicketError::LifetimeTooLong { seconds });
        }
        let not_before = unix_seconds(now);
        let fields = SignedFields {
            not_before,
            not_after: not_before.saturating_add(seconds),
            name,
            static_public: &static_key.public_key(),
            chain: cert_chain_der.iter().map(AsRef::as_ref).collect(),
        };
        let mut bytes = fields.encode()?;
        let message = signed_message(&bytes);
        let signature = sign(cert_key_pkcs8, &message)?;
        check_leaf_signed(fields.chain[0], &message, &signature)?;
        // A ticket for a name its certificate does not carry would be
        // refused by every client: say so now, not at the first 0-RTT call.
        check_leaf_names(fields.chain[0], name)?;
        put_vec16(&mut bytes, &signature);
        Self::decode(&bytes)
    }

    /// Parses untrusted bytes (never panics). The result is well-formed but
    /// not authenticated: call [`Ticket::verify`].
    pub fn decode(bytes: &[u8]) -> Result<Self, TicketError> {
        if bytes.len() > MAX_TICKET_LEN {
            return Err(TicketError::Malformed("ticket longer than MAX_TICKET_LEN"));
        }
        let mut r = Reader::new(bytes);
        if r.u16("ticket version")? != TICKET_VERSION {
            return Err(TicketError::Malformed("unsupported ticket version"));
        }
        if r.u16("ticket key share group")? != GROUP_X25519 {
            return Err(TicketError::Malformed("unsupported ticket key share group"));
        }
        if r.u16("ticket signature scheme")? != SCHEME_ECDSA_P256_SHA256 {
            return Err(TicketError::Malformed(
                "unsupported ticket signature scheme",
            ));
        }
        let not_before = r.u64("ticket not_before")?;
        let not_after = r.u64("ticket not_after")?;
        if not_after <= not_before {
            return Err(TicketError::Malformed(
                "ticket not_after is not after not_before",
            ));
        }
        let raw_name = r.vec8("ticket server name")?;
        let name = parse_name(raw_name)?;
        // One encoding per ticket: `issue` writes the name in lowercase, and
        // hellos name a ticket by the hash of its bytes (found by fuzzing:
        // a case variant decoded, with another hash, to the same fields).
        if name.as_bytes() != raw_name {
            return Err(TicketError::Malformed(
                "ticket server name is not in lowercase",
            ));
        }
        let static_public = r
            .vec8("ticket static key")?
            .try_into()
            .map_err(|_| TicketError::Malformed("ticket static key is not 32 bytes"))?;
        let chain = parse_chain(&mut r)?;
        let signed_len = bytes.len() - r.remaining();
        let signature = r.vec16("ticket signature")?.to_vec();
        if !SIGNATURE_LEN.contains(&signature.len()) {
            return Err(TicketError::Malformed("ticket signature length"));
        }
        r.finish("trailing bytes after the ticket signature")?;
        Ok(Self {
            bytes: bytes.to_vec(),
            static_public,
            not_before,
            not_after,
            name,
            chain,
            signed_len,
            signature,
        })
    }

    /// Parses a ticket from standard base64 (RFC 4648 §4, padded), as
    /// published in a DNS TXT record. ASCII whitespace is ignored, so the
    /// TXT record's strings may be joined with or without spaces.
    pub fn from_base64(text: &str) -> Result<Self, TicketError> {
        if text.len() > 2 * MAX_TICKET_LEN {
            return Err(TicketError::Malformed("ticket longer than MAX_TICKET_LEN"));
        }
        let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        let bytes = BASE64
            .decode(compact)
            .map_err(|_| TicketError::Malformed("ticket is not valid base64"))?;
        Self::decode(&bytes)
    }

    /// The encoding in standard padded base64, for a DNS TXT record (split
    /// it into strings of at most 255 characters there).
    pub fn to_base64(&self) -> String {
        BASE64.encode(&self.bytes)
    }

    /// The ticket's bytes, exactly as issued.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// SHA-256 of the ticket's bytes: how a ClientHello0 names it.
    pub fn hash(&self) -> [u8; HASH_LEN] {
        to_hash(digest::digest(&digest::SHA256, &self.bytes))
    }

    /// The server's long-term X25519 public key.
    pub fn static_public_key(&self) -> [u8; KEY_SHARE_LEN] {
        self.static_public
    }

    /// Start of validity, unix seconds.
    pub fn not_before(&self) -> u64 {
        self.not_before
    }

    /// End of validity (exclusive), unix seconds.
    pub fn not_after(&self) -> u64 {
        self.not_after
    }

    /// The server name the ticket is for.
    pub fn server_name(&self) -> &str {
        &self.name
    }

    /// The certificate chain, DER, leaf first.
    pub fn certificate_chain(&self) -> impl Iterator<Item = &[u8]> {
        self.chain.iter().map(Vec::as_slice)
    }

    /// The ASN.1 DER ECDSA signature.
    pub fn signature(&self) -> &[u8] {
        &self.signature
    }

    /// Authenticates the ticket for a client that trusts `ca_der` (the
    /// datacenter CA's certificate, DER) and wants to reach `expected_name`
    /// at time `now`.
    ///
    /// Checks, in order: the lifetime is at most one hour; the ticket names
    /// `expected_name`; the chain leads to the CA and the leaf is valid for
    /// server authentication at `now`; the leaf's SAN covers
    /// `expected_name`; the signature verifies under the leaf's key; the
    /// static key is not a low-order point; `now` lies in
    /// `[not_before, not_after)`.
    pub fn verify(
        &self,
        ca_der: &[u8],
        expected_name: &str,
        now: SystemTime,
    ) -> Result<VerifiedTicket, TicketError> {
        let lifetime = self.not_after - self.not_before;
        if lifetime > MAX_TICKET_LIFETIME.as_secs() {
            return Err(TicketError::LifetimeTooLong { seconds: lifetime });
        }
        if !self.name.eq_ignore_ascii_case(expected_name) {
            return Err(TicketError::WrongName {
                expected: expected_name.to_owned(),
                found: format!("the ticket is for {:?}", self.name),
            });
        }
        let leaf_der = CertificateDer::from(self.chain[0].as_slice());
        let leaf = EndEntityCert::try_from(&leaf_der)
            .map_err(|e| TicketError::UntrustedCertificate(format!("leaf: {e}")))?;
        self.verify_chain(&leaf, ca_der, now)?;
        verify_subject(&leaf, expected_name)?;
        leaf.verify_signature(
            webpki::aws_lc_rs::ECDSA_P256_SHA256,
            &signed_message(&self.bytes[..self.signed_len]),
            &self.signature,
        )
        .map_err(|_| TicketError::BadSignature)?;
        if !is_usable_share(&self.static_public) {
            return Err(TicketError::Malformed(
                "ticket static key is a low-order point",
            ));
        }
        self.check_validity(unix_seconds(now))?;
        Ok(VerifiedTicket::new(self.clone()))
    }

    fn verify_chain(
        &self,
        leaf: &EndEntityCert<'_>,
        ca_der: &[u8],
        now: SystemTime,
    ) -> Result<(), TicketError> {
        let ca = CertificateDer::from(ca_der);
        let anchor = webpki::anchor_from_trusted_cert(&ca).map_err(|e| {
            TicketError::InvalidInput(format!("the CA certificate does not parse: {e}"))
        })?;
        let intermediates: Vec<_> = self.chain[1..]
            .iter()
            .map(|der| CertificateDer::from(der.as_slice()))
            .collect();
        let time = UnixTime::since_unix_epoch(Duration::from_secs(unix_seconds(now)));
        leaf.verify_for_usage(
            CHAIN_ALGORITHMS,
            &[anchor],
            &intermediates,
            time,
            KeyUsage::server_auth(),
            None,
            None,
        )
        .map(|_| ())
        .map_err(|e| TicketError::UntrustedCertificate(e.to_string()))
    }

    /// `Ok` while `now` (unix seconds) is in `[not_before, not_after)`.
    pub(crate) fn check_validity(&self, now: u64) -> Result<(), TicketError> {
        if now < self.not_before {
            return Err(TicketError::NotYetValid {
                not_before: self.not_before,
                now,
            });
        }
        if now >= self.not_after {
            return Err(TicketError::Expired {
                not_after: self.not_after,
                now,
            });
        }
        Ok(())
    }

    /// SHA-256 already fed with the ticket's bytes: the common prefix of
    /// every `th0` under this ticket.
    pub(crate) fn transcript_prefix(&self) -> digest::Context {
        let mut ctx = digest::Context::new(&digest::SHA256);
        ctx.update(&self.bytes);
        ctx
    }
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("server_name", &self.name)
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .field("static_public", &Hex(&self.static_public))
            .field("certificates", &self.chain.len())
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// A ticket that passed [`Ticket::verify`]: the only input
/// [`ZeroRttClient::start`](crate::ZeroRttClient::start) takes.
///
/// It remembers the ticket's hash and a SHA-256 state already fed with the
/// ticket, so starting a handshake hashes only the hello's own fields.
#[derive(Clone)]
pub struct VerifiedTicket {
    ticket: Ticket,
    hash: TranscriptHash,
    prefix: digest::Context,
}

impl VerifiedTicket {
    fn new(ticket: Ticket) -> Self {
        Self {
            hash: ticket.hash(),
            prefix: ticket.transcript_prefix(),
            ticket,
        }
    }

    /// The ticket.
    pub fn ticket(&self) -> &Ticket {
        &self.ticket
    }

    /// SHA-256 of the ticket's bytes.
    pub fn hash(&self) -> [u8; HASH_LEN] {
        self.hash
    }

    /// Whether the ticket is still within its validity at `now`. A client
    /// should fetch a fresh ticket before `not_after`: the server refuses
    /// hellos under an expired one.
    pub fn is_valid_at(&self, now: SystemTime) -> bool {
        self.ticket.check_validity(unix_seconds(now)).is_ok()
    }

    pub(crate) fn transcript_prefix(&self) -> digest::Context {
        self.prefix.clone()
    }
}

impl fmt::Debug for VerifiedTicket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifiedTicket")
            .field("ticket", &self.ticket)
            .field("hash", &Hex(&self.hash))
            .finish()
    }
}

/// Fuzzing only: decode(encode(x)) == x for tickets.
#[cfg(fuzzing)]
impl Ticket {
    /// The bytes [`Ticket::issue`] would encode for this ticket's fields and
    /// signature; an error where `issue` would refuse the fields (e.g. a
    /// ticket too long to leave room for any signature).
    pub fn reencode_for_fuzzing(&self) -> Result<Vec<u8>, TicketError> {
        let fields = SignedFields {
            not_before: self.not_before,
            not_after: self.not_after,
            name: &self.name,
            static_public: &self.static_public,
            chain: self.chain.iter().map(Vec::as_slice).collect(),
        };
        let mut bytes = fields.encode()?;
        put_vec16(&mut bytes, &self.signature);
        Ok(bytes)
    }
}

/// Whole seconds since the unix epoch (0 for times before it).
pub(crate) fn unix_seconds(now: SystemTime) -> u64 {
    now.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The fields the signature covers, before encoding.
struct SignedFields<'a> {
    not_before: u64,
    not_after: u64,
    name: &'a str,
    static_public: &'a [u8; KEY_SHARE_LEN],
    chain: Vec<&'a [u8]>,
}

impl SignedFields<'_> {
    /// The signed prefix of the ticket; checks what the issuer passed.
    fn encode(&self) -> Result<Vec<u8>, TicketError> {
        let name = parse_name(self.name.as_bytes()).map_err(|_| {
            TicketError::InvalidInput(format!(
                "{:?} is not a DNS name of at most 253 bytes",
                self.name
            ))
        })?;
        if self.chain.is_empty() || self.chain.len() > MAX_CHAIN_LEN {
            return Err(TicketError::InvalidInput(format!(
                "the certificate chain has {} certificates; 1..={MAX_CHAIN_LEN} fit",
                self.chain.len()
            )));
        }
        if let Some(cert) = self
            .chain
            .iter()
            .find(|c| c.is_empty() || c.len() > usize::from(u16::MAX))
        {
            return Err(TicketError::InvalidInput(format!(
                "a certificate of {} bytes does not fit (1..=65535)",
                cert.len()
            )));
        }
        let mut out = Vec::with_capacity(512);
        out.extend_from_slice(&TICKET_VERSION.to_be_bytes());
        out.extend_from_slice(&GROUP_X25519.to_be_bytes());
        out.extend_from_slice(&SCHEME_ECDSA_P256_SHA256.to_be_bytes());
        out.extend_from_slice(&self.not_before.to_be_bytes());
        out.extend_from_slice(&self.not_after.to_be_bytes());
        put_vec8(&mut out, name.as_bytes());
        put_vec8(&mut out, self.static_public);
        // NOTE(as): bounded by MAX_CHAIN_LEN above.
        out.push(self.chain.len() as u8);
        for cert in &self.chain {
            put_vec16(&mut out, cert);
        }
        if out.len() + 2 + SIGNATURE_LEN.end() > MAX_TICKET_LEN {
            return Err(TicketError::InvalidInput(format!(
                "the ticket would exceed {MAX_TICKET_LEN} bytes: shorten the certificate chain"
            )));
        }
        Ok(out)
    }
}

/// `context || signed bytes`.
fn signed_message(signed: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(SIGNATURE_CONTEXT.len() + signed.len());
    message.extend_from_slice(SIGNATURE_CONTEXT);
    message.extend_from_slice(signed);
    message
}

/// The issuer's self-check: `signature` verifies under the leaf's key.
fn check_leaf_signed(leaf_der: &[u8], message: &[u8], signature: &[u8]) -> Result<(), TicketError> {
    let leaf = CertificateDer::from(leaf_der);
    let leaf = EndEntityCert::try_from(&leaf).map_err(|e| {
        TicketError::InvalidInput(format!("the leaf certificate does not parse: {e}"))
    })?;
    leaf.verify_signature(webpki::aws_lc_rs::ECDSA_P256_SHA256, message, signature)
        .map_err(|_| {
            TicketError::InvalidInput(
                "the signing key is not the leaf certificate's ECDSA P-256 key".to_owned(),
            )
        })
}

fn check_leaf_names(leaf_der: &[u8], name: &str) -> Result<(), TicketError> {
    let leaf = CertificateDer::from(leaf_der);
    let leaf = EndEntityCert::try_from(&leaf).map_err(|e| {
        TicketError::InvalidInput(format!("the leaf certificate does not parse: {e}"))
    })?;
    verify_subject(&leaf, name)
}

fn sign(pkcs8: &[u8], message: &[u8]) -> Result<Vec<u8>, TicketError> {
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8).map_err(|e| {
        TicketError::InvalidInput(format!(
            "the signing key is not a PKCS#8 ECDSA P-256 key: {e}"
        ))
    })?;
    let signature = key
        .sign(&SystemRandom::new(), message)
        .map_err(|_| TicketError::InvalidInput("ECDSA signing failed".to_owned()))?;
    Ok(signature.as_ref().to_vec())
}

/// A DNS name of 1..=253 bytes, lower-cased.
fn parse_name(bytes: &[u8]) -> Result<String, TicketError> {
    const BAD: TicketError = TicketError::Malformed("ticket server name is not a DNS name");
    if bytes.is_empty() || bytes.len() > MAX_NAME_LEN {
        return Err(BAD);
    }
    let name = DnsName::try_from(bytes).map_err(|_| BAD)?;
    Ok(name.as_ref().to_ascii_lowercase())
}

fn parse_chain(r: &mut Reader<'_>) -> Result<Vec<Vec<u8>>, TicketError> {
    let count = usize::from(r.u8("ticket certificate count")?);
    if count == 0 || count > MAX_CHAIN_LEN {
        return Err(TicketError::Malformed("ticket certificate count"));
    }
    (0..count)
        .map(|_| match r.vec16("ticket certificate")? {
            [] => Err(TicketError::Malformed("empty ticket certificate")),
            der => Ok(der.to_vec()),
        })
        .collect()
}

fn verify_subject(leaf: &EndEntityCert<'_>, expected_name: &str) -> Result<(), TicketError> {
    let wrong = |why: String| TicketError::WrongName {
        expected: expected_name.to_owned(),
        found: why,
    };
    let name = ServerName::try_from(expected_name)
        .map_err(|_| wrong("the expected name is not a DNS name".to_owned()))?;
    leaf.verify_is_valid_for_subject_name(&name)
        .map_err(|e| wrong(format!("the certificate does not cover it: {e}")))
}

fn to_hash(digest: digest::Digest) -> TranscriptHash {
    // NOTE(unwrap): SHA-256 digests are 32 bytes.
    digest
        .as_ref()
        .try_into()
        .expect("SHA-256 output is 32 bytes")
}
