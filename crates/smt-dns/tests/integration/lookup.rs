//! The embedded server and the resolver client, end to end over loopback UDP and TCP.

use crate::common;

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream, UdpSocket},
    time::Duration,
};

use common::{random_ticket, server, HOST, ZONE};
use hickory_server::proto::{
    op::{Message, Query},
    rr::{Name, RData, RecordType},
};
use smt_dns::{
    lookup_ticket, lookup_ticket_async, ticket_domain, ticket_from_txt, DnsError, LookupOptions,
    TicketDnsServer, MAX_TICKET_LEN,
};

#[test]
fn a_published_ticket_is_looked_up_intact() {
    let server = server();
    let ticket = random_ticket(1400, 0x5eed_0001);
    server.publish(HOST, &ticket).unwrap();

    // 1400 bytes make a ~1.9 KB record: UDP is truncated and the lookup retries over TCP.
    assert_eq!(lookup_ticket(server.local_addr(), HOST).unwrap(), ticket);
}

#[test]
fn a_large_record_is_truncated_over_udp_and_whole_over_tcp() {
    let server = server();
    let ticket = random_ticket(1400, 0x5eed_0002);
    server.publish(HOST, &ticket).unwrap();
    let query = txt_query(HOST);

    let udp = query_udp(server.local_addr(), &query);
    assert!(
        udp.metadata.truncation,
        "a ~1.9 KB answer cannot fit 512 bytes"
    );

    let tcp = query_tcp(server.local_addr(), &query);
    assert!(!tcp.metadata.truncation);
    assert!(tcp.metadata.authoritative);
    let [answer] = &tcp.answers[..] else {
        panic!("one TXT answer: {:?}", tcp.answers)
    };
    assert_eq!(answer.ttl, smt_dns::TICKET_TTL_SECS);
    let RData::TXT(txt) = &answer.data else {
        panic!("not TXT: {answer:?}")
    };
    assert_eq!(
        txt.txt_data.len(),
        8,
        "1875 bytes of text in 255-byte strings"
    );
    let strings: Vec<&[u8]> = txt.txt_data.iter().map(|s| &s[..]).collect();
    assert_eq!(ticket_from_txt(&strings).unwrap(), ticket);
}

#[test]
fn a_replaced_ticket_is_served_in_place_of_the_old_one() {
    let server = server();
    let old = random_ticket(1400, 1);
    let new = random_ticket(900, 2);
    server.publish(HOST, &old).unwrap();
    assert_eq!(lookup_ticket(server.local_addr(), HOST).unwrap(), old);

    server.publish(HOST, &new).unwrap();
    assert_eq!(lookup_ticket(server.local_addr(), HOST).unwrap(), new);
}

#[test]
fn small_tickets_fit_in_udp() {
    let server = server();
    for len in [0, 1, 100, 300] {
        let ticket = random_ticket(len, len as u64);
        server.publish(HOST, &ticket).unwrap();
        assert_eq!(
            lookup_ticket(server.local_addr(), HOST).unwrap(),
            ticket,
            "len {len}"
        );
    }
}

#[test]
fn the_largest_ticket_goes_through() {
    let server = server();
    let ticket = random_ticket(MAX_TICKET_LEN, 3);
    server.publish(HOST, &ticket).unwrap();
    assert_eq!(lookup_ticket(server.local_addr(), HOST).unwrap(), ticket);
}

#[test]
fn hosts_have_separate_tickets_and_names_ignore_case_and_final_dot() {
    let server = server();
    let (a, b) = (random_ticket(600, 4), random_ticket(700, 5));
    server.publish("a.smt.test", &a).unwrap();
    server.publish("B.smt.test.", &b).unwrap();
    assert_eq!(
        lookup_ticket(server.local_addr(), "A.SMT.test.").unwrap(),
        a
    );
    assert_eq!(lookup_ticket(server.local_addr(), "b.smt.test").unwrap(), b);
}

#[test]
fn an_unknown_host_is_not_found() {
    let server = server();
    server.publish(HOST, &random_ticket(100, 6)).unwrap();
    match lookup_ticket(server.local_addr(), "nobody.smt.test") {
        Err(DnsError::NotFound { name }) => assert_eq!(name, "_smt-ticket.nobody.smt.test."),
        other => panic!("expected NotFound, got {other:?}"),
    }
}

