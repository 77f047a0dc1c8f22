//! The ticket record: its name and its TXT layout. See the crate docs for the format.

use hickory_server::proto::rr::Name;

use crate::{
    error::{DnsError, MalformedRecord},
    strict_base64 as base64,
};

/// The leaf label under which a host's ticket is published: `_smt-ticket.<host>.`.
pub const TICKET_LABEL: &str = "_smt-ticket";

/// The version tag that opens the first character-string of a ticket record.
pub const VERSION_TAG: &str = "v=smt1;";

/// The largest ticket, in bytes, that is published or accepted (16 KiB).
pub const MAX_TICKET_LEN: usize = 16 * 1024;

/// The longest DNS character-string (RFC 1035 §3.3: one length octet).
pub const MAX_TXT_STRING_LEN: usize = 255;

/// Any record text longer than this cannot hold a ticket within [`MAX_TICKET_LEN`].
const MAX_TEXT_LEN: usize = VERSION_TAG.len() + base64::encoded_len(MAX_TICKET_LEN);

/// Common start of every version tag, known or not; lets a client tell an SMT ticket record
/// of a newer version from an unrelated TXT record at the same name.
const TAG_FAMILY: &[u8] = b"v=smt";

/// Longest version tag considered when reporting an unsupported one.
const MAX_TAG_LEN: usize = 16;

/// Splits `ticket` into the character-strings of one TXT record: the first is
/// [`VERSION_TAG`] followed by base64 text, the rest carry more base64 text, each at most
/// [`MAX_TXT_STRING_LEN`] bytes. An empty ticket gives the tag alone.
///
/// This does not check [`MAX_TICKET_LEN`]; [`TicketDnsServer::publish`] does, and
/// [`ticket_from_txt`] rejects larger records.
///
/// [`TicketDnsServer::publish`]: crate::TicketDnsServer::publish
pub fn ticket_txt_strings(ticket: &[u8]) -> Vec<String> {
    let text = format!("{VERSION_TAG}{}", base64::encode(ticket));
    // NOTE(unwrap): the text is ASCII, so any byte boundary is a char boundary.
    text.as_bytes()
        .chunks(MAX_TXT_STRING_LEN)
        .map(|chunk| std::str::from_utf8(chunk).unwrap().to_owned())
        .collect()
}

/// Decodes the ticket from the character-strings of one TXT record.
///
/// The strings are concatenated first, so where the publisher split them does not matter.
/// The text must start with [`VERSION_TAG`] and continue with canonical padded base64
/// (RFC 4648 §4) of at most [`MAX_TICKET_LEN`] bytes. Never panics, whatever the input.
pub fn ticket_from_txt(strings: &[&[u8]]) -> Result<Vec<u8>, DnsError> {
    if strings.is_empty() {
        return Err(MalformedRecord::Empty.into());
    }
    let len = strings.iter().map(|s| s.len()).sum();
    if len > MAX_TEXT_LEN {
        return Err(MalformedRecord::TextTooLong {
            len,
            max: MAX_TEXT_LEN,
        }
        .into());
    }
    let text = strings.concat();
    let ticket = base64::decode(strip_version_tag(&text)?)?;
    if ticket.len() > MAX_TICKET_LEN {
        let len = ticket.len();
        return Err(MalformedRecord::TicketTooLarge {
            len,
            max: MAX_TICKET_LEN,
        }
        .into());
    }
    Ok(ticket)
}

/// True if the record's text starts like an SMT ticket record of any version.
pub(crate) fn is_ticket_record(strings: &[&[u8]]) -> bool {
    let head: Vec<u8> = strings
        .iter()
        .flat_map(|s| s.iter())
        .take(TAG_FAMILY.len())
        .copied()
        .collect();
    head == TAG_FAMILY
}

/// Returns the text after a supported version tag.
fn strip_version_tag(text: &[u8]) -> Result<&[u8], MalformedRecord> {
    if let Some(body) = text.strip_prefix(VERSION_TAG.as_bytes()) {
        return Ok(body);
    }
    if !text.starts_with(TAG_FAMILY) {
        return Err(MalformedRecord::MissingVersion);
    }
    let head = &text[..text.len().min(MAX_TAG_LEN)];
    let tag = match head.iter().position(|&b| b == b';') {
        Some(end) => &head[..=end],
        None => head,
    };
    Err(MalformedRecord::UnsupportedVersion(
        String::from_utf8_lossy(tag).into_owned(),
    ))
}

/// The fully qualified record name for `host`, e.g. `_smt-ticket.server.example.`.
///
/// `host` is an ASCII host name (IDNs in their `xn--` form), with or without the final dot.
pub fn ticket_domain(host: &str) -> Result<String, DnsError> {
    Ok(ticket_name(host)?.to_ascii())
}

