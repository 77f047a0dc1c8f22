//! Shared by the topology tests: the topology with the forwarder binary,
//! clients and echo servers in their namespaces.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use smt::{Endpoint, EndpointConfig, SessionKeys};
use smt_forwarder::lab::{in_namespace, Topology, Variant};

/// The port clients call and servers listen on.
pub const PORT: u16 = 7000;

/// A tag unique to this test process and test.
pub fn tag(letter: char) -> String {
    format!("{letter}{}", std::process::id() % 100_000)
}

pub struct Lab {
    pub topo: Topology,
    pub forwarder: PathBuf,
}

impl Lab {
    /// The topology, or `None` (SKIPPED printed) when not root.
    pub fn up(tag: &str, variant: Variant, links: usize, rates: &[u64]) -> Option<Self> {
        let script = PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/innetwork-topo.sh"
        ));
        let topo = Topology::up(&script, tag, variant, 1, links, rates).expect("topology")?;
        Some(Self {
            topo,
            forwarder: PathBuf::from(env!("CARGO_BIN_EXE_smt-forwarder")),
        })
    }

    /// A client endpoint in client namespace `i`, with `keys` for the
    /// forwarder's address; returns it and its port.
    pub fn client(&self, i: usize, v6: bool, keys: SessionKeys) -> (Endpoint, u16) {
        self.client_with(i, v6, keys, EndpointConfig::default)
    }

    /// [`Lab::client`] with its configuration from `config`.
    pub fn client_with(
        &self,
        i: usize,
        v6: bool,
        keys: SessionKeys,
        config: fn() -> EndpointConfig,
    ) -> (Endpoint, u16) {
        let to = Topology::forwarder_addr(i, v6, PORT);
        let bind: SocketAddr = if v6 {
            "[::]:0".parse().unwrap()
        } else {
            "0.0.0.0:0".parse().unwrap()
        };
        in_namespace(&self.topo.ns(&format!("c{i}")), move || {
            let ep = Endpoint::bind(bind, config()).expect("bind client");
            ep.install_session(to, keys).expect("keys");
            let port = ep.local_addr().port();
            (ep, port)
        })
        .expect("client namespace")
    }
}

/// The client's address as the replicas see it: the forwarder's inside
/// address (the port is the client's own when free).
pub fn client_ip(_i: usize, v6: bool) -> IpAddr {
    match v6 {
        false => IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1)),
        true => IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xff, 0, 0, 0, 0, 1)),
    }
}

pub type Keys = Arc<HashMap<u16, SessionKeys>>;

/// Server keys by the client's port (the forwarder keeps it).
pub fn keys_by_port(pairs: &[(u16, SessionKeys)]) -> Keys {
    Arc::new(pairs.iter().cloned().collect())
}

/// An echo server (response = request reversed) in replica `r`'s
/// namespace, counting executions and the IDs it executed.
pub struct Replica {
    /// IPv4 and IPv6.
    pub endpoints: Vec<Endpoint>,
    log: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Replica {
    pub fn executions(&self) -> u64 {
        self.log.lock().unwrap().len() as u64
    }

    pub fn requests(&self) -> Vec<Vec<u8>> {
        self.log.lock().unwrap().clone()
    }
}

/// [`replica_server`] that gives `keys` to any peer (one client whose
/// port the forwarder may not keep, e.g. behind the attack relay).
pub fn replica_server_any(topo: &Topology, r: usize, keys: Arc<SessionKeys>) -> Replica {
    replica_with(
        topo,
        r,
        Arc::new(move |_| Some((*keys).clone())),
        EndpointConfig::default,
    )
}

type Resolve = Arc<dyn Fn(SocketAddr) -> Option<SessionKeys> + Send + Sync>;

pub fn replica_server(topo: &Topology, r: usize, keys: Keys) -> Replica {
    replica_server_with(topo, r, keys, EndpointConfig::default)
}

/// [`replica_server`] with its configuration from `config`.
pub fn replica_server_with(
    topo: &Topology,
    r: usize,
    keys: Keys,
    config: fn() -> EndpointConfig,
) -> Replica {
    replica_with(
        topo,
        r,
        Arc::new(move |peer: SocketAddr| keys.get(&peer.port()).cloned()),
        config,
    )
}

fn replica_with(
    topo: &Topology,
    r: usize,
    resolve: Resolve,
    config: fn() -> EndpointConfig,
) -> Replica {
    let log: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    // smt binds IPv6 sockets IPv6-only: one endpoint per family, sharing
    // the keys (by port) and the execution log.
    let mut endpoints = Vec::new();
    for bind in ["0.0.0.0:7000", "[::]:7000"] {
        let resolve = resolve.clone();
        let bind: SocketAddr = bind.parse().unwrap();
        let ep = in_namespace(&topo.ns(&format!("s{r}")), move || {
            let ep = Endpoint::bind(bind, config()).expect("bind server");
            ep.set_key_resolver(Box::new(move |peer: SocketAddr| resolve(peer)))
                .expect("resolver");
            ep
        })
        .expect("server namespace");
        let (s, l) = (ep.clone(), log.clone());
        std::thread::spawn(move || {
            while let Ok(mut req) = s.accept() {
                let data = req.take_data().to_vec();
                l.lock().unwrap().push(data.clone());
                let reply: Vec<u8> = data.iter().rev().copied().collect();
                let _ = req.respond(&reply);
            }
        });
        endpoints.push(ep);
    }
    Replica { endpoints, log }
}

/// A request of `size` bytes unique to `tag`.
pub fn request(tag: u64, size: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..size.max(8))
        .map(|i| (i as u64).wrapping_mul(31) as u8 ^ tag as u8)
        .collect();
    v[..8].copy_from_slice(&tag.to_le_bytes());
    v
}
