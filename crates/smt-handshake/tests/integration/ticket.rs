//! Issuing and verifying SMT-tickets.

use crate::common;

use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use common::*;
use smt_handshake::{StaticKey, Ticket, TicketError, MAX_TICKET_LIFETIME};

struct Issued {
    pki: Pki,
    chain: Vec<Vec<u8>>,
    key: Vec<u8>,
    static_key: StaticKey,
    ticket: Ticket,
}

fn issued(lifetime: Duration) -> Issued {
    let pki = Pki::new("SMT test datacenter CA");
    let (chain, key) = pki.leaf(&[NAME]);
    let static_key = StaticKey::generate();
    let ticket = Ticket::issue(&static_key, &chain, &key, NAME, at(NOW), lifetime).unwrap();
    Issued {
        pki,
        chain,
        key,
        static_key,
        ticket,
    }
}

/// Where the fields sit in an encoded ticket (see the `ticket` module docs).
const NOT_AFTER_AT: usize = 14;
fn static_key_at(ticket: &Ticket) -> usize {
    22 + 1 + ticket.server_name().len() + 1
}

/// Re-signs `bytes` (a ticket whose signed fields were edited) with `key`,
/// the way a rogue or buggy issuer holding the leaf key could.
fn resign(bytes: &[u8], key: &[u8]) -> Ticket {
    let ticket = Ticket::decode(bytes).unwrap();
    let sig_len = ticket.signature().len();
    let signed = &bytes[..bytes.len() - 2 - sig_len];
    let mut message = b"SMT ticket v1\0".to_vec();
    message.extend_from_slice(signed);
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, key).unwrap();
    let sig = pair.sign(&SystemRandom::new(), &message).unwrap();
    let mut out = signed.to_vec();
    out.extend_from_slice(&(sig.as_ref().len() as u16).to_be_bytes());
    out.extend_from_slice(sig.as_ref());
    Ticket::decode(&out).unwrap()
}

#[test]
fn an_issued_ticket_verifies_and_survives_base64() {
    let t = issued(HOUR);
    assert_eq!(t.ticket.not_before(), NOW);
    assert_eq!(t.ticket.not_after(), NOW + 3600);
    assert_eq!(t.ticket.server_name(), NAME);
    assert_eq!(t.ticket.static_public_key(), t.static_key.public_key());
    assert_eq!(t.ticket.certificate_chain().count(), 1);

    let text = t.ticket.to_base64();
    let parsed = Ticket::from_base64(&text).unwrap();
    assert_eq!(parsed, t.ticket);
    assert_eq!(parsed.as_bytes(), t.ticket.as_bytes());
    // TXT strings may come back split and joined with whitespace.
    let split: Vec<&str> = text
        .as_bytes()
        .chunks(255)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    assert_eq!(Ticket::from_base64(&split.join(" ")).unwrap(), t.ticket);

    let verified = parsed.verify(&t.pki.ca_der, NAME, at(NOW + 10)).unwrap();
    assert_eq!(verified.hash(), t.ticket.hash());
    assert!(verified.is_valid_at(at(NOW + 3599)));
    assert!(!verified.is_valid_at(at(NOW + 3600)));
    // Names compare case-insensitively, as DNS names do.
    assert!(parsed
        .verify(&t.pki.ca_der, "SVC-A.dc.example", at(NOW))
        .is_ok());

    println!(
        "ticket: {} bytes, {} base64 characters (1-cert chain, P-256 leaf)",
        t.ticket.as_bytes().len(),
        text.len()
    );
}

#[test]
fn a_chain_through_an_intermediate_verifies() {
    let pki = Pki::new("SMT test datacenter CA");
    let (chain, key) = pki.leaf_via_intermediate(&[NAME]);
    let ticket = Ticket::issue(&StaticKey::generate(), &chain, &key, NAME, at(NOW), HOUR).unwrap();
    assert_eq!(ticket.certificate_chain().count(), 2);
    assert!(ticket.verify(&pki.ca_der, NAME, at(NOW)).is_ok());
    println!(
        "ticket: {} bytes, {} base64 characters (leaf + intermediate)",
        ticket.as_bytes().len(),
        ticket.to_base64().len()
    );
}