/// [`ticket_domain`] as a hickory name.
pub(crate) fn ticket_name(host: &str) -> Result<Name, DnsError> {
    let invalid = |reason: &str| DnsError::InvalidHost {
        host: host.to_owned(),
        reason: reason.to_owned(),
    };
    let bare = host.strip_suffix('.').unwrap_or(host);
    if bare.is_empty() {
        return Err(invalid("empty host name"));
    }
    if !bare.is_ascii() {
        return Err(invalid("not ASCII; give IDNs in their xn-- form"));
    }
    if bare.split('.').any(str::is_empty) {
        return Err(invalid("empty label"));
    }
    Name::from_ascii(format!("{TICKET_LABEL}.{bare}.")).map_err(|e| invalid(&e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic bytes for tests: xorshift64*.
    fn pseudo_random(len: usize, mut seed: u64) -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
            })
            .collect()
    }

    fn decode(strings: &[String]) -> Result<Vec<u8>, DnsError> {
        let refs: Vec<&[u8]> = strings.iter().map(|s| s.as_bytes()).collect();
        ticket_from_txt(&refs)
    }

    fn malformed(strings: &[&[u8]]) -> MalformedRecord {
        match ticket_from_txt(strings) {
            Err(DnsError::Malformed(why)) => why,
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    #[test]
    fn round_trip_every_size_to_4000() {
        for len in 0..4000 {
            let ticket = pseudo_random(len, len as u64 + 1);
            let strings = ticket_txt_strings(&ticket);
            assert!(strings[0].starts_with(VERSION_TAG));
            assert!(strings
                .iter()
                .all(|s| !s.is_empty() && s.len() <= MAX_TXT_STRING_LEN));
            assert_eq!(decode(&strings).unwrap(), ticket, "len {len}");
        }
    }

    #[test]
    fn empty_ticket_is_the_tag_alone() {
        assert_eq!(ticket_txt_strings(&[]), [VERSION_TAG]);
        assert_eq!(ticket_from_txt(&[b"v=smt1;"]).unwrap(), b"");
    }

    #[test]
    fn typical_ticket_layout() {
        let strings = ticket_txt_strings(&[0xa5; 1400]);
        // 1400 bytes -> 1868 base64 symbols + 7-byte tag = 1875 bytes in 8 strings.
        let lens: Vec<usize> = strings.iter().map(String::len).collect();
        assert_eq!(lens, [255, 255, 255, 255, 255, 255, 255, 90]);
    }

    #[test]
    fn any_split_of_the_text_decodes() {
        let ticket = pseudo_random(100, 7);
        let text = ticket_txt_strings(&ticket).concat();
        for split in [1, 3, 7, 64, 200] {
            let strings: Vec<&[u8]> = text.as_bytes().chunks(split).collect();
            assert_eq!(ticket_from_txt(&strings).unwrap(), ticket, "split {split}");
        }
    }

    #[test]
    fn largest_ticket_round_trips_and_one_more_byte_is_rejected() {
        let ticket = pseudo_random(MAX_TICKET_LEN, 9);
        assert_eq!(decode(&ticket_txt_strings(&ticket)).unwrap(), ticket);
        // Base64 rounds up to whole groups of three bytes: this text is no longer than the
        // largest valid one, so only the decoded length catches it.
        let too_big = ticket_txt_strings(&pseudo_random(MAX_TICKET_LEN + 1, 9));
        let refs: Vec<&[u8]> = too_big.iter().map(|s| s.as_bytes()).collect();
        let want = MalformedRecord::TicketTooLarge {
            len: MAX_TICKET_LEN + 1,
            max: MAX_TICKET_LEN,
        };
        assert_eq!(malformed(&refs), want);
    }

    #[test]
    fn split_version_tag_is_fine() {
        assert_eq!(
            ticket_from_txt(&[b"v=smt1", b";Zm9v", b"Zg=="]).unwrap(),
            b"foof"
        );
    }

    #[test]
    fn rejects_garbage_with_a_reason() {
        let cases: [(&[&[u8]], MalformedRecord); 8] = [
            (&[], MalformedRecord::Empty),
            (&[b""], MalformedRecord::MissingVersion),
            (&[b"Zm9v"], MalformedRecord::MissingVersion),
            (&[b"v=spf1 -all"], MalformedRecord::MissingVersion),
            (
                &[b"v=smt2;Zm9v"],
                MalformedRecord::UnsupportedVersion("v=smt2;".into()),
            ),
            (
                &[b"v=smt1;Zg==", b"Zm9v"],
                MalformedRecord::Base64Padding { offset: 2 },
            ),
            (
                &[b"v=smt1;Zm9v\n"],
                MalformedRecord::Base64Length { len: 5 },
            ),
            (
                &[b"v=smt1;Zm\xff="],
                MalformedRecord::Base64Symbol {
                    offset: 2,
                    byte: 0xff,
                },
            ),
        ];
        for (strings, want) in cases {
            assert_eq!(malformed(strings), want, "{strings:?}");
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        for len in 0..600 {
            let noise = pseudo_random(len, 0x5eed + len as u64);
            for split in [1, 7, 255] {
                let strings: Vec<&[u8]> = noise.chunks(split).collect();
                let _ = ticket_from_txt(&strings);
                let mut tagged = b"v=smt1;".to_vec();
                tagged.extend_from_slice(&noise);
                let _ = ticket_from_txt(&[&tagged]);
            }
        }
    }

    #[test]
    fn oversized_text_is_rejected_before_decoding() {
        let huge = vec![b'A'; 100_000];
        let want = MalformedRecord::TextTooLong {
            len: 100_007,
            max: MAX_TEXT_LEN,
        };
        assert_eq!(malformed(&[b"v=smt1;", &huge]), want);
    }

    #[test]
    fn recognises_records_of_any_smt_version() {
        assert!(is_ticket_record(&[b"v=s", b"mt9;x"]));
        assert!(!is_ticket_record(&[b"v=spf1"]));
        assert!(!is_ticket_record(&[]));
    }

    #[test]
    fn ticket_domains() {
        assert_eq!(
            ticket_domain("server.example").unwrap(),
            "_smt-ticket.server.example."
        );
        assert_eq!(
            ticket_domain("server.example.").unwrap(),
            "_smt-ticket.server.example."
        );
        for bad in ["", ".", "a..b", "sérver.example", &"x".repeat(64)] {
            assert!(
                matches!(ticket_domain(bad), Err(DnsError::InvalidHost { .. })),
                "{bad:?}"
            );
        }
    }
}
