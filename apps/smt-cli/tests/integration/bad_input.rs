//! Every bad input found so far, through the real binary (issue 13, item
//! 6): each must stop `smt` with the expected status (2 for usage errors,
//! 1 for the rest), exactly one line on stderr that says what is wrong,
//! and no panic and no "I/O error:". Run with `-- --nocapture` to see each
//! input next to the message it gives.

use crate::common;

use std::path::Path;

use common::{free_addr, make_pki, psk, smt, smt_ok, start_server, temp_dir, Run, ANY_PORT};

/// Usage errors: the command line is wrong.
const USAGE: i32 = 2;
/// Everything else: a file, the peer, the machine.
const OTHER: i32 = 1;

/// One bad input: its arguments, its exit status, and words its message
/// must hold.
struct Case {
    args: Vec<String>,
    code: i32,
    says: String,
}

fn case(args: &[&str], code: i32, says: &str) -> Case {
    Case {
        args: args.iter().map(|a| a.to_string()).collect(),
        code,
        says: says.to_string(),
    }
}

/// Runs every case and fails with the list of those that went wrong.
fn check_all(cases: &[Case]) {
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
            let run = smt(&args);
            println!(
                "smt {args:?}\n    -> exit {:?}: {}",
                run.code,
                run.stderr.trim()
            );
            judge(c, &run)
                .err()
                .map(|why| format!("smt {args:?}: {why}\n    stderr: {}", run.stderr))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn judge(c: &Case, run: &Run) -> Result<(), String> {
    if run.code != Some(c.code) {
        return Err(format!("exit status {:?}, not {}", run.code, c.code));
    }
    let lines: Vec<&str> = run.stderr.lines().collect();
    let [line] = lines[..] else {
        return Err(format!("{} lines on stderr, not one", lines.len()));
    };
    if !line.starts_with("smt: error: ") || line.contains("I/O error") {
        return Err("not a plain `smt: error:` line".into());
    }
    if !line.contains(&c.says) {
        return Err(format!("the message does not say {:?}", c.says));
    }
    Ok(())
}

/// A valid key, and others cut from it.
fn keys() -> (String, String) {
    let key = psk();
    let odd = key[..63].to_string();
    (key, odd)
}

#[test]
fn bad_values_name_the_option_and_its_limits() {
    let (key, odd) = keys();
    let k = key.as_str();
    let non_ascii = format!("{odd}é");
    let client = |extra: &[&str], says: &str| {
        let mut args = vec!["client", "--psk", k];
        args.extend_from_slice(extra);
        case(&args, USAGE, says)
    };
    let seconds = "for '--seconds <SECONDS>': must be more than 0 and at most 2592000 seconds";
    let concurrency = "for '--concurrency <CONCURRENCY>': must be a whole number from 1 to 1024";
    let threads = "for '--threads <THREADS>': must be a whole number from 1 to 256";
    check_all(&[
        case(
            &["client", "--psk", "é"],
            USAGE,
            "--psk must be hex, but holds 'é' at byte 0",
        ),
        case(
            &["client", "--psk", &non_ascii],
            USAGE,
            "holds 'é' at byte 63",
        ),
        case(
            &["client", "--psk", &odd],
            USAGE,
            "odd number of hex digits (63)",
        ),
        case(
            &["client", "--psk", "abcd"],
            USAGE,
            "--psk is 2 bytes; at least 32",
        ),
        client(&["--seconds", "nan"], seconds),
        client(&["--seconds", "-1"], seconds),
        client(&["--seconds", "0"], seconds),
        client(&["--seconds", "inf"], seconds),
        client(&["--seconds", "1e300"], seconds),
        client(&["--seconds", "two"], "not a number of seconds"),
        client(&["--concurrency", "0"], concurrency),
        client(&["--concurrency", "100000"], concurrency),
        client(&["--concurrency", "-3"], concurrency),
        case(&["server", "--psk", k, "--threads", "0"], USAGE, threads),
        case(
            &["server", "--psk", k, "--threads", "100000"],
            USAGE,
            threads,
        ),
        client(
            &["--size", "2000000000"],
            "--size 2000000000 is larger than the largest SMT message, 67108864 bytes (64 MiB)",
        ),
        client(
            &["--size", "60000000", "--concurrency", "16"],
            "lower --concurrency to 4",
        ),
        client(
            &["--size", "-1"],
            "invalid value '-1' for '--size <SIZE>': must be a whole number of bytes",
        ),
        client(&["--mtu", "100"], "--mtu 100: invalid SMT configuration"),
        client(
            &["--mtu", "70000"],
            "must be a whole number from 68 to 65535",
        ),
        case(
            &["demo", "--sizes", "64,2000000000"],
            USAGE,
            "--sizes 2000000000 is larger than the largest SMT message",
        ),
        case(&["demo", "--concurrency", "0"], USAGE, concurrency),
        case(&["demo", "--seconds", "nan"], USAGE, seconds),
        case(
            &["bench-handshake", "--iterations", "0"],
            USAGE,
            "must be a whole number from 1 to 100000",
        ),
        case(
            &["server", "--psk", k, "--duration", "nan"],
            USAGE,
            "for '--duration <DURATION>': must be more than 0",
        ),
        case(
            &["server", "--psk", k, "--stats-interval", "0"],
            USAGE,
            "for '--stats-interval <SECS>': must be more than 0",
        ),
        client(&["--server", "localhost"], "the port is missing"),
        client(
            &["--server", "no-such-host.invalid:7878"],
            "cannot resolve it",
        ),
        case(
            &["server", "--psk", k, "--listen", "999.1.1.1:80"],
            USAGE,
            "cannot resolve it",
        ),
        client(&["--bogus"], "unexpected argument '--bogus' found"),
        case(
            &["frobnicate"],
            USAGE,
            "unrecognized subcommand 'frobnicate'",
        ),
        case(
            &[],
            USAGE,
            "`smt` needs a command: demo, server, client, keygen, bench-handshake, ca, cert, ticket",
        ),
        case(&["ca"], USAGE, "`smt ca` needs a command: init (see `smt ca --help`)"),
        case(
            &["server", "--psk", k, "--ip-protocol", "256"],
            USAGE,
            "256 is not in 0..=255",
        ),
        case(
            &["cert", "issue"],
            USAGE,
            "the following required arguments were not provided: --name <NAMES>",
        ),
        case(
            &[
                "ticket",
                "issue",
                "--cert",
                "c",
                "--key",
                "k",
                "--name",
                "n",
                "--lifetime",
                "x",
            ],
            USAGE,
            "invalid value 'x' for '--lifetime <LIFETIME>'",
        ),
    ]);
}

#[test]
fn contradictory_or_missing_keys_are_refused() {
    let (key, _) = keys();
    let k = key.as_str();
    let both = "--psk (or SMT_PSK) chooses a pre-shared key and --cert/--key/--ca choose TLS 1.3: \
                give one of the two";
    check_all(&[
        case(
            &["server", "--psk", k, "--cert", "c", "--key", "k"],
            USAGE,
            both,
        ),
        case(&["server", "--psk", k, "--ca", "ca"], USAGE, both),
        case(&["client", "--psk", k, "--ca", "ca"], USAGE, both),
        case(
            &["client", "--psk", k, "--cert", "c", "--key", "k"],
            USAGE,
            both,
        ),
        case(&["server", "--cert", "c"], USAGE, "--cert needs --key"),
        case(&["server", "--key", "k"], USAGE, "--key needs --cert"),
        case(&["server", "--ca", "ca"], USAGE, "add --cert and --key"),
        case(
            &["client", "--ca", "ca", "--cert", "c"],
            USAGE,
            "--cert needs --key",
        ),
        case(
            &["client", "--ca", "ca", "--key", "k"],
            USAGE,
            "--key needs --cert",
        ),
        case(
            &["client", "--cert", "c", "--key", "k"],
            USAGE,
            "--ca is needed too, to check the server's certificate",
        ),
        case(
            &["server"],
            USAGE,
            "no keys: give --cert and --key for TLS 1.3",
        ),
        case(&["client"], USAGE, "no keys: give --ca for TLS 1.3"),
    ]);
}

/// A CA, a server certificate for 127.0.0.1 and server.test, and a text
/// file that is no certificate: (CA directory, certificate, key, junk).
fn pki(dir: &Path) -> (String, String, String, String) {
    let pki = make_pki(dir, &["127.0.0.1", "server.test"]);
    let junk = dir.join("junk.txt");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    let junk = junk.to_str().unwrap().to_string();
    (pki.ca, pki.cert, pki.key, junk)
}

#[test]
fn unusable_files_are_named_with_the_reason() {
    let dir = temp_dir("bad-files");
    let d = dir.to_str().unwrap().to_string();
    let (ca, cert, key, junk) = pki(&dir);
    let ca_pem = format!("{ca}/ca.pem");
    std::fs::write(dir.join("binary"), [0xff, 0xfe, 0x00, 0x80]).unwrap();
    std::fs::create_dir(dir.join("empty")).unwrap();
    let binary = format!("{d}/binary");
    let empty = format!("{d}/empty");
    let ticket_out = format!("{d}/ticket");
    let ticket = |extra: &[&str], says: &str| {
        let mut args = vec!["ticket", "issue", "--cert", &cert, "--key", &key];
        args.extend_from_slice(&["--out", &ticket_out]);
        args.extend_from_slice(extra);
        case(&args, USAGE, says)
    };
    check_all(&[
        case(
            &["client", "--ca", "/nonexistent/ca.pem"],
            OTHER,
            "cannot read the CA certificate /nonexistent/ca.pem (--ca): no such file",
        ),
        case(
            &["client", "--ca", &d],
            OTHER,
            "(--ca) is a directory; give the file",
        ),
        case(
            &["client", "--ca", "/dev/zero"],
            OTHER,
            "the CA certificate /dev/zero (--ca) is larger than 1 MiB",
        ),
        case(
            &["server", "--cert", "/dev/zero", "--key", &key],
            OTHER,
            "the certificate /dev/zero (--cert) is larger than 1 MiB",
        ),
        case(
            &["client", "--ca", &junk],
            OTHER,
            "unusable TLS files (--ca ",
        ),
        case(
            &["server", "--cert", &cert, "--key", &cert],
            OTHER,
            "unusable private key",
        ),
        case(
            &[
                "client",
                "--ca",
                &ca_pem,
                "--cert",
                &cert,
                "--key",
                "/nonexistent/key.pem",
            ],
            OTHER,
            "cannot read the key /nonexistent/key.pem (--key): no such file",
        ),
        case(
            &["cert", "issue", "--ca", &empty, "--name", "x.test"],
            OTHER,
            "ca-key.pem (--ca): no such file",
        ),
        case(
            &["cert", "issue", "--ca", &ca_pem, "--name", "x.test"],
            USAGE,
            "is a file; give the directory made by `smt ca init`",
        ),
        case(
            &[
                "cert",
                "issue",
                "--ca",
                &ca,
                "--name",
                "",
                "--out",
                &format!("{d}/x"),
            ],
            USAGE,
            "--name: \"\" is neither an IP address nor a valid DNS name",
        ),
        case(
            &[
                "cert",
                "issue",
                "--ca",
                &ca,
                "--name",
                "999.1.1.1",
                "--out",
                &format!("{d}/x"),
            ],
            USAGE,
            "--name: \"999.1.1.1\" is neither an IP address nor a valid DNS name",
        ),
        case(
            &["ca", "init", "--dir", &format!("{d}/ca2"), "--name", " "],
            USAGE,
            "--name must not be empty",
        ),
        case(
            &["ticket", "show", "--ticket", &junk],
            OTHER,
            "is not a ticket",
        ),
        case(
            &["ticket", "show", "--ticket", &binary],
            OTHER,
            "(--ticket) is not text",
        ),
        ticket(&["--name", "127.0.0.1"], "cannot issue the ticket"),
        ticket(&["--name", "x.test"], "the certificate does not cover it"),
        ticket(
            &["--name", "server.test", "--lifetime", "7200"],
            "ticket lifetime of 7200 s is outside 1..=3600 s",
        ),
        case(
            &["keygen", "--out", &d, "--force"],
            OTHER,
            "it is a directory",
        ),
        case(
            &["keygen", "--out", "/nonexistent/dir/psk.key"],
            OTHER,
            "cannot write /nonexistent/dir/psk.key: its directory does not exist",
        ),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn existing_outputs_are_never_overwritten_without_force() {
    let dir = temp_dir("no-overwrite");
    let d = dir.to_str().unwrap().to_string();
    let (ca, cert, key, _) = pki(&dir);
    smt_ok(&["keygen", "--out", &format!("{d}/psk.key")]);
    let exists = "exists already; pass --force to overwrite it";
    check_all(&[
        case(&["ca", "init", "--dir", &ca], OTHER, exists),
        case(
            &[
                "cert",
                "issue",
                "--ca",
                &ca,
                "--name",
                "127.0.0.1",
                "--out",
                &format!("{d}/server"),
            ],
            OTHER,
            exists,
        ),
        case(&["keygen", "--out", &format!("{d}/psk.key")], OTHER, exists),
        case(
            &[
                "ticket",
                "issue",
                "--cert",
                &cert,
                "--key",
                &key,
                "--name",
                "server.test",
            ]
            .into_iter()
            .chain(["--out", &cert])
            .collect::<Vec<_>>(),
            OTHER,
            exists,
        ),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn failed_calls_say_why() {
    let dir = temp_dir("failed-calls");
    let d = dir.to_str().unwrap().to_string();
    let (ca, cert, key, _) = pki(&dir);
    let ca_pem = format!("{ca}/ca.pem");
    smt_ok(&["ca", "init", "--dir", &format!("{d}/other-ca")]);
    let other_ca = format!("{d}/other-ca");
    let issue = |ca: &str, name: &str, out: &str, client: bool| {
        let out = format!("{d}/{out}");
        let mut args = vec!["cert", "issue", "--ca", ca, "--name", name, "--out", &out];
        if client {
            args.push("--client");
        }
        smt_ok(&args);
    };
    issue(&ca, "127.0.0.2", "elsewhere", false);
    issue(&other_ca, "client.test", "stranger", true);
    let (key_a, key_b) = (psk(), psk());
    let tls = start_server(ANY_PORT, &["--cert", &cert, "--key", &key]);
    let mutual = start_server(ANY_PORT, &["--cert", &cert, "--key", &key, "--ca", &ca_pem]);
    let elsewhere = start_server(
        ANY_PORT,
        &[
            "--cert",
            &format!("{d}/elsewhere.pem"),
            "--key",
            &format!("{d}/elsewhere-key.pem"),
        ],
    );
    let psk_server = start_server(ANY_PORT, &["--psk", &key_a]);
    let dead = free_addr();
    let stranger = [
        "--cert",
        &format!("{d}/stranger.pem"),
        "--key",
        &format!("{d}/stranger-key.pem"),
    ]
    .map(String::from);
    let client = |server: &str, keys: &[&str], says: &str| {
        let mut args = vec!["client", "--server", server, "--seconds", "0.3"];
        args.extend_from_slice(keys);
        case(&args, OTHER, says)
    };
    let other_ca_pem = format!("{other_ca}/ca.pem");
    let stranger: Vec<&str> = ["--ca", ca_pem.as_str()]
        .into_iter()
        .chain(stranger.iter().map(String::as_str))
        .collect();
    check_all(&[
        client(
            &tls.addr,
            &["--ca", &other_ca_pem],
            "bad certificate: invalid peer certificate: BadSignature; is --ca the CA that \
             issued the server's certificate?",
        ),
        client(
            &elsewhere.addr,
            &["--ca", &ca_pem],
            "certificate is for another name",
        ),
        client(
            &mutual.addr,
            &["--ca", &ca_pem],
            "the session was closed; the server ended the session after the handshake, as one \
             that requires a client certificate does: give --cert and --key",
        ),
        client(
            &mutual.addr,
            &stranger,
            "does it trust the CA that issued --cert?",
        ),
        client(
            &tls.addr,
            &["--psk", &key_a],
            "a server using TLS does not answer a PSK hello",
        ),
        client(
            &psk_server.addr,
            &["--ca", &ca_pem],
            "a server using --psk does not answer a TLS handshake",
        ),
        client(
            &psk_server.addr,
            &["--psk", &key_b],
            "RPC timed out: the peer stopped answering; the server drops calls under another \
             key: is --psk the server's?",
        ),
        client(
            &dead,
            &["--psk", &key_a],
            &format!(
                "cannot reach an SMT server at {dead} using pre-shared key: handshake \
                      failed: the peer is unreachable (ICMP)"
            ),
        ),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server that goes away during the run: the client stops at the first
/// failed call and reports how many failed and why the first did.
#[test]
fn calls_failing_mid_run_report_the_first_cause() {
    let key = psk();
    let run = {
        let server = start_server(ANY_PORT, &["--psk", &key, "--duration", "1"]);
        smt(&[
            "client",
            "--server",
            &server.addr,
            "--psk",
            &key,
            "--seconds",
            "5",
        ])
    };
    println!(
        "server gone mid-run -> exit {:?}: {}",
        run.code,
        run.stderr.trim()
    );
    let says = case(&[], OTHER, "RPCs failed; the first because: RPC failed: ");
    judge(&says, &run).unwrap_or_else(|why| panic!("{why}: {}", run.stderr));
}

/// Addresses a server cannot listen on: not this host's, or taken.
#[test]
fn unusable_listen_addresses_are_named() {
    let key = psk();
    let taken = start_server(ANY_PORT, &["--psk", &key]);
    let in_use = format!(
        "cannot open --listen address {0}: address {0} is already in use by another socket",
        taken.addr
    );
    check_all(&[
        case(
            &["server", "--psk", &key, "--listen", "192.0.2.1:7878"],
            OTHER,
            "cannot open --listen address 192.0.2.1:7878: cannot set up the socket",
        ),
        case(
            &["server", "--psk", &key, "--listen", &taken.addr],
            OTHER,
            &in_use,
        ),
    ]);
}
