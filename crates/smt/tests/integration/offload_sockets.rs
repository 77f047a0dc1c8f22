//! TLS offload over real UDP sockets (`EndpointConfig::offload`, issue 15
//! item 6): the engine model's worker threads seal and send, its receive
//! contexts decrypt; an offloading endpoint talks to a software one in
//! either role, and to another offloading one.

use std::net::SocketAddr;

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::offload::OffloadConfig;
use smt::{Endpoint, EndpointConfig};

fn config(offload: bool) -> EndpointConfig {
    let mut config = EndpointConfig::default();
    config.set_offload(offload.then(OffloadConfig::default));
    config
}

fn message(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

/// Binds a client and an echo server, installs keys, runs calls of
/// several sizes (one at a time, then eight at once), and returns both
/// endpoints for their counters.
fn echo(client_offload: bool, server_offload: bool) -> (Endpoint, Endpoint) {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = Endpoint::bind(any, config(server_offload)).unwrap();
    let client = Endpoint::bind(any, config(client_offload)).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    let echo = server.clone();
    std::thread::spawn(move || {
        while let Ok(mut req) = echo.accept() {
            let data = req.take_data();
            let _ = req.respond(data);
        }
    });
    let to = server.local_addr();
    for (i, len) in [0, 1, 100, 1500, 16384, 16385, 70_000, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let req = message(i, len);
        let resp = client.call(to, &req).unwrap();
        assert_eq!(&resp[..], &req[..], "{len} bytes");
    }
    std::thread::scope(|s| {
        for t in 0..8 {
            let client = &client;
            s.spawn(move || {
                for i in 0..10 {
                    let req = message(t * 100 + i, 1000 + 7919 * i);
                    let resp = client.call(to, &req).unwrap();
                    assert_eq!(&resp[..], &req[..]);
                }
            });
        }
    });
    (client, server)
}

#[test]
fn offloading_client_and_software_server() {
    let (client, server) = echo(true, false);
    let c = client.offload_counters().unwrap().expect("offload on");
    assert!(c.tx.tx_tls_encrypted_packets > 0, "{c}");
    assert!(c.rx.rx_tls_decrypted_packets > 0, "{c}");
    assert_eq!(c.tx.drops(), 0, "{c}");
    assert_eq!(server.offload_counters().unwrap(), None);
    println!("client (offload):\n{c}");
    client.close();
    server.close();
}

#[test]
fn software_client_and_offloading_server() {
    let (client, server) = echo(false, true);
    let c = server.offload_counters().unwrap().expect("offload on");
    assert!(
        c.tx.tx_tls_encrypted_packets > 0 && c.rx.rx_tls_decrypted_packets > 0,
        "{c}"
    );
    assert_eq!(c.tx.drops(), 0, "{c}");
    println!("server (offload):\n{c}");
    client.close();
    server.close();
}

#[test]
fn offloading_client_and_offloading_server() {
    let (client, server) = echo(true, true);
    for ep in [&client, &server] {
        let c = ep.offload_counters().unwrap().expect("offload on");
        assert!(
            c.tx.tx_tls_encrypted_packets > 0 && c.rx.rx_tls_decrypted_packets > 0,
            "{c}"
        );
        let stats = ep.stats().unwrap().total;
        assert!(stats.records.offloaded > 0, "{stats:?}");
    }
    client.close();
    server.close();
}
