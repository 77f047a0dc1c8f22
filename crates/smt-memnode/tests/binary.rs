//! The `smt-memnode` binary as a user runs it: a PSK server on loopback,
//! reached by a plain SMT client speaking the wire format (sealed bytes
//! are opaque to the node, so any 4112 bytes do), and its refusals of
//! bad command lines.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use smt::keys::{AeadAlgorithm, PskClient};
use smt::{EndpointConfig, LocalEndpoint, LocalEvent};
use smt_memnode::wire::{PageStatus, Request, Response, StoredPage};
use smt_pagecrypt::SEALED_LEN;

const PSK: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the binary and reads the address from its banner.
fn start(extra: &[&str]) -> (Node, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_smt-memnode"))
        .args(["--listen", "127.0.0.1:0", "--psk", PSK, "--duration", "60"])
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .expect("run smt-memnode");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("banner");
    let addr = line
        .split_whitespace()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in banner {line:?}"));
    (Node(child), addr)
}

fn call(ep: &mut LocalEndpoint, to: SocketAddr, request: &Request) -> Response {
    let mut bytes = Vec::new();
    request.emit(&mut bytes);
    let id = ep.call(to, &bytes).expect("call");
    loop {
        match ep.poll(Some(Duration::from_secs(30))).expect("poll") {
            Some(LocalEvent::Response { call, data }) if call == id => {
                return Response::parse(&data).expect("a response")
            }
            Some(LocalEvent::Failed { error, .. }) => panic!("call failed: {error}"),
            Some(_) => {}
            None => panic!("no response in 30 s"),
        }
    }
}

#[test]
fn the_binary_stores_and_returns_pages_over_psk_sessions() {
    let (_node, addr) = start(&["--capacity-pages", "1"]);
    let mut ep =
        LocalEndpoint::bind(([127, 0, 0, 1], 0).into(), EndpointConfig::default()).unwrap();
    let psk = hex::decode(PSK).unwrap();
    ep.set_psk_client(PskClient::new(&psk, AeadAlgorithm::Aes128Gcm));
    let page = StoredPage {
        key: 3,
        bytes: Box::new([0xab; SEALED_LEN]),
    };
    let written = call(
        &mut ep,
        addr,
        &Request::Write(vec![(4096, page.clone()), (8192, page.clone())]),
    );
    assert_eq!(
        written,
        Response::Write(vec![PageStatus::OK, PageStatus::NO_CAPACITY])
    );
    match call(&mut ep, addr, &Request::Read(vec![4096, 8192, 5])) {
        Response::Read(pages) => {
            assert_eq!(pages[0].as_ref().unwrap(), &page);
            assert_eq!(pages[1], Err(PageStatus::NOT_WRITTEN));
            assert_eq!(pages[2], Err(PageStatus::MISALIGNED));
        }
        other => panic!("{other:?}"),
    }
    match call(&mut ep, addr, &Request::Info) {
        Response::Info(i) => assert_eq!((i.capacity_pages, i.used_pages), (1, 1)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_command_lines_are_refused_with_the_reason() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_smt-memnode"))
            .args(args)
            .env_remove("SMT_PSK")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(run(&["--duration", "0"]).contains("no keys"));
    assert!(run(&["--psk", "abcd"]).contains("at least 32 bytes"));
    assert!(run(&["--psk", "xyz"]).contains("must be hex"));
    assert!(run(&["--psk", PSK, "--address-limit", "4095"]).contains("multiple of 4096"));
}
