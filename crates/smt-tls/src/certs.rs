//! A small certificate authority for SMT deployments and tests (rcgen).
//!
//! SMT's TLS setup is a short chain: one CA, and leaf certificates it signs
//! directly; clients trust that CA and nothing else. Keys are ECDSA P-256.
//!
//! ```text
//! Ca::generate("smt test CA")        CA:TRUE, pathlen 0, keyCertSign + cRLSign, 10 years
//!   └─ ca.issue(&["10.0.0.1", "db.example"], false)
//!                                    CA:FALSE, digitalSignature, serverAuth
//!                                    (clientAuth when `client`), SANs as given, 1 year
//! ```
//!
//! Names that parse as IP addresses become IP-address SANs, valid DNS names
//! DNS SANs, and anything else (`""`, `999.1.1.1`) is refused: a client
//! that dials `10.0.0.1` verifies the IP SAN. Both kinds of object save to
//! and load from PEM: [`Ca::to_pem`] is the CA
//! certificate followed by its private key (keep it secret; hand out
//! [`Ca::cert_pem`] alone), [`IssuedCert::to_pem`] the chain followed by
//! the leaf's key.

use std::fmt;
use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, DnsName, PrivateKeyDer};

/// How long a CA made by [`Ca::generate`] is valid.
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// How long a certificate made by [`Ca::issue`] is valid.
pub const LEAF_VALIDITY: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// Certificates start being valid this long before they were made, so a
/// peer whose clock is a little behind still accepts them.
const BACKDATE: Duration = Duration::from_secs(60 * 60);

/// A certificate could not be made, saved or loaded.
#[derive(Debug)]
#[non_exhaustive]
pub enum CertError {
    /// [`Ca::issue`] was given no names: a certificate needs at least one.
    NoNames,
    /// A name is neither an IP address nor a valid DNS name.
    BadName(String),
    /// The PEM text has no `CERTIFICATE` block, or it is malformed.
    NoCertificate,
    /// The PEM text has no private key, or it is malformed.
    NoPrivateKey,
    /// The private key is not one this module can sign with (ECDSA P-256,
    /// P-384, Ed25519 or RSA in PKCS#8).
    BadKey(String),
    /// The CA certificate could not be parsed.
    BadCaCertificate(String),
    /// Signing failed.
    Signing(String),
}

impl fmt::Display for CertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoNames => f.write_str("a certificate needs at least one DNS name or IP address"),
            Self::BadName(name) => {
                write!(f, "{name:?} is neither an IP address nor a valid DNS name")
            }
            Self::NoCertificate => f.write_str("no PEM CERTIFICATE block found"),
            Self::NoPrivateKey => f.write_str("no PEM PRIVATE KEY block found"),
            Self::BadKey(why) => write!(f, "unusable private key: {why}"),
            Self::BadCaCertificate(why) => write!(f, "unusable CA certificate: {why}"),
            Self::Signing(why) => write!(f, "could not sign the certificate: {why}"),
        }
    }
}

impl std::error::Error for CertError {}

/// A certificate authority: its self-signed certificate and signing key.
///
/// `Debug` never shows the key.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    cert_der: CertificateDer<'static>,
    cert_pem: String,
}

impl Ca {
    /// A new CA named `name` (its subject's common name), with a fresh
    /// ECDSA P-256 key.
    pub fn generate(name: &str) -> Result<Self, CertError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(signing)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = common_name(name);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        set_validity(&mut params, CA_VALIDITY);
        let cert = params.self_signed(&key).map_err(signing)?;
        Ok(Self {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        })
    }

    /// Loads a CA saved with [`Ca::to_pem`] (or any CA certificate and its
    /// PKCS#8 private key, in one PEM text, in either order).
    pub fn from_pem(pem: &str) -> Result<Self, CertError> {
        let cert_der =
            CertificateDer::from_pem_slice(pem.as_bytes()).map_err(|_| CertError::NoCertificate)?;
        let key = key_pair(pem)?;
        let issuer = Issuer::from_ca_cert_der(&cert_der, key)
            .map_err(|e| CertError::BadCaCertificate(e.to_string()))?;
        Ok(Self {
            cert_pem: to_pem("CERTIFICATE", &cert_der),
            cert_der,
            issuer,
        })
    }

    /// The CA certificate followed by its private key, in PEM. Secret.
    pub fn to_pem(&self) -> String {
        format!("{}{}", self.cert_pem, self.issuer.key().serialize_pem())
    }

    /// The CA certificate alone, in PEM: what clients (and mTLS servers)
    /// are configured to trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA certificate alone, in DER.
    pub fn cert_der(&self) -> &[u8] {
        &self.cert_der
    }

    /// A certificate for `names` (DNS names and/or IP addresses; the first
    /// is also the subject's common name), signed by this CA, with a fresh
    /// ECDSA P-256 key. `client`: for a TLS client (clientAuth) rather than
    /// a server (serverAuth).
    pub fn issue(&self, names: &[&str], client: bool) -> Result<IssuedCert, CertError> {
        let first = names.first().ok_or(CertError::NoNames)?;
        names.iter().try_for_each(|name| check_name(name))?;
        let sans: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(sans).map_err(|_| bad_name(names))?;
        params.distinguished_name = common_name(first);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        params.use_authority_key_identifier_extension = true;
        set_validity(&mut params, LEAF_VALIDITY);
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(signing)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(signing)?;
        Ok(IssuedCert {
            chain: vec![cert.der().clone()],
            key: key.serialize_der(),
        })
    }
}

