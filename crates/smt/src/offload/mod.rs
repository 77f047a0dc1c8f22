//! TLS offload on the UDP path (`docs/offload.md`): the
//! driver's side of a NIC that seals and opens SMT's records, with
//! `smt-offload`'s engine model standing in for the NIC (its worker
//! threads for the transmit queues, its receive engine inline on the
//! receive path).
//!
//! The protocol core stays as it is and knows no NIC: with
//! `Config::tx_offload` it writes records with plaintext bodies and empty
//! tags and says where they are (`smt_proto::offload::TxRecords`);
//! [`TxOffload`] turns that into the NIC's descriptors. On receive,
//! [`RxOffload`] runs each DATA packet through the NIC's receive context
//! and hands the core the datagrams with a mark per packet. Nothing changes
//! on the wire: a software peer cannot tell.
//!
//! Turned on with [`crate::EndpointConfig::offload`]; the counters are
//! [`crate::Endpoint::offload_counters`].

mod rx;
mod tx;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

pub use rx::RxOffload;
pub use smt_offload::{RxCounters, TxCounters};
pub use tx::{wire_datagram, DeterministicNic, ThreadedNic, TxNic, TxOffload, TxOffloadStats};

use smt_proto::Endpoint as Core;

use crate::observe::CaptureTap;
use smt_udp::Socket;

/// How big the NIC stand-in is: `Default` and `set_*` setters, as
/// [`crate::EndpointConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct OffloadConfig {
    queues: u16,
    contexts: usize,
    rx_contexts: usize,
    ring: usize,
}

impl Default for OffloadConfig {
    fn default() -> Self {
        Self {
            queues: 2,
            contexts: 1024,
            rx_contexts: 1024,
            ring: 256,
        }
    }
}

impl OffloadConfig {
    /// Transmit queues, each drained by its own worker thread; a message's
    /// packets stay on one queue. Default 2, at least 1.
    pub fn queues(&self) -> u16 {
        self.queues
    }

    /// Sets [`OffloadConfig::queues`].
    pub fn set_queues(&mut self, queues: u16) -> &mut Self {
        self.queues = queues;
        self
    }

    /// Transmit flow contexts the NIC can hold (one per queue, peer and
    /// key epoch in use; the least recently used one of a queue is
    /// destroyed when its share is full). Default 1024, at least one per
    /// queue.
    pub fn contexts(&self) -> usize {
        self.contexts
    }

    /// Sets [`OffloadConfig::contexts`].
    pub fn set_contexts(&mut self, contexts: usize) -> &mut Self {
        self.contexts = contexts;
        self
    }

    /// Receive contexts (one per peer and key phase in use). Default 1024,
    /// at least 1.
    pub fn rx_contexts(&self) -> usize {
        self.rx_contexts
    }

    /// Sets [`OffloadConfig::rx_contexts`].
    pub fn set_rx_contexts(&mut self, contexts: usize) -> &mut Self {
        self.rx_contexts = contexts;
        self
    }

    /// Descriptor batches each transmit queue holds before the driver
    /// waits for room (the send queue's depth). Default 256, at least 1.
    pub fn ring(&self) -> usize {
        self.ring
    }

    /// Sets [`OffloadConfig::ring`].
    pub fn set_ring(&mut self, ring: usize) -> &mut Self {
        self.ring = ring;
        self
    }

    /// Errs if the NIC stand-in could not work with these sizes.
    pub(crate) fn validate(&self) -> Result<(), crate::error::ConfigError> {
        let zero = |setting| {
            Err(crate::error::ConfigError::new(
                setting,
                "is 0; the NIC stand-in needs at least 1",
            ))
        };
        match () {
            _ if self.queues == 0 => zero("OffloadConfig::queues"),
            _ if self.rx_contexts == 0 => zero("OffloadConfig::rx_contexts"),
            _ if self.ring == 0 => zero("OffloadConfig::ring"),
            _ if self.contexts < usize::from(self.queues) => Err(crate::error::ConfigError::new(
                "OffloadConfig::contexts",
                format!(
                    "of {} is fewer than the {} queues: each queue needs a context; raise it",
                    self.contexts, self.queues
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// What the NIC stand-in counted, mlx5's names: transmit (`tx_tls_*`) and
/// receive (`rx_tls_*`), and the driver's own transmit counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OffloadCounters {
    /// The NIC's transmit counters (`tx_tls_*`).
    pub tx: TxCounters,
    /// The NIC's receive counters (`rx_tls_*`).
    pub rx: RxCounters,
    /// The driver's own transmit counts.
    pub driver: TxOffloadStats,
    /// Datagrams the transmit workers could not put on the socket.
    pub send_errors: u64,
}

impl OffloadCounters {
    /// (name, value) for every counter, transmit first.
    pub fn named(&self) -> Vec<(&'static str, u64)> {
        let d = self.driver;
        let mut all = self.tx.named();
        all.extend(self.rx.named());
        all.extend([
            ("driver_packets", d.packets),
            ("driver_resyncs", d.resyncs),
            ("driver_resyncs_mid_record", d.resyncs_mid_record),
            ("driver_dropped", d.dropped),
            ("send_errors", self.send_errors),
        ]);
        all
    }
}

impl std::fmt::Display for OffloadCounters {
    /// `name: value` per line, zeros left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (name, value) in self.named().into_iter().filter(|(_, v)| *v != 0) {
            writeln!(f, "{name}: {value}")?;
        }
        Ok(())
    }
}

/// The I/O driver's NIC: transmit through the threaded engine onto the
/// socket, receive through the receive engine into the core.
#[derive(Debug)]
pub(crate) struct Offload {
    tx: TxOffload<ThreadedNic>,
    rx: RxOffload,
}

impl Offload {
    /// Starts the transmit workers on `socket`; with `capture`, they copy
    /// what they send into it.
    pub(crate) fn start(
        socket: Arc<Socket>,
        config: &OffloadConfig,
        capture: Option<CaptureTap>,
    ) -> io::Result<Self> {
        let gso = socket.features().gso_max_segments;
        let (queues, contexts, ring) = (config.queues, config.contexts, config.ring);
        let nic = ThreadedNic::start_capturing(socket, queues, contexts, ring, gso, capture)?;
        Ok(Self {
            tx: TxOffload::new(nic, config.queues, config.contexts),
            rx: RxOffload::new(config.rx_contexts),
        })
    }

    /// Hands a datagram the core wrote to the NIC, if it holds records for
    /// it to seal; returns whether it did (else the caller sends it).
    pub(crate) fn take(&mut self, core: &mut Core, datagram: &[u8]) -> bool {
        let Some(records) = core.take_tx_records() else {
            return false;
        };
        self.tx.post(core, &records, datagram);
        true
    }

    /// Rings the transmit doorbell.
    pub(crate) fn ring(&mut self) {
        self.tx.ring();
    }

    pub(crate) fn receive<'a>(
        &mut self,
        core: &mut Core,
        now: Instant,
        batch: impl Iterator<Item = (SocketAddr, &'a [u8])>,
    ) {
        self.rx.receive(core, now, batch);
    }

    pub(crate) fn counters(&mut self) -> OffloadCounters {
        OffloadCounters {
            tx: self.tx.counters(),
            rx: self.rx.counters(),
            driver: self.tx.stats(),
            send_errors: self.tx.nic().send_errors(),
        }
    }
}
