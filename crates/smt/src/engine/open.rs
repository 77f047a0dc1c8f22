//! Opening an endpoint: its socket (the SMT port in raw-IP mode) and its
//! protocol core (datagram size from the MTU, stateless-retry key).

use std::net::SocketAddr;

use smt_proto::Endpoint as Core;
use smt_udp::Socket;

use crate::{EndpointConfig, Error};

/// The SMT port of a raw-IP endpoint: the one asked for, or a random one
/// from the dynamic range.
fn raw_port(asked: u16) -> u16 {
    if asked != 0 {
        return asked;
    }
    let mut b = [0u8; 2];
    smt_crypto::fill_random(&mut b);
    49152 + u16::from_be_bytes(b) % 16384
}

/// Opens the socket and the protocol core for `addr`: the SMT port, port
/// checks in raw mode, the datagram size from the MTU.
pub(super) fn open(
    addr: SocketAddr,
    config: &EndpointConfig,
) -> Result<(Socket, SocketAddr, Core), Error> {
    // Raw IP has no kernel ports: the SMT header's ports demultiplex, so
    // an endpoint needs one of its own, chosen before binding so the
    // socket's kernel filter queues only packets for it (smt-udp).
    let mode = config.socket().mode();
    let addr = match mode {
        smt_udp::Mode::RawIp { .. } => SocketAddr::new(addr.ip(), raw_port(addr.port())),
        smt_udp::Mode::Udp => addr,
    };
    let socket = Socket::bind(addr, config.socket())?;
    let local_addr = match mode {
        smt_udp::Mode::RawIp { .. } => addr,
        smt_udp::Mode::Udp => socket.local_addr()?,
    };
    let core = new_core(config.core_config(local_addr)?)?;
    Ok((socket, local_addr, core))
}

/// The protocol core for `protocol`, with its stateless-retry key.
pub(super) fn new_core(protocol: smt_proto::Config) -> Result<Core, Error> {
    let mut core = Core::new(protocol).map_err(|e| {
        Error::Config(crate::error::ConfigError::new(
            "ProtocolConfig",
            format!("settings do not work together: {}", e.0),
        ))
    })?;
    // Stateless retry under handshake floods (docs/protocol.md § 4): a
    // fresh random key per endpoint, so tokens die with it.
    let retry_key = smt_crypto::TrafficKey::random(smt_crypto::AeadAlgorithm::Aes128Gcm);
    core.set_retry_key(std::sync::Arc::new(smt_crypto::AesGcmCipher::new(
        &retry_key,
    )));
    Ok(core)
}
