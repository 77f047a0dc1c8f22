//! Pieces several test files share: the plain echo server, tagged
//! requests, and many echo calls a window at a time. (Each test file uses
//! some of them.)
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use smt::Endpoint;

/// `threads` threads answering every request with its own bytes.
pub fn spawn_echo(server: &Endpoint, threads: usize) {
    for _ in 0..threads {
        let s = server.clone();
        std::thread::spawn(move || {
            while let Ok(mut req) = s.accept() {
                let data = req.take_data();
                let _ = req.respond(&data);
            }
        });
    }
}

/// A request of `size` bytes (at least 8) whose first 8 bytes are `tag`.
pub fn request(tag: u64, size: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..size.max(8)).map(|i| (i as u64 ^ tag) as u8).collect();
    v[..8].copy_from_slice(&tag.to_le_bytes());
    v
}

/// Echo calls tagged 1..=`rpcs` from `client` to `target`, `window` at a
/// time, sized in turn from `sizes`. Returns how many failed; panics on a
/// response that differs from its request.
pub fn echo_calls(
    client: &Endpoint,
    target: SocketAddr,
    rpcs: u64,
    window: usize,
    sizes: &'static [usize],
) -> u64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sem = Arc::new(tokio::sync::Semaphore::new(window));
        let mut tasks = Vec::new();
        for tag in 1..=rpcs {
            let permit = sem.clone().acquire_owned().await.unwrap();
            let c = client.clone();
            tasks.push(tokio::spawn(async move {
                let req = request(tag, sizes[tag as usize % sizes.len()]);
                let resp = c.call_async(target, &req).await;
                drop(permit);
                match resp {
                    Ok(r) => {
                        assert!(r == req, "RPC {tag}: response differs from request");
                        0
                    }
                    Err(e) => {
                        eprintln!("RPC {tag} failed: {e}");
                        1
                    }
                }
            }));
        }
        let mut failed = 0;
        for t in tasks {
            failed += t.await.unwrap();
        }
        failed
    })
}
