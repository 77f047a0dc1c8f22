//! `smt server`, `smt client`, `smt keygen`.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use serde_json::json;
use smt::keys::{AeadAlgorithm, PskClient};
use smt::tls::{ServerName, TlsClient};
use smt::{Endpoint, HandshakeError, RpcError, ServerAcceptor};

use crate::cli::{ClientArgs, KeygenArgs, ServerArgs};
use crate::demo::{config, spawn_echo};
use crate::error::CliError;
use crate::files::{self, Access, Output};
use crate::mode::{ClientKeys, ServerKeys};
use crate::record::Recording;
use crate::{pki, report, tickets};

const ALGORITHM: AeadAlgorithm = AeadAlgorithm::Aes128Gcm;

pub fn keygen(args: KeygenArgs) -> Result<(), CliError> {
    let mut key = [0u8; 32];
    smt_crypto::fill_random(&mut key);
    let text = hex::encode(key);
    let Some(path) = args.out else {
        say!("{text}");
        return Ok(());
    };
    files::write_all(
        &[Output {
            path: path.clone(),
            text: format!("{text}\n"),
            access: Access::Secret,
        }],
        args.force.force,
    )?;
    say!(
        "pre-shared key written to {} (readable by its owner only); use it with \
         --psk \"$(cat {})\"",
        path.display(),
        path.display()
    );
    Ok(())
}

/// What answers handshakes: TLS (or mutual TLS), the PSK nonce exchange,
/// neither (0-RTT tickets only), plus 0-RTT tickets when served. Files are
/// loaded and checked before the socket is opened.
fn server_setup(
    keys: Option<&ServerKeys>,
    recording: &Recording,
) -> Result<ServerAcceptor, CliError> {
    let key_log = recording.key_log_path();
    Ok(match keys {
        Some(ServerKeys::Tls { cert, key }) => {
            ServerAcceptor::new(Some(pki::tls_server(cert, key, None, key_log)?), None)
        }
        Some(ServerKeys::MutualTls {
            cert,
            key,
            client_ca,
        }) => ServerAcceptor::new(
            Some(pki::tls_server(cert, key, Some(client_ca), key_log)?),
            None,
        ),
        // The PSK nonce exchange: fresh keys per session, so a restarted
        // server never executes a replayed request. The session keys go to
        // SSLKEYLOGFILE (or --capture's key file), as TLS's secrets do, so
        // `smt dump` can decrypt a capture (docs/observability.md).
        Some(ServerKeys::Psk(psk)) => ServerAcceptor::new(None, None)
            .with_psk(psk.bytes(), ALGORITHM)
            .with_key_log(recording.session_key_log()?),
        None => ServerAcceptor::new(None, None),
    })
}

