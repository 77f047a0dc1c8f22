//! Published test vectors, for this crate's tests and other crates' tests.
//!
//! Every constant below is copied from RFC 8448 ("Example Handshake Traces
//! for TLS 1.3"), §3 "Simple 1-RTT Handshake" (TLS_AES_128_GCM_SHA256), in
//! the RFC's own layout so each can be checked against the text by eye.
//! The heading in the RFC that each value sits under is quoted above it.
//! None of these values were computed here; the tests in `tests/integration/rfc8448.rs`
//! reproduce the records from the keys byte for byte.
//!
//! In that trace the server's first record under its application traffic
//! key is the NewSessionTicket (sequence number 0), so its application data
//! record is sequence number 1; the client's application data record is its
//! first under its application key (sequence number 0). Every record's
//! associated data is its own 5-byte header `17 03 03 <len>`.

use hex_literal::hex;

/// `{server}  derive write traffic keys for application data:` PRK, i.e.
/// the server application traffic secret (`tls13 s ap traffic`).
pub const RFC8448_SERVER_AP_SECRET: [u8; 32] = hex!(
    "
    a1 1a f9 f0 55 31 f8 56 ad 47 11 6b 45 a9 50 32
    82 04 b4 f4 4b fb 6b 3a 4b 4f 1f 3f cb 63 16 43"
);

/// `{server}  derive write traffic keys for application data:` key info,
/// the HkdfLabel for "key" with length 16.
pub const RFC8448_KEY_INFO: [u8; 13] = hex!("00 10 09 74 6c 73 31 33 20 6b 65 79 00");

/// `{server}  derive write traffic keys for application data:` iv info,
/// the HkdfLabel for "iv" with length 12.
pub const RFC8448_IV_INFO: [u8; 12] = hex!("00 0c 08 74 6c 73 31 33 20 69 76 00");

/// `{server}  derive write traffic keys for application data:` key expanded.
pub const RFC8448_SERVER_AP_KEY: [u8; 16] = hex!(
    "
    9f 02 28 3b 6c 9c 07 ef c2 6b b9 f2 ac
    92 e3 56"
);

/// `{server}  derive write traffic keys for application data:` iv expanded.
pub const RFC8448_SERVER_AP_IV: [u8; 12] = hex!("cf 78 2b 88 dd 83 54 9a ad f1 e9 84");

/// `{client}  derive write traffic keys for application data:` PRK, i.e.
/// the client application traffic secret (`tls13 c ap traffic`).
pub const RFC8448_CLIENT_AP_SECRET: [u8; 32] = hex!(
    "
    9e 40 64 6c e7 9a 7f 9d c0 5a f8 88 9b ce 65 52
    87 5a fa 0b 06 df 00 87 f7 92 eb b7 c1 75 04 a5"
);

/// `{client}  derive write traffic keys for application data:` key expanded.
pub const RFC8448_CLIENT_AP_KEY: [u8; 16] = hex!(
    "
    17 42 2d da 59 6e d5 d9 ac d8 90 e3 c6
    3f 50 51"
);

/// `{client}  derive write traffic keys for application data:` iv expanded.
pub const RFC8448_CLIENT_AP_IV: [u8; 12] = hex!("5b 78 92 3d ee 08 57 90 33 e5 23 d9");

/// Inner content type of an application_data record (RFC 8446 §5.1).
pub const CONTENT_TYPE_APPLICATION_DATA: u8 = 0x17;

/// Inner content type of a handshake record (RFC 8446 §5.1).
pub const CONTENT_TYPE_HANDSHAKE: u8 = 0x16;

/// `{client}  send application_data record:` and `{server}  send
/// application_data record:` payload: the same 50 octets `00 01 .. 31`.
pub const RFC8448_APP_PAYLOAD: [u8; 50] = hex!(
    "
    00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e
    0f 10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f 20 21 22 23
    24 25 26 27 28 29 2a 2b 2c 2d 2e 2f 30 31"
);

/// `{client}  send application_data record:` complete record: the payload
/// with inner type 0x17, sealed under the client application key, seq 0.
pub const RFC8448_CLIENT_AP_RECORD_SEQ0: [u8; 72] = hex!(
    "
    17 03 03 00 43 a2 3f 70 54 b6 2c 94
    d0 af fa fe 82 28 ba 55 cb ef ac ea 42 f9 14 aa 66 bc ab 3f 2b
    98 19 a8 a5 b4 6b 39 5b d5 4a 9a 20 44 1e 2b 62 97 4e 1f 5a 62
    92 a2 97 70 14 bd 1e 3d ea e6 3a ee bb 21 69 49 15 e4"
);

