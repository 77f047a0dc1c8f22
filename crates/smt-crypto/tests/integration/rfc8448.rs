//! Record protection against RFC 8448 §3 ("Simple 1-RTT Handshake"): from
//! the application traffic keys the RFC prints, seal its three protected
//! post-handshake records byte for byte, then open them back.
//!
//! The records go through `PacketCipher::seal_in_place` / `open_in_place`
//! (ring, the path of small records) with the record header as associated
//! data, exactly as `smt-proto` calls them; only the sequence number is
//! TLS's plain counter here. The last test runs them through the one-pass
//! path of large records too (aws-lc, `seal_raw_to` / `open_raw_to`).

use smt_crypto::test_vectors::*;
use smt_crypto::{record_nonce, AeadAlgorithm, AesGcmCipher, TrafficKey};
use smt_proto::crypto::{CryptoError, PacketCipher, RECORD_HEADER_LEN, TAG_LEN};

fn server() -> AesGcmCipher {
    let key = TrafficKey::new(
        AeadAlgorithm::Aes128Gcm,
        &RFC8448_SERVER_AP_KEY,
        RFC8448_SERVER_AP_IV,
    );
    AesGcmCipher::new(&key.unwrap())
}

fn client() -> AesGcmCipher {
    let key = TrafficKey::new(
        AeadAlgorithm::Aes128Gcm,
        &RFC8448_CLIENT_AP_KEY,
        RFC8448_CLIENT_AP_IV,
    );
    AesGcmCipher::new(&key.unwrap())
}

/// Builds the record as a TLS 1.3 sender does (header, then the inner
/// plaintext `payload || content_type` sealed in place) into a buffer
/// poisoned with 0xa5, so a byte the cipher forgot to write would show.
fn seal_record(cipher: &AesGcmCipher, seq: u64, payload: &[u8], content_type: u8) -> Vec<u8> {
    let body_len = payload.len() + 1 + TAG_LEN;
    let mut record = vec![0xa5; RECORD_HEADER_LEN + body_len];
    let header = record_header(body_len);
    record[..RECORD_HEADER_LEN].copy_from_slice(&header);
    let body = &mut record[RECORD_HEADER_LEN..];
    body[..payload.len()].copy_from_slice(payload);
    body[payload.len()] = content_type;
    cipher.seal_in_place(seq, &header, body).unwrap();
    record
}

/// Opens `record` and returns `(payload, content_type)`.
fn open_record(
    cipher: &AesGcmCipher,
    seq: u64,
    record: &[u8],
) -> Result<(Vec<u8>, u8), CryptoError> {
    let header: [u8; RECORD_HEADER_LEN] = record[..RECORD_HEADER_LEN].try_into().unwrap();
    let mut body = record[RECORD_HEADER_LEN..].to_vec();
    let n = cipher.open_in_place(seq, &header, &mut body)?;
    // No padding in these records: the content type is the last byte.
    Ok((body[..n - 1].to_vec(), body[n - 1]))
}

/// TLSCiphertext header: opaque_type application_data, legacy version 0x0303.
fn record_header(body_len: usize) -> [u8; RECORD_HEADER_LEN] {
    let [hi, lo] = u16::try_from(body_len).unwrap().to_be_bytes();
    [0x17, 0x03, 0x03, hi, lo]
}

#[test]
fn client_application_data_record_seq0() {
    let record = seal_record(
        &client(),
        0,
        &RFC8448_APP_PAYLOAD,
        CONTENT_TYPE_APPLICATION_DATA,
    );
    assert_eq!(record, RFC8448_CLIENT_AP_RECORD_SEQ0);
    let opened = open_record(&client(), 0, &RFC8448_CLIENT_AP_RECORD_SEQ0).unwrap();
    assert_eq!(
        opened,
        (RFC8448_APP_PAYLOAD.to_vec(), CONTENT_TYPE_APPLICATION_DATA)
    );
}

#[test]
fn server_application_data_record_seq1() {
    let record = seal_record(
        &server(),
        1,
        &RFC8448_APP_PAYLOAD,
        CONTENT_TYPE_APPLICATION_DATA,
    );
    assert_eq!(record, RFC8448_SERVER_AP_RECORD_SEQ1);
    let opened = open_record(&server(), 1, &RFC8448_SERVER_AP_RECORD_SEQ1).unwrap();
    assert_eq!(
        opened,
        (RFC8448_APP_PAYLOAD.to_vec(), CONTENT_TYPE_APPLICATION_DATA)
    );
}

