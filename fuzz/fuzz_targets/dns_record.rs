//! DNS TXT ticket records. Input: byte 0 is where the text is cut into
//! character-strings (every `n` bytes, `n = byte 0`, 0 meaning one string);
//! the rest is the record text.
//!
//! Decoding must never panic; what decodes must be canonical (encoding the
//! ticket again gives the same text); and any bytes of ticket size must
//! encode into valid character-strings that decode back to them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smt_dns::{
    ticket_from_txt, ticket_txt_strings, MAX_TICKET_LEN, MAX_TXT_STRING_LEN, VERSION_TAG,
};

fuzz_target!(|data: &[u8]| {
    let Some((&cut, text)) = data.split_first() else {
        return;
    };
    let strings: Vec<&[u8]> = match cut {
        0 => vec![text],
        n => text.chunks(usize::from(n)).collect(),
    };
    if let Ok(ticket) = ticket_from_txt(&strings) {
        assert!(ticket.len() <= MAX_TICKET_LEN);
        assert_eq!(
            ticket_txt_strings(&ticket).concat().as_bytes(),
            text,
            "accepted a non-canonical record"
        );
        let _ = smt_handshake::Ticket::decode(&ticket);
    }
    if text.len() <= MAX_TICKET_LEN {
        let strings = ticket_txt_strings(text);
        assert!(strings[0].starts_with(VERSION_TAG));
        assert!(strings
            .iter()
            .all(|s| !s.is_empty() && s.len() <= MAX_TXT_STRING_LEN));
        let refs: Vec<&[u8]> = strings.iter().map(|s| s.as_bytes()).collect();
        assert_eq!(ticket_from_txt(&refs).expect("own encoding decodes"), text);
    }
});
