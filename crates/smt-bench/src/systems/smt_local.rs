//! SMT through the caller-driven `LocalEndpoint`: no driver thread, the
//! client thread sends inside `call` and receives inside `poll`, the echo
//! thread owns the server endpoint. Only one RPC at a time (the `rtt`
//! workload): the slot blocks its thread in `poll`, which a runtime
//! shared by many slots cannot afford.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smt::{LocalEndpoint, LocalEvent};

use super::{check_echo, ServerThread, Slot, System};

/// How long a call may take before it counts as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the echo thread checks whether to stop.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// The client endpoint, owned by the slot (and so by the client thread).
#[derive(Debug)]
pub struct LocalSlot {
    client: LocalEndpoint,
    server: SocketAddr,
}

impl Slot for LocalSlot {
    async fn call(&mut self, request: &[u8]) -> io::Result<usize> {
        let id = self
            .client
            .call(self.server, request)
            .map_err(io::Error::other)?;
        loop {
            match self
                .client
                .poll(Some(CALL_TIMEOUT))
                .map_err(io::Error::other)?
            {
                Some(LocalEvent::Response { call, data }) if call == id => {
                    return check_echo(request.len(), data.len())
                }
                Some(LocalEvent::Failed { call, error }) if call == id => {
                    return Err(io::Error::other(error))
                }
                None => return Err(io::Error::new(io::ErrorKind::TimedOut, "no response")),
                Some(_) => {}
            }
        }
    }
}

/// Answers requests until `stop` is set.
fn echo(mut server: LocalEndpoint, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match server.poll(Some(STOP_CHECK)) {
            Ok(Some(LocalEvent::Request { request, data })) => {
                let _ = server.respond(request, &data);
            }
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

/// Binds the client here and the server on its own thread (each endpoint
/// belongs to the thread that drives it), and installs fresh keys.
pub fn start(system: System) -> io::Result<(ServerThread, Vec<LocalSlot>)> {
    let any: SocketAddr = "127.0.0.1:0".parse().expect("literal address");
    let config = super::smt::config(system);
    let mut client = LocalEndpoint::bind(any, config.clone()).map_err(io::Error::other)?;
    let (client_keys, server_keys) = super::smt::keys(system);
    let client_addr = client.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<io::Result<SocketAddr>>();
    let stopping = stop.clone();
    let thread = std::thread::Builder::new()
        .name("smt-local-echo".into())
        .spawn(move || {
            let bound = LocalEndpoint::bind(any, config).and_then(|mut server| {
                server.install_session(client_addr, server_keys)?;
                Ok(server)
            });
            match bound {
                Ok(server) => {
                    let _ = addr_tx.send(Ok(server.local_addr()));
                    echo(server, &stopping);
                }
                Err(e) => drop(addr_tx.send(Err(io::Error::other(e)))),
            }
        })?;
    let stop_fn = Box::new(move || stop.store(true, Ordering::Relaxed));
    let server_thread = ServerThread::new(stop_fn, thread);
    let server = addr_rx
        .recv()
        .map_err(|_| io::Error::other("SMT echo thread ended"))??;
    client
        .install_session(server, client_keys)
        .map_err(io::Error::other)?;
    Ok((server_thread, vec![LocalSlot { client, server }]))
}
