//! Without the `offload` feature: the NIC model is not built. These
//! uninhabited types stand where the driver keeps an optional NIC, so its
//! code is written once; no value of them can exist, and every method is
//! unreachable by construction.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use smt_proto::Endpoint as Core;
use smt_udp::Socket;

use crate::observe::CaptureTap;

/// Cannot be built without the `offload` feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OffloadConfig {}

impl OffloadConfig {
    pub(crate) fn validate(&self) -> Result<(), crate::error::ConfigError> {
        match *self {}
    }
}

/// Cannot be built without the `offload` feature.
#[derive(Debug)]
pub(crate) enum Offload {}

impl Offload {
    pub(crate) fn start(
        _socket: Arc<Socket>,
        config: &OffloadConfig,
        _capture: Option<CaptureTap>,
    ) -> io::Result<Self> {
        match *config {}
    }

    pub(crate) fn take(&mut self, _core: &mut Core, _datagram: &[u8]) -> bool {
        match *self {}
    }

    pub(crate) fn ring(&mut self) {
        match *self {}
    }

    pub(crate) fn receive<'a>(
        &mut self,
        _core: &mut Core,
        _now: Instant,
        _batch: impl Iterator<Item = (SocketAddr, &'a [u8])>,
    ) {
        match *self {}
    }
}