#[test]
fn server_new_session_ticket_record_seq0() {
    let record = seal_record(
        &server(),
        0,
        &RFC8448_SERVER_NST_PAYLOAD,
        CONTENT_TYPE_HANDSHAKE,
    );
    assert_eq!(record, RFC8448_SERVER_NST_RECORD_SEQ0);
    let opened = open_record(&server(), 0, &RFC8448_SERVER_NST_RECORD_SEQ0).unwrap();
    assert_eq!(
        opened,
        (RFC8448_SERVER_NST_PAYLOAD.to_vec(), CONTENT_TYPE_HANDSHAKE)
    );
}

/// The same records refuse to open under the wrong sequence number, the
/// other direction's key, or a changed header.
#[test]
fn records_open_only_in_their_place() {
    let seq1 = &RFC8448_SERVER_AP_RECORD_SEQ1;
    assert_eq!(open_record(&server(), 0, seq1), Err(CryptoError));
    assert_eq!(open_record(&server(), 2, seq1), Err(CryptoError));
    assert_eq!(open_record(&client(), 1, seq1), Err(CryptoError));
    let mut other_header = *seq1;
    other_header[2] = 0x01; // legacy_record_version 0x0301
    assert_eq!(open_record(&server(), 1, &other_header), Err(CryptoError));
}

/// The same three records, sealed from the payload with the content type
/// as `extra` and opened into another buffer, through the one-pass
/// implementation large records use.
#[test]
fn one_pass_path_makes_the_same_records() {
    /// Cipher, its IV, sequence number, payload, content type, record.
    type Case<'a> = (AesGcmCipher, [u8; 12], u64, &'a [u8], u8, &'a [u8]);
    let cases: [Case<'_>; 3] = [
        (
            client(),
            RFC8448_CLIENT_AP_IV,
            0,
            &RFC8448_APP_PAYLOAD,
            CONTENT_TYPE_APPLICATION_DATA,
            &RFC8448_CLIENT_AP_RECORD_SEQ0,
        ),
        (
            server(),
            RFC8448_SERVER_AP_IV,
            1,
            &RFC8448_APP_PAYLOAD,
            CONTENT_TYPE_APPLICATION_DATA,
            &RFC8448_SERVER_AP_RECORD_SEQ1,
        ),
        (
            server(),
            RFC8448_SERVER_AP_IV,
            0,
            &RFC8448_SERVER_NST_PAYLOAD,
            CONTENT_TYPE_HANDSHAKE,
            &RFC8448_SERVER_NST_RECORD_SEQ0,
        ),
    ];
    for (cipher, iv, seq, payload, content_type, want) in cases {
        let header: [u8; RECORD_HEADER_LEN] = want[..RECORD_HEADER_LEN].try_into().unwrap();
        let nonce = record_nonce(&iv, seq);
        let mut body = vec![0xa5; want.len() - RECORD_HEADER_LEN];
        cipher
            .seal_raw_to(&nonce, &header, payload, &[content_type], &mut body)
            .unwrap();
        assert_eq!(body, want[RECORD_HEADER_LEN..], "seq {seq}");
        let mut inner = vec![0x5a; body.len() - TAG_LEN];
        let n = cipher.open_raw_to(&nonce, &header, &body, &mut inner);
        assert_eq!(n, Ok(payload.len() + 1));
        assert_eq!(
            (&inner[..payload.len()], inner[payload.len()]),
            (payload, content_type)
        );
    }
}

/// The same records opened where they lie in a packet, decrypted down
/// over their own header in one pass (`open_within`, the path of a
/// one-packet message).
#[test]
fn records_open_down_over_their_header() {
    /// Cipher, sequence number, record, payload, content type.
    type Case<'a> = (AesGcmCipher, u64, &'a [u8], &'a [u8], u8);
    let cases: [Case<'_>; 3] = [
        (
            client(),
            0,
            &RFC8448_CLIENT_AP_RECORD_SEQ0,
            &RFC8448_APP_PAYLOAD,
            CONTENT_TYPE_APPLICATION_DATA,
        ),
        (
            server(),
            1,
            &RFC8448_SERVER_AP_RECORD_SEQ1,
            &RFC8448_APP_PAYLOAD,
            CONTENT_TYPE_APPLICATION_DATA,
        ),
        (
            server(),
            0,
            &RFC8448_SERVER_NST_RECORD_SEQ0,
            &RFC8448_SERVER_NST_PAYLOAD,
            CONTENT_TYPE_HANDSHAKE,
        ),
    ];
    for (cipher, seq, record, payload, content_type) in cases {
        let header: [u8; RECORD_HEADER_LEN] = record[..RECORD_HEADER_LEN].try_into().unwrap();
        let mut buf = record.to_vec();
        let n = cipher.open_within(seq, &header, &mut buf, RECORD_HEADER_LEN);
        assert_eq!(n, Ok(payload.len() + 1), "seq {seq}");
        assert_eq!(
            (&buf[..payload.len()], buf[payload.len()]),
            (payload, content_type)
        );
    }
}
