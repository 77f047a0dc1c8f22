//! SMT's worker shape (`smt::workers`): an echo server
//! spreading one client's messages over N shard threads (one dispatcher
//! routing by message ID), against the same client endpoint as `smt-aes`.
//! Keys installed directly, AES-128-GCM.
//!
//! Opt-in (`--systems smt-workers-1,smt-workers-2`): it measures scaling
//! over cores, which the default pinned run (one CPU for everything)
//! cannot show; `examples/scaling.rs` places server and client on chosen
//! CPUs.

use std::io;
use std::net::SocketAddr;

use smt::workers::{Spread, WorkerConfig, WorkerServer};
use smt::Endpoint;

use super::smt::SmtSlot;
use super::{ServerThread, System};

/// The slots are `smt-aes`'s: one client endpoint, calls to the server.
pub type WorkerSlot = SmtSlot;

/// Binds the client and a worker server with `shards` shards, installs
/// keys and returns `slots` slots.
pub fn start(shards: usize, slots: usize) -> io::Result<(ServerThread, Vec<WorkerSlot>)> {
    start_placed(shards, slots, None)
}

/// Where the client's and the server's threads may run: `(client CPUs,
/// server CPUs)`.
pub type Placement<'a> = (&'a [usize], &'a [usize]);

/// [`start`], with the client endpoint's threads on `placement.0` and the
/// server's (dispatcher and shards) on `placement.1`; the calling thread
/// ends up on the client's CPUs.
pub fn start_placed(
    shards: usize,
    slots: usize,
    placement: Option<Placement<'_>>,
) -> io::Result<(ServerThread, Vec<WorkerSlot>)> {
    let any: SocketAddr = "127.0.0.1:0".parse().expect("literal address");
    let cfg = super::smt::config(System::SmtAes);
    if let Some((client_cpus, _)) = placement {
        crate::sys::set_affinity_to(client_cpus)?;
    }
    let client = Endpoint::bind(any, cfg.clone()).map_err(io::Error::other)?;
    if let Some((_, server_cpus)) = placement {
        crate::sys::set_affinity_to(server_cpus)?;
    }
    let mut config = WorkerConfig::default();
    config
        .set_endpoint(cfg)
        .set_shards(shards)
        .set_spread(Spread::Messages);
    let server = WorkerServer::bind(any, config, |_peer, request| request);
    if let Some((client_cpus, _)) = placement {
        crate::sys::set_affinity_to(client_cpus)?;
    }
    let server = server.map_err(io::Error::other)?;
    let (ck, sk) = super::smt::keys(System::SmtAes);
    server
        .install_session(client.local_addr(), sk)
        .map_err(io::Error::other)?;
    client
        .install_session(server.local_addr(), ck)
        .map_err(io::Error::other)?;
    let server_addr = server.local_addr();
    // The server runs on its own threads; this one holds it until stopped.
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("smt-workers".into())
        .spawn(move || {
            let _ = stop_rx.recv();
            server.close();
        })?;
    let closing = client.clone();
    let stop = Box::new(move || {
        closing.close();
        let _ = stop_tx.send(());
    });
    let slots = (0..slots)
        .map(|_| SmtSlot::new(client.clone(), server_addr))
        .collect();
    Ok((ServerThread::new(stop, thread), slots))
}