impl fmt::Debug for Ca {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ca")
            .field("cert_der_len", &self.cert_der.len())
            .finish_non_exhaustive()
    }
}

/// A certificate chain (leaf first; SMT's chains are the leaf alone) and
/// the leaf's PKCS#8 private key.
///
/// `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct IssuedCert {
    chain: Vec<CertificateDer<'static>>,
    key: Vec<u8>,
}

impl IssuedCert {
    /// Loads a chain and key saved with [`IssuedCert::to_pem`] (or any
    /// PEM text holding certificates, leaf first, and one private key).
    pub fn from_pem(pem: &str) -> Result<Self, CertError> {
        let chain = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| CertError::NoCertificate)?;
        if chain.is_empty() {
            return Err(CertError::NoCertificate);
        }
        let key =
            PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|_| CertError::NoPrivateKey)?;
        Ok(Self {
            chain,
            key: key.secret_der().to_vec(),
        })
    }

    /// The chain followed by the private key, in PEM. Secret.
    pub fn to_pem(&self) -> String {
        format!("{}{}", self.chain_pem(), self.key_pem())
    }

    /// The chain alone, in PEM, leaf first.
    pub fn chain_pem(&self) -> String {
        self.chain
            .iter()
            .map(|cert| to_pem("CERTIFICATE", cert))
            .collect()
    }

    /// The leaf's private key alone, in PEM (PKCS#8). Secret.
    pub fn key_pem(&self) -> String {
        to_pem("PRIVATE KEY", &self.key)
    }

    /// The chain in DER, leaf first.
    pub fn chain_der(&self) -> Vec<&[u8]> {
        self.chain.iter().map(|cert| cert.as_ref()).collect()
    }

    /// The leaf's private key in DER (PKCS#8). Secret.
    pub fn key_der(&self) -> &[u8] {
        &self.key
    }
}

impl fmt::Debug for IssuedCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedCert")
            .field("chain_len", &self.chain.len())
            .finish_non_exhaustive()
    }
}

fn common_name(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}

/// Valid from [`BACKDATE`] ago for `validity` from now.
fn set_validity(params: &mut CertificateParams, validity: Duration) {
    // NOTE(unwrap): a clock before 1970 is a broken machine, not an input.
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("system clock is after 1970");
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + since_epoch.saturating_sub(BACKDATE);
    params.not_after = epoch + since_epoch + validity;
}

fn key_pair(pem: &str) -> Result<KeyPair, CertError> {
    let der = PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|_| CertError::NoPrivateKey)?;
    KeyPair::try_from(&der).map_err(|e| CertError::BadKey(e.to_string()))
}

/// A name a client can check: an IP address or a DNS name (optionally a
/// `*.` wildcard). rcgen takes any string as a DNS name, so `""` or
/// `999.1.1.1` would make a certificate no client ever accepts.
fn check_name(name: &str) -> Result<(), CertError> {
    let dns = name.strip_prefix("*.").unwrap_or(name);
    if name.parse::<IpAddr>().is_ok() || DnsName::try_from(dns).is_ok() {
        return Ok(());
    }
    Err(CertError::BadName(name.to_string()))
}

/// The first name rcgen refused, for the error message.
fn bad_name(names: &[&str]) -> CertError {
    let bad = names
        .iter()
        .find(|n| CertificateParams::new(vec![n.to_string()]).is_err())
        .unwrap_or(&"");
    CertError::BadName(bad.to_string())
}

fn signing(e: rcgen::Error) -> CertError {
    CertError::Signing(e.to_string())
}

/// One PEM block, base64 in 64-column lines (RFC 7468).
fn to_pem(label: &str, der: &[u8]) -> String {
    let encoded = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in encoded.as_bytes().chunks(64) {
        // NOTE(unwrap): base64 output is ASCII.
        out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_no_client_can_match_are_refused() {
        let ca = Ca::generate("names test CA").unwrap();
        for bad in [
            "",
            "999.1.1.1",
            "a..b",
            "-x.example",
            "with space",
            "10.0.0.1:80",
        ] {
            match ca.issue(&["ok.example", bad], false) {
                Err(CertError::BadName(name)) => assert_eq!(name, bad),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        for good in [
            "10.0.0.1",
            "::1",
            "db.example",
            "*.svc.example",
            "localhost",
        ] {
            assert!(ca.issue(&[good], false).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn pem_blocks_round_trip_through_the_pem_parser() {
        let der: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let pem = to_pem("CERTIFICATE", &der);
        assert!(pem.lines().all(|l| l.len() <= 64));
        let parsed = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        assert_eq!(parsed.as_ref(), &der[..]);
    }

    #[test]
    fn issue_needs_a_name_and_valid_names() {
        let ca = Ca::generate("t").unwrap();
        assert!(matches!(ca.issue(&[], false), Err(CertError::NoNames)));
        let err = ca.issue(&["ok.example", "b\u{e4}d.example"], false);
        assert!(
            matches!(&err, Err(CertError::BadName(n)) if n == "b\u{e4}d.example"),
            "{err:?}"
        );
    }

    #[test]
    fn debug_never_shows_keys() {
        let ca = Ca::generate("t").unwrap();
        let cert = ca.issue(&["a.example"], false).unwrap();
        let shown = format!("{ca:?} {cert:?}");
        assert!(!shown.contains("PRIVATE"), "{shown}");
        assert!(!shown.contains(&format!("{:?}", &cert.key_der()[..8])));
    }
}