#[test]
fn expired_and_not_yet_valid_tickets_are_refused() {
    let t = issued(HOUR);
    let ca = &t.pki.ca_der;
    assert_eq!(
        t.ticket.verify(ca, NAME, at(NOW + 3600)).unwrap_err(),
        TicketError::Expired {
            not_after: NOW + 3600,
            now: NOW + 3600
        }
    );
    assert_eq!(
        t.ticket.verify(ca, NAME, at(NOW - 1)).unwrap_err(),
        TicketError::NotYetValid {
            not_before: NOW,
            now: NOW - 1
        }
    );
}

#[test]
fn a_forged_signature_or_static_key_is_refused() {
    let t = issued(Duration::from_secs(1800));
    let ca = &t.pki.ca_der;
    let bytes = t.ticket.as_bytes();

    let mut sig_flipped = bytes.to_vec();
    let last = sig_flipped.len() - 1;
    sig_flipped[last] ^= 0x01;
    let forged = Ticket::decode(&sig_flipped).unwrap();
    assert_eq!(
        forged.verify(ca, NAME, at(NOW)).unwrap_err(),
        TicketError::BadSignature
    );

    let mut key_flipped = bytes.to_vec();
    key_flipped[static_key_at(&t.ticket) + 5] ^= 0x40;
    let forged = Ticket::decode(&key_flipped).unwrap();
    assert_ne!(forged.static_public_key(), t.ticket.static_public_key());
    assert_eq!(
        forged.verify(ca, NAME, at(NOW)).unwrap_err(),
        TicketError::BadSignature
    );

    let mut extended = bytes.to_vec();
    extended[NOT_AFTER_AT + 7] += 1;
    let forged = Ticket::decode(&extended).unwrap();
    assert_eq!(
        forged.verify(ca, NAME, at(NOW)).unwrap_err(),
        TicketError::BadSignature
    );
}

#[test]
fn a_ticket_from_another_ca_is_untrusted() {
    let t = issued(HOUR);
    let other = Pki::new("Some other CA");
    let err = t.ticket.verify(&other.ca_der, NAME, at(NOW)).unwrap_err();
    assert!(matches!(err, TicketError::UntrustedCertificate(_)), "{err}");

    // A valid signature by a key the other CA certified changes nothing.
    let (chain, key) = other.leaf(&[NAME]);
    let rogue = Ticket::issue(&StaticKey::generate(), &chain, &key, NAME, at(NOW), HOUR).unwrap();
    let err = rogue.verify(&t.pki.ca_der, NAME, at(NOW)).unwrap_err();
    assert!(matches!(err, TicketError::UntrustedCertificate(_)), "{err}");
}

#[test]
fn a_ticket_for_another_name_is_refused() {
    let t = issued(HOUR);
    let err = t
        .ticket
        .verify(&t.pki.ca_der, "svc-b.dc.example", at(NOW))
        .unwrap_err();
    assert!(matches!(err, TicketError::WrongName { .. }), "{err}");

    // Issuing one for a name the certificate does not cover is refused...
    let refused = Ticket::issue(
        &t.static_key,
        &t.chain,
        &t.key,
        "svc-b.dc.example",
        at(NOW),
        HOUR,
    )
    .unwrap_err();
    assert!(
        matches!(&refused, TicketError::WrongName { found, .. } if found.contains("certificate")),
        "{refused}"
    );
    // ...and a forged one, saying svc-b while the certificate covers only
    // svc-a, is refused by the verifier (the name field comes before the
    // chain, so the first occurrence is the ticket's own).
    let mut bytes = t.ticket.as_bytes().to_vec();
    let at_name = bytes
        .windows(NAME.len())
        .position(|w| w == NAME.as_bytes())
        .unwrap();
    bytes[at_name..at_name + 5].copy_from_slice(b"svc-b");
    let lying = Ticket::decode(&bytes).unwrap();
    let err = lying
        .verify(&t.pki.ca_der, "svc-b.dc.example", at(NOW))
        .unwrap_err();
    assert!(
        matches!(&err, TicketError::WrongName { found, .. } if found.contains("certificate")),
        "{err}"
    );
}

