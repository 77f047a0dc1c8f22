//! A server killed in the middle of RPCs and restarted on the same address
//! with the same certificate (issue #6, item 4). The client keeps TLS
//! session keys the new server never saw: its calls must end in an error
//! within the timeout (never hang), a retry must run a new handshake and
//! succeed, and no request may be executed twice or answered wrongly,
//! counting executions by request ID across both server lives.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smt::{Endpoint, EndpointConfig};
use smt_tls::certs::{Ca, IssuedCert};
use smt_tls::{TlsClient, TlsServer};

/// Executions per request ID, over both server lives.
type Executions = Arc<Mutex<HashMap<u64, u32>>>;

const CLIENT_THREADS: u64 = 4;
const ATTEMPTS: u64 = 40;

/// A server "process": its endpoint and a flag that, once set, makes the
/// application drop requests unanswered and unexecuted (it has crashed).
struct Life {
    endpoint: Endpoint,
    dead: Arc<AtomicBool>,
}

fn start(addr: SocketAddr, cert: &IssuedCert, executions: &Executions, life: u32) -> Life {
    let endpoint = Endpoint::bind(addr, EndpointConfig::default()).unwrap();
    let tls = TlsServer::new(cert.chain_pem().as_bytes(), cert.key_pem().as_bytes(), None).unwrap();
    endpoint.set_tls_server(tls).unwrap();
    let dead = Arc::new(AtomicBool::new(false));
    for _ in 0..2 {
        let (s, ex, dead) = (endpoint.clone(), executions.clone(), dead.clone());
        std::thread::spawn(move || {
            while let Ok(mut req) = s.accept() {
                if dead.load(Ordering::Relaxed) {
                    continue;
                }
                let data = req.take_data();
                let id = u64::from_le_bytes(data[..8].try_into().unwrap());
                *ex.lock().unwrap().entry(id).or_default() += 1;
                let mut reply = data.to_vec();
                reply.extend_from_slice(&life.to_le_bytes());
                let _ = req.respond(&reply);
            }
        });
    }
    Life { endpoint, dead }
}

/// Kills a server: the application stops answering at once, then the
/// endpoint goes away with every RPC and session it held.
fn kill(life: Life) {
    life.dead.store(true, Ordering::Relaxed);
    life.endpoint.close();
}

/// What one client thread saw.
#[derive(Default)]
struct Seen {
    calls: u64,
    errors: u64,
    retried_ok: u64,
    longest: Duration,
}

/// Calls until `stop`, each logical call retried (as a new request ID)
/// until it succeeds; checks every answer.
fn client_loop(client: Endpoint, server: SocketAddr, thread: u64, stop: Arc<AtomicBool>) -> Seen {
    let mut seen = Seen::default();
    let mut call = 0u64;
    while !stop.load(Ordering::Relaxed) {
        call += 1;
        let mut failed = false;
        for attempt in 0..ATTEMPTS {
            let id = ((thread * 1_000_000 + call) << 8) | attempt;
            let mut req = id.to_le_bytes().to_vec();
            req.resize(64 + (call as usize % 4) * 3000, thread as u8);
            let at = Instant::now();
            let result = client.call(server, &req);
            seen.longest = seen.longest.max(at.elapsed());
            match result {
                Ok(reply) => {
                    assert_eq!(&reply[..req.len()], &req[..], "a wrong answer");
                    assert_eq!(reply.len(), req.len() + 4, "a wrong answer");
                    seen.retried_ok += u64::from(failed);
                    break;
                }
                Err(e) => {
                    eprintln!("thread {thread} call {call} attempt {attempt}: {e}");
                    seen.errors += 1;
                    failed = true;
                    std::thread::sleep(Duration::from_millis(50));
                    assert!(
                        attempt + 1 < ATTEMPTS,
                        "call never succeeded after the restart"
                    );
                }
            }
        }
        seen.calls += 1;
    }
    seen
}

#[test]
fn killed_and_restarted_tls_server_never_executes_twice_and_clients_recover() {
    let ca = Ca::generate("smt restart test ca").unwrap();
    let cert = ca.issue(&["127.0.0.1"], false).unwrap();
    let executions: Executions = Arc::default();
    let first = start("127.0.0.1:0".parse().unwrap(), &cert, &executions, 1);
    let addr = first.endpoint.local_addr();

    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
    client
        .set_tls_client(TlsClient::new(ca.cert_pem().as_bytes(), None).unwrap())
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..CLIENT_THREADS)
        .map(|t| {
            let (c, stop) = (client.clone(), stop.clone());
            std::thread::spawn(move || client_loop(c, addr, t, stop))
        })
        .collect();

    std::thread::sleep(Duration::from_millis(400));
    let before_kill = executions.lock().unwrap().len();
    let killed_at = Instant::now();
    kill(first);
    let down_for = killed_at.elapsed();
    let second = start(addr, &cert, &executions, 2);
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let seen: Vec<Seen> = threads.into_iter().map(|t| t.join().unwrap()).collect();

    let cs = client.stats().unwrap().total;
    let ss = second.endpoint.stats().unwrap().total;
    let ex = executions.lock().unwrap();
    let twice: Vec<_> = ex.iter().filter(|(_, n)| **n > 1).collect();
    let calls: u64 = seen.iter().map(|s| s.calls).sum();
    let errors: u64 = seen.iter().map(|s| s.errors).sum();
    let recovered: u64 = seen.iter().map(|s| s.retried_ok).sum();
    let longest = seen.iter().map(|s| s.longest).max().unwrap_or_default();
    eprintln!(
        "{calls} logical calls, {} requests executed ({before_kill} before the kill), {errors} errors, \
         {recovered} calls succeeded after a retry; server down {down_for:?}; longest single call \
         {longest:?}; client handshakes {} (failed {}); new server drops {:?}",
        ex.len(),
        cs.handshakes.completed,
        cs.handshakes.failed,
        ss.drops
    );

    assert!(twice.is_empty(), "executed twice: {twice:?}");
    assert!(errors > 0 && recovered > 0, "the kill hit calls in flight");
    assert!(
        cs.handshakes.completed >= 2,
        "a new handshake after the restart"
    );
    assert!(ss.handshakes.completed >= 1);
    // A call ends within its timeouts: RPC silence (100 ms), a
    // handshake's silence (100 ms), the dying server's close (2 s grace).
    assert!(
        longest < Duration::from_secs(5),
        "a call hung for {longest:?}"
    );
    second.endpoint.close();
    client.close();
}
