//! Pathlet feedback (`ProtocolConfig::pathlet_feedback`) over real UDP
//! sockets on loopback: with a PATH in front of every datagram that carries
//! DATA (and GSO/GRO batching those datagrams), calls small and large
//! complete. Nothing on loopback fills the PATH slots, so the windows stay
//! open; the marking device's effect is tested in smt-proto's
//! `tests/pathlet_endpoint.rs`.

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{Endpoint, EndpointConfig};

fn bind_with_feedback() -> Endpoint {
    let mut config = EndpointConfig::default();
    config.protocol_mut().set_pathlet_feedback(true);
    Endpoint::bind("127.0.0.1:0".parse().unwrap(), config).expect("bind")
}

#[test]
fn calls_complete_with_pathlet_feedback_on() {
    let (client, server) = (bind_with_feedback(), bind_with_feedback());
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    let s = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = s.accept() {
            let up = req.data().to_ascii_uppercase();
            let _ = req.respond(&up);
        }
    });
    let small = client.call(server.local_addr(), b"hello pathlets").unwrap();
    assert_eq!(small, &b"HELLO PATHLETS"[..]);
    let big: Vec<u8> = (0..(1 << 20)).map(|i| b'a' + (i % 26) as u8).collect();
    for _ in 0..3 {
        let resp = client.call(server.local_addr(), &big).unwrap();
        assert_eq!(resp, big.to_ascii_uppercase());
    }
    assert_eq!(client.stats().unwrap().total.rpcs.completed, 4);
}