pub fn server(args: ServerArgs) -> Result<(), CliError> {
    let k = &args.keys;
    let tickets_only = args.tickets.ticket_key.is_some()
        && [&k.cert, &k.key, &k.ca].iter().all(|o| o.is_none())
        && k.psk.is_none();
    let keys = match tickets_only {
        true => None,
        false => Some(ServerKeys::from_args(&args.keys)?),
    };
    let recording = Recording::open(&args.observe)?;
    let mut acceptor = server_setup(keys.as_ref(), &recording)?;
    let served = tickets::serve(&args.tickets)?;
    if let Some(s) = &served {
        acceptor = acceptor.with_zero_rtt(s.zero_rtt.clone());
    }
    let mut cfg = config(&args.transport, args.listen)?;
    cfg.set_observe(recording.observe());
    let server =
        Endpoint::bind(args.listen, cfg).map_err(|e| cannot_bind("--listen", args.listen, e))?;
    server.set_handshake_acceptor(Box::new(acceptor))?;
    if served.is_some() {
        // A new 0-RTT server refuses hellos stamped before its start plus
        // the clock skew bound (they could be replays of an earlier run):
        // the banner, which scripts wait for, comes once hellos are served.
        std::thread::sleep(smt::ticket::Freshness::DEFAULT_MAX_CLOCK_SKEW);
    }
    let mode = [
        keys.as_ref().map(ServerKeys::describe),
        served.as_ref().map(tickets::Served::describe),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(" and ");
    // The first line's start is what scripts wait for (smt-hostile).
    say!(
        "smt server on {} ({}), {mode}, {} threads",
        server.local_addr(),
        server.features(),
        args.threads
    );
    if let Some(listen) = args.metrics {
        let bound = crate::metrics::serve(listen, server.clone(), args.metrics_peers)?;
        say!("metrics on http://{bound}/metrics (Prometheus text format)");
    }
    spawn_echo(&server, args.threads)?;
    let every = args.stats_interval.map(|i| (i, args.json));
    let result = serve(&server, args.duration, every);
    drop(served);
    recording.finish()?;
    result
}

/// Serves until `duration` is over (forever without one), printing the
/// counters every `interval` when one was asked for (as JSON lines with
/// `json`).
fn serve(
    server: &Endpoint,
    duration: Option<Duration>,
    every: Option<(Duration, bool)>,
) -> Result<(), CliError> {
    let start = Instant::now();
    let end = duration.map(|d| start + d);
    let (interval, json) = (every.map(|e| e.0), every.is_some_and(|e| e.1));
    let mut next_stats = interval.map(|i| start + i);
    loop {
        let now = Instant::now();
        if end.is_some_and(|end| now >= end) {
            server.close();
            return Ok(());
        }
        let wake = [end, next_stats].into_iter().flatten().min();
        std::thread::sleep(wake.map_or(Duration::from_secs(3600), |w| w - now));
        if let (Some(at), Some(every)) = (next_stats, interval) {
            if Instant::now() >= at {
                let s = server.stats()?;
                if json {
                    report::print_json_line(&json!({
                        "elapsed_s": start.elapsed().as_secs_f64(),
                        "stats": report::stats_json(&s),
                    }));
                } else {
                    report::print_stats("server", &s.total);
                }
                next_stats = Some(at + every);
            }
        }
    }
}

/// A failed bind, with the address tried (the system's "Cannot assign
/// requested address" does not say which).
fn cannot_bind(option: &str, addr: SocketAddr, e: smt::Error) -> CliError {
    match CliError::from(e) {
        CliError::Environment(why) => {
            CliError::Environment(format!("cannot open {option} address {addr}: {why}"))
        }
        other => other,
    }
}

/// The address the server will see for us: the local IP the kernel routes
/// towards it (binding the unspecified address would hide it), port 0. In
/// raw-IP mode port 0 makes the endpoint pick a random SMT port, so two
/// clients on one host never share one (and never read each other's
/// responses).
fn local_towards(server: SocketAddr) -> Result<SocketAddr, CliError> {
    let any = SocketAddr::new(
        match server {
            SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
        },
        0,
    );
    let no_route = |e: std::io::Error| {
        CliError::Environment(format!("no route from this host to {server}: {e}"))
    };
    let probe = UdpSocket::bind(any).map_err(no_route)?;
    probe.connect(server).map_err(no_route)?;
    Ok(SocketAddr::new(
        probe.local_addr().map_err(no_route)?.ip(),
        0,
    ))
}

/// A client's keys, loaded and checked before its socket is opened.
enum ClientSetup {
    Tls(TlsClient),
    Psk(PskClient),
}

fn client_setup(keys: &ClientKeys, recording: &Recording) -> Result<ClientSetup, CliError> {
    let key_log = recording.key_log_path();
    Ok(match keys {
        ClientKeys::Tls { ca } => ClientSetup::Tls(pki::tls_client(ca, None, key_log)?),
        ClientKeys::MutualTls { ca, cert, key } => {
            ClientSetup::Tls(pki::tls_client(ca, Some((cert, key)), key_log)?)
        }
        ClientKeys::Psk(psk) => ClientSetup::Psk(
            PskClient::new(psk.bytes(), ALGORITHM).with_key_log(recording.session_key_log()?),
        ),
    })
}

/// The name the server's certificate (and ticket) must hold:
/// `--server-name`, else --server's HOST when it is a name, else the
/// name whose ticket `--ticket-dns` looks up.
fn checked_name(args: &ClientArgs) -> Option<String> {
    args.server_name
        .clone()
        .or_else(|| args.server.host.clone())
        .or_else(|| args.ticket.ticket_dns.clone())
}

/// The 0-RTT ticket for the server, if one is asked for: it needs --ca
/// (to verify it) and no client certificate (0-RTT sessions carry none).
fn client_ticket(
    args: &ClientArgs,
    keys: &ClientKeys,
) -> Result<Option<(smt::ticket::VerifiedTicket, String)>, CliError> {
    let t = &args.ticket;
    if t.ticket.is_none() && t.ticket_dns.is_none() {
        return tickets::client_ticket(t, &[], None);
    }
    let ca = match keys {
        ClientKeys::Tls { ca } => ca,
        ClientKeys::MutualTls { .. } => {
            return Err(CliError::Usage(
                "--ticket/--ticket-dns: a 0-RTT session carries no client certificate; drop \
                 --cert and --key"
                    .into(),
            ))
        }
        ClientKeys::Psk(_) => {
            return Err(CliError::Usage(
                "--ticket/--ticket-dns need --ca (the CA that issued the ticket's \
                 certificate), not --psk"
                    .into(),
            ))
        }
    };
    let ca_der = pki::first_certificate(ca)?;
    tickets::client_ticket(t, &ca_der, checked_name(args).as_deref())
}

/// One call before measuring: a server that cannot be reached (nothing
/// speaks SMT there, a failed handshake) ends the run with that reason
/// and a hint, instead of a measurement made of failures.
fn reach(
    client: &Endpoint,
    server: SocketAddr,
    keys: &ClientKeys,
    checked: &str,
) -> Result<(), CliError> {
    client
        .call(server, b"smt client: hello")
        .map(drop)
        .map_err(|e| {
            CliError::Peer(format!(
                "cannot reach an SMT server at {server} using {}: {e}{}",
                keys.describe(),
                hint(&e, keys, checked)
            ))
        })
}

/// What most likely went wrong, for the failures whose library message
/// cannot know the client's options: a decision table on (error, mode).
fn hint(e: &smt::Error, keys: &ClientKeys, checked: &str) -> String {
    use smt::Error::{Handshake, Rpc};
    let psk = matches!(keys, ClientKeys::Psk(_));
    let text = match (e, keys) {
        (Handshake(HandshakeError::BadCertificate(_)), _) => {
            "is --ca the CA that issued the server's certificate?".to_string()
        }
        (Handshake(HandshakeError::WrongName(_)), _) => format!(
            "the server's certificate must name {checked}: issue it with `smt cert issue \
             --name {checked}`, or give the name it holds with --server-name"
        ),
        (Handshake(HandshakeError::Timeout), _) if psk => {
            "a server using TLS does not answer a PSK hello: is it running with --psk?".into()
        }
        (Handshake(HandshakeError::Timeout), _) => {
            "a server using --psk does not answer a TLS handshake: is it running with --cert?"
                .into()
        }
        (Rpc(RpcError::Timeout), _) if psk => {
            "the server drops calls under another key: is --psk the server's?".into()
        }
        (Rpc(RpcError::SessionClosed), ClientKeys::Tls { .. }) => {
            "the server ended the session after the handshake, as one that requires a client \
             certificate does: give --cert and --key"
                .into()
        }
        (Rpc(RpcError::SessionClosed), ClientKeys::MutualTls { .. }) => {
            "the server ended the session after the handshake: does it trust the CA that \
             issued --cert?"
                .into()
        }
        _ => return String::new(),
    };
    format!("; {text}")
}

pub fn client(args: ClientArgs) -> Result<(), CliError> {
    let keys = ClientKeys::from_args(&args.keys)?;
    let ticket = client_ticket(&args, &keys)?;
    let recording = Recording::open(&args.observe)?;
    let client = open_client(&args, &keys, &recording)?;
    let server = args.server.addr;
    let checked = checked_name(&args).unwrap_or_else(|| server.ip().to_string());
    let mode = match &ticket {
        Some((_, name)) => format!(
            "0-RTT SMT-ticket for {name} ({} forward secrecy), {}",
            if args.ticket.forward_secrecy {
                "with"
            } else {
                "without"
            },
            keys.describe()
        ),
        None => keys.describe(),
    };
    if let Some((verified, _)) = ticket.clone() {
        client.set_zero_rtt_ticket(server, verified, args.ticket.forward_secrecy)?;
    }
    if !args.json {
        say!(
            "smt client {} -> {server} ({}), {mode}, server name {checked}",
            client.local_addr(),
            client.features(),
        );
    }
    let measured = reach(&client, server, &keys, &checked).and_then(|()| {
        let row = report::measure(
            &client,
            server,
            None,
            args.size,
            args.seconds,
            args.concurrency,
        )?;
        Ok((row, client.stats()?))
    });
    // A failed run's capture and trace are the ones most worth reading:
    // they are completed either way.
    client.close();
    recording.finish()?;
    let (row, stats) = measured?;
    if args.json {
        let name = match (&ticket, args.ticket.forward_secrecy) {
            (Some(_), true) => "zero-rtt-fs",
            (Some(_), false) => "zero-rtt",
            (None, _) => keys.name(),
        };
        report::print_json(&json!({
            "mode": name,
            "client": client.local_addr().to_string(),
            "server": server.to_string(),
            "server_name": checked,
            "socket": client.features().to_string(),
            "result": row.to_json(),
            "stats": report::stats_json(&stats),
        }));
    } else {
        report::print_header();
        report::print_row(&row);
        report::print_stats("client", &stats.total);
    }
    report::all_succeeded(&[row])
}

/// The client's endpoint, with its keys: files read and the load checked
/// before its socket is opened. With TLS, the server's certificate is
/// checked against `--server-name`, else --server's HOST, else its IP.
fn open_client(
    args: &ClientArgs,
    keys: &ClientKeys,
    recording: &Recording,
) -> Result<Endpoint, CliError> {
    let setup = client_setup(keys, recording)?;
    let server = args.server.addr;
    let name = checked_name(args)
        .map(|n| {
            ServerName::try_from(n.clone()).map_err(|_| {
                CliError::Usage(format!(
                    "--server-name {n:?} is not a DNS name or IP address"
                ))
            })
        })
        .transpose()?;
    let local = local_towards(server)?;
    let mut cfg = config(&args.transport, local)?;
    cfg.set_observe(recording.observe());
    report::check_load("--size", args.size, args.concurrency, &cfg)?;
    let client = Endpoint::bind(local, cfg).map_err(|e| cannot_bind("local", local, e))?;
    match setup {
        ClientSetup::Tls(tls) => client.set_tls_client(tls)?,
        ClientSetup::Psk(psk) => client.set_psk_client(psk)?,
    }
    if let Some(name) = name {
        client.set_server_name(server, name)?;
    }
    Ok(client)
}
