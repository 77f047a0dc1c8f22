//! `smt server`, `smt client`, `smt keygen`.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use smt::keys::{AeadAlgorithm, PskClient, SessionKeyLog};
use smt::{Endpoint, Error, ServerAcceptor};

use crate::cli::{ClientArgs, ServerArgs};
use crate::demo::{config, spawn_echo};
use crate::report;

const ALGORITHM: AeadAlgorithm = AeadAlgorithm::Aes128Gcm;

pub fn keygen() -> String {
    let mut key = [0u8; 32];
    smt_crypto::fill_random(&mut key);
    key.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_psk(hex: &str) -> Result<Vec<u8>, Error> {
    let bad = || {
        Error::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "--psk must be at least 32 bytes of hex (make one with `smt keygen`)",
        ))
    };
    let hex = hex.trim();
    if !hex.len().is_multiple_of(2) || hex.len() < 64 {
        return Err(bad());
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|_| bad()))
        .collect()
}

fn need_keys() -> Error {
    Error::Io(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "give TLS files (server: --cert and --key [--ca for mutual TLS]; client: --ca [--cert --key]) \
         or a pre-shared key (--psk, from `smt keygen`)",
    ))
}

pub fn server(args: ServerArgs) -> Result<(), Error> {
    let tls = crate::pki::tls_server(&args.tls)?;
    let server = Endpoint::bind(args.listen, config(&args.transport))?;
    match (&args.psk, tls) {
        (_, Some(tls)) => server.set_tls_server(tls)?,
        // The PSK nonce exchange: fresh keys per session, so a restarted
        // server never executes a replayed request.
        (Some(psk), None) => server.set_handshake_acceptor(Box::new(
            ServerAcceptor::new(None, None)
                .with_psk(&parse_psk(psk)?, ALGORITHM)
                .with_key_log(SessionKeyLog::from_env()?.map(Arc::new)),
        ))?,
        (None, None) => return Err(need_keys()),
    }
    println!(
        "smt server on {} ({}), {} threads",
        server.local_addr(),
        server.features(),
        args.threads
    );
    spawn_echo(&server, args.threads);
    let mut elapsed = 0.0;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        elapsed += 1.0;
        let (s, _) = server.stats(None)?;
        report::print_stats("server", &s);
        if args.duration.is_some_and(|d| elapsed >= d) {
            server.close();
            return Ok(());
        }
    }
}

/// The address the server will see for us: the local IP the kernel routes
/// towards it (binding the unspecified address would hide it), port 0.
fn local_towards(server: SocketAddr) -> Result<SocketAddr, Error> {
    let any: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()
    .expect("literal");
    let probe = UdpSocket::bind(any)?;
    probe.connect(server)?;
    Ok(SocketAddr::new(probe.local_addr()?.ip(), 0))
}

/// One call before measuring: a server that cannot be reached (nothing
/// speaks SMT there, a failed handshake) ends the run with that reason,
/// instead of a measurement made of failures hammering the address.
fn reach(client: &Endpoint, server: SocketAddr) -> Result<(), Error> {
    client
        .call(server, b"smt client: hello")
        .map(drop)
        .map_err(|e| {
            Error::Io(std::io::Error::other(format!(
                "cannot reach an SMT server at {server}: {e}"
            )))
        })
}

pub fn client(args: ClientArgs) -> Result<(), Error> {
    let tls = crate::pki::tls_client(&args.tls)?;
    let master = match (&args.psk, &tls) {
        (_, Some(_)) => None,
        (Some(psk), None) => Some(parse_psk(psk)?),
        (None, None) => return Err(need_keys()),
    };
    let bind = if args.transport.raw {
        SocketAddr::new(local_towards(args.server)?.ip(), 7002)
    } else {
        local_towards(args.server)?
    };
    let client = Endpoint::bind(bind, config(&args.transport))?;
    match (master, tls) {
        (Some(master), _) => client.set_psk_client(
            PskClient::new(&master, ALGORITHM)
                .with_key_log(SessionKeyLog::from_env()?.map(Arc::new)),
        )?,
        (None, Some(tls)) => client.set_tls_client(tls)?,
        (None, None) => return Err(need_keys()),
    }
    println!(
        "smt client {} -> {} ({})",
        client.local_addr(),
        args.server,
        client.features()
    );
    reach(&client, args.server)?;
    report::print_header();
    let row = report::measure(
        &client,
        args.server,
        None,
        args.size,
        args.seconds,
        args.concurrency,
    )?;
    report::print_row(&row);
    let (s, _) = client.stats(None)?;
    report::print_stats("client", &s);
    client.close();
    if row.errors > 0 {
        return Err(Error::Io(std::io::Error::other(format!(
            "{} RPCs failed",
            row.errors
        ))));
    }
    Ok(())
}
