//! `smt-memnode`: serve encrypted pages over SMT. Keys for the network leg
//! as `smt server` takes them: `--psk HEX` (or `SMT_PSK`; make one with
//! `smt keygen`) or `--cert/--key` (TLS 1.3). The XTS keys that seal the
//! pages stay with the compute nodes.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use smt::keys::AeadAlgorithm;
use smt::tls::TlsServer;
use smt::{EndpointConfig, LocalEndpoint, ServerAcceptor};
use smt_memnode::{MemNode, StoreConfig};

#[derive(Parser, Debug)]
#[command(
    name = "smt-memnode",
    version,
    about = "A memory node: stores compute nodes' encrypted 4 KiB pages, served over SMT"
)]
struct Args {
    /// Where to listen (UDP).
    #[arg(long, default_value = "127.0.0.1:7400")]
    listen: SocketAddr,
    /// A pre-shared key (hex, at least 32 bytes) for the PSK nonce exchange.
    #[arg(long, env = "SMT_PSK", hide_env_values = true, conflicts_with_all = ["cert", "key"])]
    psk: Option<String>,
    /// TLS 1.3: the certificate chain (PEM).
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// TLS 1.3: the certificate's private key (PEM).
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// Most pages stored at once.
    #[arg(long, default_value_t = StoreConfig::default().capacity_pages)]
    capacity_pages: u64,
    /// Page addresses must be below this many bytes (a multiple of 4096).
    #[arg(long, default_value_t = StoreConfig::default().address_limit)]
    address_limit: u64,
    /// Stop after this many seconds (default: serve until killed).
    #[arg(long)]
    duration: Option<f64>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("smt-memnode: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if !args.address_limit.is_multiple_of(4096) || args.address_limit == 0 {
        return Err(format!(
            "--address-limit {} must be a positive multiple of 4096",
            args.address_limit
        )
        .into());
    }
    let (acceptor, mode) = acceptor(&args)?;
    let mut endpoint = LocalEndpoint::bind(args.listen, EndpointConfig::default())
        .map_err(|e| format!("cannot bind --listen {}: {e}", args.listen))?;
    endpoint.set_handshake_acceptor(Box::new(acceptor));
    let store = StoreConfig {
        capacity_pages: args.capacity_pages,
        address_limit: args.address_limit,
    };
    let mut node = MemNode::new(endpoint, store);
    // Scripts wait for this line.
    println!(
        "smt-memnode on {} ({mode}), {} pages of capacity below address {:#x}",
        node.local_addr(),
        store.capacity_pages,
        store.address_limit
    );
    let end = args
        .duration
        .map(|s| Instant::now() + Duration::from_secs_f64(s));
    while end.is_none_or(|e| Instant::now() < e) {
        node.serve_once(Some(Duration::from_millis(100)))?;
    }
    let s = node.stats();
    println!(
        "smt-memnode: {} requests ({} refused), {} pages read, {} written, {} page errors",
        s.requests, s.refused, s.pages_read, s.pages_written, s.page_errors
    );
    Ok(())
}

fn acceptor(args: &Args) -> Result<(ServerAcceptor, &'static str), Box<dyn std::error::Error>> {
    if let Some(psk) = &args.psk {
        let key = hex::decode(psk.trim())
            .map_err(|_| "--psk must be hex (make a key with `smt keygen`)")?;
        if key.len() < 32 {
            return Err("--psk must be at least 32 bytes (64 hex digits)".into());
        }
        let a = ServerAcceptor::new(None, None).with_psk(&key, AeadAlgorithm::Aes128Gcm);
        return Ok((a, "pre-shared key"));
    }
    let (Some(cert), Some(key)) = (&args.cert, &args.key) else {
        return Err("no keys: give --psk (or SMT_PSK) or --cert and --key for TLS 1.3".into());
    };
    let read = |p: &PathBuf| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let tls = TlsServer::new(&read(cert)?, &read(key)?, None)?;
    Ok((ServerAcceptor::new(Some(tls), None), "TLS 1.3"))
}
