//! The embedded server seen by a real DNS client, `dig`, whose answer is decoded here.
//!
//! Without `dig` on PATH, the test installs it through `scripts/dig-test.sh --install` when
//! running as root with apt-get available; otherwise (or if that fails) it prints SKIPPED and
//! passes.

use crate::common;

use std::{
    env,
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use common::{random_ticket, server, HOST};
use smt_dns::{ticket_domain, ticket_from_txt, TicketDnsServer};

#[test]
fn dig_reads_a_published_ticket() {
    if !dig_available() {
        return;
    }
    let server = server();
    let ticket = random_ticket(1400, 0xd16);
    server.publish(HOST, &ticket).unwrap();

    // Default: UDP with EDNS, truncated, then dig's own retry over TCP.
    let records = dig_txt(&server, HOST, &[]);
    let [strings] = &records[..] else {
        panic!("one TXT record expected: {records:?}")
    };
    let refs: Vec<&[u8]> = strings.iter().map(Vec::as_slice).collect();
    assert!(refs[0].starts_with(b"v=smt1;"));
    assert!(refs.iter().all(|s| s.len() <= 255));
    assert_eq!(ticket_from_txt(&refs).unwrap(), ticket);

    // TCP from the start gives the same record.
    assert_eq!(dig_txt(&server, HOST, &["+tcp"]), records);
}

#[test]
fn dig_sees_a_replaced_ticket_and_nothing_for_an_unknown_host() {
    if !dig_available() {
        return;
    }
    let server = server();
    server.publish(HOST, &random_ticket(1000, 1)).unwrap();
    let new = random_ticket(300, 2);
    server.publish(HOST, &new).unwrap();

    let records = dig_txt(&server, HOST, &[]);
    let [strings] = &records[..] else {
        panic!("one TXT record expected: {records:?}")
    };
    let refs: Vec<&[u8]> = strings.iter().map(Vec::as_slice).collect();
    assert_eq!(ticket_from_txt(&refs).unwrap(), new);

    assert!(dig_txt(&server, "nobody.smt.test", &[]).is_empty());
}

/// Runs `dig @addr -p port TXT _smt-ticket.<host>. +short` and parses each output line into
/// one record's character-strings.
fn dig_txt(server: &TicketDnsServer, host: &str, extra: &[&str]) -> Vec<Vec<Vec<u8>>> {
    let addr = server.local_addr();
    let output = Command::new("dig")
        .arg(format!("@{}", addr.ip()))
        .args(["-p", &addr.port().to_string()])
        .args(["TXT", &ticket_domain(host).unwrap()])
        .args(["+short", "+time=2", "+tries=2"])
        .args(extra)
        .output()
        .expect("run dig");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "dig failed: {output:?}");
    stdout
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            parse_quoted_strings(line).unwrap_or_else(|| panic!("unparsable dig line {line:?}"))
        })
        .collect()
}

/// Parses dig's presentation of one TXT record: `"abc" "d\"e" "\255"`, with `\X` for a
/// literal X and `\DDD` for a decimal byte (RFC 1035 §5.1). `None` if it is not that.
fn parse_quoted_strings(line: &str) -> Option<Vec<Vec<u8>>> {
    let mut bytes = line.trim().bytes();
    let mut strings = Vec::new();
    while let Some(b) = bytes.next() {
        match b {
            b' ' | b'\t' => continue,
            b'"' => strings.push(parse_one_string(&mut bytes)?),
            _ => return None,
        }
    }
    Some(strings)
}

/// Reads a quoted string's body up to and including its closing quote.
fn parse_one_string(bytes: &mut impl Iterator<Item = u8>) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        match bytes.next()? {
            b'"' => return Some(out),
            b'\\' => {
                let first = bytes.next()?;
                if !first.is_ascii_digit() {
                    out.push(first);
                    continue;
                }
                let (d2, d3) = (bytes.next()?, bytes.next()?);
                let digits = [first, d2, d3];
                let value = std::str::from_utf8(&digits).ok()?.parse::<u8>().ok()?;
                out.push(value);
            }
            b => out.push(b),
        }
    }
}

#[test]
fn parses_dig_presentation_format() {
    let got = parse_quoted_strings(r#""v=smt1;QUJD" "a\"b\\c" "\255\000""#).unwrap();
    assert_eq!(
        got,
        [b"v=smt1;QUJD".to_vec(), b"a\"b\\c".to_vec(), vec![255, 0]]
    );
    assert_eq!(parse_quoted_strings(r#""unterminated"#), None);
    assert_eq!(parse_quoted_strings("bare"), None);
}

/// True if `dig` is on PATH, installing it first (once per test binary) when running as
/// root with apt-get; prints SKIPPED otherwise.
fn dig_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    let available = *AVAILABLE.get_or_init(find_or_install_dig);
    if !available {
        println!("SKIPPED: dig is not installed (run scripts/dig-test.sh --install as root)");
    }
    available
}

fn find_or_install_dig() -> bool {
    if on_path("dig") {
        return true;
    }
    if is_root() && on_path("apt-get") {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/dig-test.sh");
        match Command::new("bash").arg(&script).arg("--install").status() {
            Ok(status) if status.success() && on_path("dig") => return true,
            result => eprintln!("installing dig failed: {result:?}"),
        }
    }
    false
}

fn on_path(program: &str) -> bool {
    let Some(path) = env::var_os("PATH") else {
        return false;
    };
    env::split_paths(&path)
        .map(|dir: PathBuf| dir.join(program))
        .any(|p| p.is_file())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}