#[test]
fn a_withdrawn_ticket_is_not_found() {
    let server = server();
    server.publish(HOST, &random_ticket(100, 7)).unwrap();
    assert!(server.withdraw(HOST).unwrap());
    assert!(!server.withdraw(HOST).unwrap());
    let got = lookup_ticket(server.local_addr(), HOST);
    assert!(matches!(got, Err(DnsError::NotFound { .. })), "{got:?}");
}

#[test]
fn a_host_outside_the_zone_is_refused_by_the_server() {
    let server = server();
    let got = lookup_ticket(server.local_addr(), "server.elsewhere.test");
    assert!(matches!(got, Err(DnsError::Resolve(_))), "{got:?}");
}

#[test]
fn publishing_checks_the_callers_input() {
    let server = server();
    let got = server.publish("server.elsewhere.test", &[1]);
    assert!(matches!(got, Err(DnsError::OutOfZone { .. })), "{got:?}");
    let got = server.publish(HOST, &vec![0; MAX_TICKET_LEN + 1]);
    assert!(
        matches!(got, Err(DnsError::TicketTooLarge { .. })),
        "{got:?}"
    );
    let got = server.publish("bad..name.smt.test", &[1]);
    assert!(matches!(got, Err(DnsError::InvalidHost { .. })), "{got:?}");
    assert!(matches!(
        TicketDnsServer::spawn("127.0.0.1:0".parse().unwrap(), "bad..zone"),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput
    ));
}

#[test]
fn a_silent_server_times_out() {
    // Bound but never read: queries vanish without an ICMP error.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut options = LookupOptions::default();
    options.timeout = Duration::from_millis(200);
    options.attempts = 1;
    let got = options.lookup(silent.local_addr().unwrap(), HOST);
    assert!(matches!(got, Err(DnsError::Timeout)), "{got:?}");
}

#[test]
fn a_dropped_server_stops_answering() {
    let server = server();
    server.publish(HOST, &random_ticket(100, 8)).unwrap();
    let addr = server.local_addr();
    drop(server);
    let mut options = LookupOptions::default();
    options.timeout = Duration::from_millis(200);
    options.attempts = 1;
    let got = options.lookup(addr, HOST);
    assert!(
        matches!(got, Err(DnsError::Timeout | DnsError::Io(_))),
        "{got:?}"
    );
}

#[tokio::test]
async fn async_lookup_and_blocking_lookup_inside_a_runtime() {
    let server = server();
    let ticket = random_ticket(1400, 9);
    server.publish(HOST, &ticket).unwrap();
    assert_eq!(
        lookup_ticket_async(server.local_addr(), HOST)
            .await
            .unwrap(),
        ticket
    );
    // The blocking call must not panic inside a runtime: it moves to a helper thread.
    assert_eq!(lookup_ticket(server.local_addr(), HOST).unwrap(), ticket);
}

#[test]
fn server_reports_its_zone_and_address() {
    let server = server();
    assert_eq!(server.zone(), format!("{ZONE}."));
    assert!(server.local_addr().ip().is_loopback());
    assert_ne!(server.local_addr().port(), 0);
    assert!(format!("{server:?}").contains("smt.test."));
}

/// A plain (no EDNS) TXT query for `host`'s ticket record, as wire bytes.
fn txt_query(host: &str) -> Vec<u8> {
    let name = Name::from_ascii(ticket_domain(host).unwrap()).unwrap();
    let mut query = Message::query();
    query.add_query(Query::query(name, RecordType::TXT));
    query.to_vec().unwrap()
}

fn query_udp(server: SocketAddr, query: &[u8]) -> Message {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    socket.send_to(query, server).unwrap();
    let mut buf = [0; 4096];
    let (len, _) = socket.recv_from(&mut buf).unwrap();
    assert!(
        len <= 512,
        "a UDP answer without EDNS is at most 512 bytes, got {len}"
    );
    Message::from_vec(&buf[..len]).unwrap()
}

/// One query over TCP, framed with its two-byte length (RFC 1035 §4.2.2).
fn query_tcp(server: SocketAddr, query: &[u8]) -> Message {
    let mut stream = TcpStream::connect(server).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let len = u16::try_from(query.len()).unwrap().to_be_bytes();
    stream.write_all(&[&len[..], query].concat()).unwrap();
    let mut len = [0; 2];
    stream.read_exact(&mut len).unwrap();
    let mut answer = vec![0; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut answer).unwrap();
    Message::from_vec(&answer).unwrap()
}
