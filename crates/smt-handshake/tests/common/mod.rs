//! Shared test fixtures: a datacenter CA made with rcgen, tickets, a server,
//! and a check that two sides' keys interoperate.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};
use smt_handshake::{
    Freshness, KeyPool, ReplayCache, StaticKey, Ticket, VerifiedTicket, ZeroRttServer,
};
use smt_proto::crypto::{PacketCipher, TAG_LEN};
use smt_proto::SessionKeys;

/// The tests' "now": mid-2025, in unix seconds.
pub const NOW: u64 = 1_750_000_000;
pub const NAME: &str = "svc-a.dc.example";
pub const HOUR: Duration = Duration::from_secs(3600);

pub fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

/// A CA that issues ECDSA P-256 server certificates.
pub struct Pki {
    pub ca_der: Vec<u8>,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    pub fn new(ca_name: &str) -> Self {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
        let params = ca_params(ca_name);
        let ca_der = params.self_signed(&key).unwrap().der().to_vec();
        Self {
            ca_der,
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf for `names`, as (chain, PKCS#8 key).
    pub fn leaf(&self, names: &[&str]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = leaf_params(names).signed_by(&key, &self.issuer).unwrap();
        (vec![cert.der().to_vec()], key.serialize_der())
    }

    /// A leaf issued by an intermediate CA under this one: (leaf,
    /// intermediate) chain and the leaf's PKCS#8 key.
    pub fn leaf_via_intermediate(&self, names: &[&str]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let mid_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
        let mid_params = ca_params("SMT test intermediate");
        let mid = mid_params.signed_by(&mid_key, &self.issuer).unwrap();
        let mid_issuer = Issuer::new(mid_params, mid_key);
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
        let leaf = leaf_params(names).signed_by(&key, &mid_issuer).unwrap();
        (
            vec![leaf.der().to_vec(), mid.der().to_vec()],
            key.serialize_der(),
        )
    }
}

fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

fn leaf_params(names: &[&str]) -> CertificateParams {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names).unwrap();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params
}

/// One server and the client's view of its ticket.
pub struct World {
    pub pki: Pki,
    pub ticket: Ticket,
    pub verified: VerifiedTicket,
    pub server: Arc<ZeroRttServer>,
    pub client_pool: KeyPool,
}

impl World {
    /// A ticket issued at NOW for an hour, a server holding it, a verified
    /// copy on the client side.
    pub fn new() -> Self {
        Self::with_replay_capacity(1024)
    }

    pub fn with_replay_capacity(capacity: usize) -> Self {
        let pki = Pki::new("SMT test datacenter CA");
        let (chain, key) = pki.leaf(&[NAME]);
        let static_key = StaticKey::generate();
        let ticket = Ticket::issue(&static_key, &chain, &key, NAME, at(NOW), HOUR).unwrap();
        let verified = Ticket::from_base64(&ticket.to_base64())
            .unwrap()
            .verify(&pki.ca_der, NAME, at(NOW + 1))
            .unwrap();
        let server = ZeroRttServer::new(
            static_key,
            ticket.clone(),
            Arc::new(KeyPool::new(8)),
            ReplayCache::new(capacity),
        )
        .unwrap()
        .with_freshness(wide_freshness());
        Self {
            pki,
            ticket,
            verified,
            server: Arc::new(server),
            client_pool: KeyPool::new(8),
        }
    }
}

/// A freshness policy under which hellos stamped `at(NOW + 5)` are fresh
/// for the ticket's whole hour, so that the tests of other checks can
/// choose the server's time freely.
pub fn wide_freshness() -> Freshness {
    Freshness::new(at(NOW - HOUR.as_secs()))
        .with_limits(HOUR, Duration::from_secs(1))
        .unwrap()
}

/// The composite sequence number of message 2, record 0.
pub const SEQ: u64 = 2 << 16;

pub fn seal(cipher: &dyn PacketCipher, seq: u64, text: &[u8]) -> Vec<u8> {
    let mut buf = text.to_vec();
    buf.extend_from_slice(&[0; TAG_LEN]);
    cipher
        .seal_in_place(seq, &aad(buf.len()), &mut buf)
        .unwrap();
    buf
}

pub fn open(cipher: &dyn PacketCipher, seq: u64, sealed: &[u8]) -> Option<Vec<u8>> {
    let mut buf = sealed.to_vec();
    let len = cipher.open_in_place(seq, &aad(buf.len()), &mut buf).ok()?;
    buf.truncate(len);
    Some(buf)
}

fn aad(len: usize) -> [u8; 5] {
    let len = (len as u16).to_be_bytes();
    [0x17, 0x03, 0x03, len[0], len[1]]
}

/// Client tx → server rx and server tx → client rx, at SEQ.
pub fn assert_interoperate(client: &SessionKeys, server: &SessionKeys) {
    let request = b"0-RTT request in the first flight";
    let sealed = seal(client.tx.as_ref(), SEQ, request);
    assert_ne!(&sealed[..request.len()], request, "sealing must encrypt");
    assert_eq!(
        open(server.rx.as_ref(), SEQ, &sealed).as_deref(),
        Some(&request[..])
    );
    assert_eq!(
        open(server.rx.as_ref(), SEQ + 1, &sealed),
        None,
        "seq is bound"
    );
    let response = b"response";
    let sealed = seal(server.tx.as_ref(), SEQ, response);
    assert_eq!(
        open(client.rx.as_ref(), SEQ, &sealed).as_deref(),
        Some(&response[..])
    );
    assert_eq!(
        open(server.rx.as_ref(), SEQ, &sealed),
        None,
        "directions differ"
    );
}

/// Both directions of `a` and `b` use different keys: the same text at the
/// same sequence number seals differently, and neither opens the other's.
pub fn assert_keys_differ(a: &SessionKeys, b: &SessionKeys) {
    let text = b"same text, same sequence number";
    for (x, y) in [(&a.tx, &b.tx), (&a.rx, &b.rx)] {
        let sealed = seal(x.as_ref(), SEQ, text);
        assert_ne!(sealed, seal(y.as_ref(), SEQ, text));
        assert_eq!(open(y.as_ref(), SEQ, &sealed), None);
    }
}