/// `{server}  send application_data record:` complete record: the payload
/// with inner type 0x17, sealed under the server application key, seq 1.
pub const RFC8448_SERVER_AP_RECORD_SEQ1: [u8; 72] = hex!(
    "
    17 03 03 00 43 2e 93 7e 11 ef 4a c7
    40 e5 38 ad 36 00 5f c4 a4 69 32 fc 32 25 d0 5f 82 aa 1b 36 e3
    0e fa f9 7d 90 e6 df fc 60 2d cb 50 1a 59 a8 fc c4 9c 4b f2 e5
    f0 a2 1c 00 47 c2 ab f3 32 54 0d d0 32 e1 67 c2 95 5d"
);

/// The server's NewSessionTicket handshake message (205 octets), the
/// payload of the `{server}  send handshake record:` below.
pub const RFC8448_SERVER_NST_PAYLOAD: [u8; 205] = hex!(
    "
    04 00 00 c9 00 00 00 1e fa d6 aa c5 02 00
    00 00 b2 2c 03 5d 82 93 59 ee 5f f7 af 4e c9 00 00 00 00 26 2a
    64 94 dc 48 6d 2c 8a 34 cb 33 fa 90 bf 1b 00 70 ad 3c 49 88 83
    c9 36 7c 09 a2 be 78 5a bc 55 cd 22 60 97 a3 a9 82 11 72 83 f8
    2a 03 a1 43 ef d3 ff 5d d3 6d 64 e8 61 be 7f d6 1d 28 27 db 27
    9c ce 14 50 77 d4 54 a3 66 4d 4e 6d a4 d2 9e e0 37 25 a6 a4 da
    fc d0 fc 67 d2 ae a7 05 29 51 3e 3d a2 67 7f a5 90 6c 5b 3f 7d
    8f 92 f2 28 bd a4 0d da 72 14 70 f9 fb f2 97 b5 ae a6 17 64 6f
    ac 5c 03 27 2e 97 07 27 c6 21 a7 91 41 ef 5f 7d e6 50 5e 5b fb
    c3 88 e9 33 43 69 40 93 93 4a e4 d3 57 00 08 00 2a 00 04 00 00
    04 00"
);

/// `{server}  send handshake record:` (the third, after the server's
/// Finished) complete record: the NewSessionTicket with inner type 0x16,
/// sealed under the server application key, seq 0.
pub const RFC8448_SERVER_NST_RECORD_SEQ0: [u8; 227] = hex!(
    "
    17 03 03 00 de 3a 6b 8f 90 41 4a 97
    d6 95 9c 34 87 68 0d e5 13 4a 2b 24 0e 6c ff ac 11 6e 95 d4 1d
    6a f8 f6 b5 80 dc f3 d1 1d 63 c7 58 db 28 9a 01 59 40 25 2f 55
    71 3e 06 1d c1 3e 07 88 91 a3 8e fb cf 57 53 ad 8e f1 70 ad 3c
    73 53 d1 6d 9d a7 73 b9 ca 7f 2b 9f a1 b6 c0 d4 a3 d0 3f 75 e0
    9c 30 ba 1e 62 97 2a c4 6f 75 f7 b9 81 be 63 43 9b 29 99 ce 13
    06 46 15 13 98 91 d5 e4 c5 b4 06 f1 6e 3f c1 81 a7 7c a4 75 84
    00 25 db 2f 0a 77 f8 1b 5a b0 5b 94 c0 13 46 75 5f 69 23 2c 86
    51 9d 86 cb ee ac 87 aa c3 47 d1 43 f9 60 5d 64 f6 50 db 4d 02
    3e 70 e9 52 ca 49 fe 51 37 12 1c 74 bc 26 97 68 7e 24 87 46 d6
    df 35 30 05 f3 bc e1 86 96 12 9c 81 53 55 6b 3b 6c 67 79 b3 7b
    f1 59 85 68 4f"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_headers_match_record_lengths() {
        for record in [
            &RFC8448_CLIENT_AP_RECORD_SEQ0[..],
            &RFC8448_SERVER_AP_RECORD_SEQ1[..],
        ] {
            assert_eq!(&record[..3], [0x17, 0x03, 0x03]);
            assert_eq!(
                usize::from(u16::from_be_bytes([record[3], record[4]])),
                record.len() - 5
            );
            // Payload, one content-type byte, 16-byte tag.
            assert_eq!(record.len() - 5, RFC8448_APP_PAYLOAD.len() + 1 + 16);
        }
        let nst = RFC8448_SERVER_NST_RECORD_SEQ0;
        assert_eq!(
            usize::from(u16::from_be_bytes([nst[3], nst[4]])),
            nst.len() - 5
        );
        assert_eq!(nst.len() - 5, RFC8448_SERVER_NST_PAYLOAD.len() + 1 + 16);
    }

    #[test]
    fn payload_is_zero_to_forty_nine() {
        assert!(RFC8448_APP_PAYLOAD
            .iter()
            .enumerate()
            .all(|(i, &b)| usize::from(b) == i));
    }
}