#[test]
fn lifetimes_over_an_hour_are_refused_at_issue_and_at_verify() {
    let t = issued(HOUR);
    let issue = |lifetime| Ticket::issue(&t.static_key, &t.chain, &t.key, NAME, at(NOW), lifetime);
    assert!(issue(MAX_TICKET_LIFETIME).is_ok());
    assert_eq!(
        issue(HOUR + Duration::from_secs(1)).unwrap_err(),
        TicketError::LifetimeTooLong { seconds: 3601 }
    );
    assert_eq!(
        issue(Duration::from_millis(3_600_500)).unwrap_err(),
        TicketError::LifetimeTooLong { seconds: 3600 }
    );
    assert_eq!(
        issue(Duration::ZERO).unwrap_err(),
        TicketError::LifetimeTooLong { seconds: 0 }
    );

    // A correctly signed ticket that claims a day is still refused.
    let mut long = t.ticket.as_bytes().to_vec();
    long[NOT_AFTER_AT..NOT_AFTER_AT + 8].copy_from_slice(&(NOW + 86_400).to_be_bytes());
    let long = resign(&long, &t.key);
    assert_eq!(
        long.verify(&t.pki.ca_der, NAME, at(NOW)).unwrap_err(),
        TicketError::LifetimeTooLong { seconds: 86_400 }
    );
}

#[test]
fn a_signed_low_order_static_key_is_refused() {
    let t = issued(HOUR);
    let mut bytes = t.ticket.as_bytes().to_vec();
    let at_key = static_key_at(&t.ticket);
    bytes[at_key..at_key + 32].fill(0);
    let bad = resign(&bytes, &t.key);
    assert!(matches!(
        bad.verify(&t.pki.ca_der, NAME, at(NOW)),
        Err(TicketError::Malformed(_))
    ));
}

#[test]
fn issue_explains_unusable_input() {
    let t = issued(HOUR);
    let issue = |chain: &[Vec<u8>], key: &[u8], name: &str| {
        Ticket::issue(&t.static_key, chain, key, name, at(NOW), HOUR).unwrap_err()
    };
    let other_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .unwrap()
        .serialize_der();
    let p384_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384)
        .unwrap()
        .serialize_der();
    for (err, needle) in [
        (issue(&t.chain, &other_key, NAME), "leaf certificate"),
        (issue(&t.chain, &p384_key, NAME), "P-256"),
        (issue(&[], &t.key, NAME), "0 certificates"),
        (issue(&t.chain, &t.key, "not a name!"), "not a DNS name"),
        (
            issue(&[vec![0x30, 0x00]], &t.key, NAME),
            "leaf certificate does not parse",
        ),
    ] {
        assert!(
            matches!(&err, TicketError::InvalidInput(m) if m.contains(needle)),
            "{err} should mention {needle:?}"
        );
    }
}

#[test]
fn decode_is_strict() {
    let t = issued(HOUR);
    let bytes = t.ticket.as_bytes();
    let mut trailing = bytes.to_vec();
    trailing.push(0);
    assert!(matches!(
        Ticket::decode(&trailing),
        Err(TicketError::Malformed(_))
    ));
    for cut in [0, 1, 21, 40, bytes.len() - 1] {
        assert!(Ticket::decode(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut version = bytes.to_vec();
    version[1] = 2;
    assert_eq!(
        Ticket::decode(&version).unwrap_err(),
        TicketError::Malformed("unsupported ticket version")
    );
    let mut backwards = bytes.to_vec();
    backwards[NOT_AFTER_AT..NOT_AFTER_AT + 8].copy_from_slice(&NOW.to_be_bytes());
    assert!(Ticket::decode(&backwards).is_err());
    // One encoding per ticket: a name in another case (found by fuzzing).
    let mut upper = bytes.to_vec();
    upper[23] = upper[23].to_ascii_uppercase();
    assert_eq!(
        Ticket::decode(&upper).unwrap_err(),
        TicketError::Malformed("ticket server name is not in lowercase")
    );
    assert!(Ticket::from_base64("not base64 at all!").is_err());
    assert!(Ticket::from_base64(&"A".repeat(100_000)).is_err());
}
