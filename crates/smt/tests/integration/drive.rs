//! The threaded endpoint with its callers driving the engine: many
//! blocking callers at once, blocking and async callers mixed, a caller
//! whose peer is silent next to callers whose peer answers, and a close
//! while callers drive. No timing thresholds: only outcomes are checked.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{Endpoint, EndpointConfig, Error};

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn bind(config: EndpointConfig) -> Endpoint {
    Endpoint::bind(any_port(), config).unwrap()
}

/// A client and a server with fresh keys; `threads` server threads answer
/// every request with its bytes reversed.
fn pair(threads: usize) -> (Endpoint, Endpoint) {
    let server = bind(EndpointConfig::default());
    let client = bind(EndpointConfig::default());
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    for _ in 0..threads {
        let s = server.clone();
        std::thread::spawn(move || {
            while let Ok(mut req) = s.accept() {
                let mut data = req.take_data().to_vec();
                data.reverse();
                let _ = req.respond(&data);
            }
        });
    }
    (client, server)
}

/// A request unique to `(thread, i)`, of a size that varies with `i`.
fn request(thread: usize, i: usize) -> Vec<u8> {
    let len = [8, 64, 700, 3000][i % 4];
    let mut v: Vec<u8> = (0..len).map(|b| (b * 7 + i + thread) as u8).collect();
    v[..8].copy_from_slice(&((thread as u64) << 32 | i as u64).to_le_bytes());
    v
}

fn reversed(v: &[u8]) -> Vec<u8> {
    v.iter().rev().copied().collect()
}

#[test]
fn sixteen_threads_make_five_hundred_blocking_calls_each() {
    let (client, server) = pair(2);
    let to = server.local_addr();
    let start = Arc::new(Barrier::new(16));
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let (client, start) = (client.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for i in 0..500 {
                    let req = request(t, i);
                    let resp = client.call(to, &req).expect("every call succeeds");
                    assert_eq!(resp, reversed(&req), "thread {t} call {i}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = client.stats().unwrap().total;
    assert_eq!(stats.rpcs.completed, 16 * 500);
    assert_eq!(stats.rpcs.failed, 0);
}

#[test]
fn blocking_and_async_callers_mixed() {
    let (client, server) = pair(2);
    let to = server.local_addr();
    let blocking: Vec<_> = (0..4)
        .map(|t| {
            let client = client.clone();
            std::thread::spawn(move || {
                for i in 0..300 {
                    let req = request(t, i);
                    assert_eq!(client.call(to, &req).unwrap(), reversed(&req));
                }
            })
        })
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..8)
            .map(|t| {
                let client = client.clone();
                tokio::spawn(async move {
                    for i in 0..150 {
                        let req = request(100 + t, i);
                        assert_eq!(client.call_async(to, &req).await.unwrap(), reversed(&req));
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
    for t in blocking {
        t.join().unwrap();
    }
    assert_eq!(
        client.stats().unwrap().total.rpcs.completed,
        4 * 300 + 8 * 150
    );
}

#[test]
fn async_calls_alone_are_driven_by_the_background_thread() {
    let (client, server) = pair(1);
    let to = server.local_addr();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for i in 0..200 {
            let req = request(7, i);
            assert_eq!(client.call_async(to, &req).await.unwrap(), reversed(&req));
        }
    });
}

#[test]
fn a_caller_whose_peer_never_answers_times_out_while_others_complete() {
    let mut config = EndpointConfig::default();
    config.protocol_mut().set_tick(Duration::from_millis(2));
    let server = bind(EndpointConfig::default());
    let client = bind(config);
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    let s = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = s.accept() {
            let data = req.data().to_vec();
            let _ = req.respond(&data);
        }
    });
    let silent = UdpSocket::bind(any_port()).unwrap();
    let (silent_keys, _) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client
        .install_session(silent.local_addr().unwrap(), silent_keys)
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = (0..3)
        .map(|t| {
            let (client, stop, to) = (client.clone(), stop.clone(), server.local_addr());
            std::thread::spawn(move || {
                let mut done = 0u64;
                loop {
                    let req = request(t, done as usize);
                    assert_eq!(client.call(to, &req).unwrap(), req);
                    done += 1;
                    if stop.load(Ordering::Relaxed) {
                        return done;
                    }
                }
            })
        })
        .collect();
    let err = client
        .call(silent.local_addr().unwrap(), b"anyone?")
        .unwrap_err();
    assert!(matches!(err, Error::Rpc(_)), "{err}");
    // The others kept completing meanwhile and still do.
    assert_eq!(
        client.call(server.local_addr(), b"after").unwrap(),
        &b"after"[..]
    );
    stop.store(true, Ordering::Relaxed);
    for t in busy {
        t.join().unwrap();
    }
    assert_eq!(client.stats().unwrap().total.rpcs.failed, 1);
}

#[test]
fn close_while_callers_drive_returns_and_fails_them_with_closed() {
    let (client, server) = pair(2);
    let to = server.local_addr();
    let callers: Vec<_> = (0..8)
        .map(|t| {
            let client = client.clone();
            std::thread::spawn(move || {
                let mut i = 0;
                loop {
                    match client.call(to, request(t, i)) {
                        Ok(_) => i += 1,
                        Err(e) => return e,
                    }
                }
            })
        })
        .collect();
    // Let every caller get going (outcomes only, no timing asserted).
    while client.stats().unwrap().total.rpcs.completed < 200 {
        std::thread::sleep(Duration::from_millis(1));
    }
    client.close();
    for c in callers {
        let err = c.join().unwrap();
        assert!(matches!(err, Error::Closed), "{err}");
    }
    assert!(matches!(client.call(to, b"late"), Err(Error::Closed)));
    assert!(matches!(client.stats(), Err(Error::Closed)));
}

#[test]
fn close_fails_calls_that_a_silent_peer_never_answers() {
    let mut config = EndpointConfig::default();
    // The calls must still be waiting when the close's grace ends.
    config
        .protocol_mut()
        .set_rpc_idle_timeout(Duration::from_secs(100));
    let client = bind(config);
    let silent = UdpSocket::bind(any_port()).unwrap();
    let to = silent.local_addr().unwrap();
    let (keys, _) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(to, keys).unwrap();
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let client = client.clone();
            std::thread::spawn(move || client.call(to, b"hello?"))
        })
        .collect();
    // Every request has left (the silent peer saw four datagrams at least).
    let mut buf = [0u8; 2048];
    for _ in 0..4 {
        silent.recv_from(&mut buf).unwrap();
    }
    client.close();
    for c in callers {
        let result = c.join().unwrap();
        assert!(matches!(result, Err(Error::Closed)), "{result:?}");
    }
}

#[test]
fn the_port_is_free_again_after_close() {
    let (client, server) = pair(1);
    assert_eq!(
        client.call(server.local_addr(), b"abc").unwrap(),
        &b"cba"[..]
    );
    let addr = client.local_addr();
    client.close();
    let again = Endpoint::bind(addr, EndpointConfig::default()).expect("the port is free");
    drop(again);
}

#[test]
fn dropping_every_handle_does_not_hang() {
    let (client, server) = pair(1);
    assert_eq!(
        client.call(server.local_addr(), b"abc").unwrap(),
        &b"cba"[..]
    );
    drop(client);
    drop(server);
}
