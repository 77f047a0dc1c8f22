//! SMT's record layer against RFC 8448 §3 ("Simple 1-RTT Handshake"): with
//! the RFC's application traffic keys, SMT's composite sequence numbers must
//! reproduce the RFC's record bytes exactly. TLS sequence number 1 is SMT
//! message 0, record 1; sequence number 0 is message 0, record 0.

use smt_crypto::test_vectors::*;
use smt_crypto::{AeadAlgorithm, AesGcmCipher, TrafficKey};
use smt_proto::record::{open_segment, seal_message, MessageLayout, SeqLayout};

fn cipher(key: &[u8], iv: [u8; 12]) -> AesGcmCipher {
    AesGcmCipher::new(&TrafficKey::new(AeadAlgorithm::Aes128Gcm, key, iv).unwrap())
}

#[test]
fn client_first_application_record_matches_rfc8448() {
    let c = cipher(&RFC8448_CLIENT_AP_KEY, RFC8448_CLIENT_AP_IV);
    let layout = MessageLayout::new(50, 50, 16384);
    let sealed = seal_message(&c, SeqLayout::DEFAULT, 0, &RFC8448_APP_PAYLOAD, layout).unwrap();
    assert_eq!(sealed.wire, RFC8448_CLIENT_AP_RECORD_SEQ0);
}

#[test]
fn server_second_application_record_matches_rfc8448() {
    // Message 0 of two 50-byte records: the second record is sealed with
    // sequence number 0 << 16 | 1 = 1, as the RFC's server record.
    let c = cipher(&RFC8448_SERVER_AP_KEY, RFC8448_SERVER_AP_IV);
    let mut data = vec![0xEE; 50];
    data.extend_from_slice(&RFC8448_APP_PAYLOAD);
    let layout = MessageLayout::new(100, 100, 50);
    let sealed = seal_message(&c, SeqLayout::DEFAULT, 0, &data, layout).unwrap();
    assert_eq!(&sealed.wire[72..], &RFC8448_SERVER_AP_RECORD_SEQ1[..]);
    // And SMT's receiver opens the RFC's bytes at (message 0, record 1).
    let record = RFC8448_SERVER_AP_RECORD_SEQ1.to_vec();
    let mut out = Vec::new();
    open_segment(&c, SeqLayout::DEFAULT, 0, 1, &record, &mut out).unwrap();
    assert_eq!(out, RFC8448_APP_PAYLOAD);
}

#[test]
fn the_same_record_under_another_message_id_is_rejected() {
    let c = cipher(&RFC8448_SERVER_AP_KEY, RFC8448_SERVER_AP_IV);
    let record = RFC8448_SERVER_AP_RECORD_SEQ1.to_vec();
    // With 48/16, (message 1, record 1) is sequence number 0x10001.
    assert!(open_segment(&c, SeqLayout::DEFAULT, 1, 1, &record, &mut Vec::new()).is_err());
}
