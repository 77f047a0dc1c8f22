//! `smt-kv`: serve the store, or run YCSB against it. See `docs/apps.md`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use smt_kv::cmd::Password;
use smt_kv::resp::Limits;
use smt_kv::server::{Identity, RunningServer, ServerConfig};

#[derive(Parser, Debug)]
#[command(
    name = "smt-kv",
    version,
    about = "A Redis-compatible store over TCP, TLS 1.3/TCP and SMT"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the store on up to three front ends, from one event loop.
    Serve(ServeArgs),
    /// Run YCSB workloads A-D over TCP, TLS/TCP and SMT (see `ycsb --help`).
    Ycsb(smt_kv::ycsb::cli::YcsbArgs),
    /// Write a throwaway CA and a server certificate (ca.pem, server.pem,
    /// server-key.pem, the key readable by its owner only) for
    /// `serve --cert/--key` and for other servers and clients
    /// (redis-server, redis-benchmark --cacert). Existing files are kept
    /// unless --force is given.
    Certs(CertsArgs),
    /// Send one command and print the reply (like redis-cli), over any
    /// front end: the way to talk to the SMT one by hand.
    Cli(CliArgs),
}

#[derive(clap::Args, Debug)]
struct CliArgs {
    /// The server's front end: HOST:PORT, HOST a name (checked against
    /// the certificate for tls and smt) or an IP address.
    #[arg(long)]
    server: String,
    /// tcp, tls or smt.
    #[arg(long, default_value = "tcp")]
    transport: String,
    /// The CA certificate that issued the server's (for tls and smt).
    #[arg(long)]
    ca: Option<PathBuf>,
    /// The server's password, sent with AUTH first (as redis-cli -a).
    #[arg(short = 'a', long, env = "SMT_KV_PASSWORD", hide_env_values = true)]
    password: Option<String>,
    /// The command and its arguments.
    #[arg(required = true, num_args = 1..)]
    command: Vec<String>,
}

#[derive(clap::Args, Debug)]
struct CertsArgs {
    /// Where the three files go (created if missing).
    #[arg(long)]
    dir: PathBuf,
    /// Names the certificate carries: IP addresses or DNS names.
    #[arg(long, value_delimiter = ',', default_value = "127.0.0.1,localhost")]
    names: Vec<String>,
    /// Replace files that are already there.
    #[arg(long)]
    force: bool,
}

#[derive(clap::Args, Debug)]
struct ServeArgs {
    /// Plain RESP over TCP (Redis's port by default).
    #[arg(long, default_value = "127.0.0.1:6379")]
    tcp: Option<SocketAddr>,
    /// RESP over TLS 1.3 over TCP.
    #[arg(long)]
    tls: Option<SocketAddr>,
    /// RESP in SMT messages (UDP), with TLS 1.3 session establishment.
    #[arg(long)]
    smt: Option<SocketAddr>,
    /// The certificate chain of the TLS and SMT front ends (PEM; e.g. from
    /// `smt cert issue`). Without it a throwaway CA and certificate are made.
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// With a throwaway certificate: write its CA certificate here, for
    /// clients (`redis-cli --tls --cacert FILE`).
    #[arg(long)]
    write_ca: Option<PathBuf>,
    /// The largest bulk argument (Redis's proto-max-bulk-len).
    #[arg(long, default_value_t = Limits::default().max_bulk_len)]
    proto_max_bulk_len: u64,
    /// The most unprocessed input per client (Redis's client-query-buffer-limit).
    #[arg(long, default_value_t = Limits::default().query_buffer_limit)]
    client_query_buffer_limit: usize,
    /// Stream clients served at once (Redis's maxclients).
    #[arg(long, default_value_t = 10_000)]
    maxclients: usize,
    /// Clients of every front end (TCP, TLS and SMT) must send this
    /// password with AUTH before any other command (Redis's requirepass).
    /// Over SMT, where each message stands alone, a message starts with
    /// AUTH. Prefer the environment variable to the flag, which other
    /// users of the machine can see.
    #[arg(long, env = "SMT_KV_REQUIREPASS", hide_env_values = true)]
    requirepass: Option<String>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve(args),
        Command::Ycsb(args) => smt_kv::ycsb::cli::run(args),
        Command::Certs(args) => certs(args),
        Command::Cli(args) => one_command(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("smt-kv: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    let identity = identity(&args)?;
    let config = ServerConfig {
        tcp: args.tcp,
        tls: args.tls,
        smt: args.smt,
        identity,
        limits: Limits {
            max_bulk_len: args.proto_max_bulk_len,
            query_buffer_limit: args.client_query_buffer_limit,
        },
        max_clients: args.maxclients,
        requirepass: args.requirepass.map(|p| Password::new(p.into_bytes())),
    };
    let server = RunningServer::start(config)?;
    for (name, addr) in [
        ("tcp", server.tcp),
        ("tls", server.tls),
        ("smt", server.smt),
    ] {
        if let Some(addr) = addr {
            eprintln!("smt-kv: {name} on {addr}");
        }
    }
    server.wait();
    Ok(())
}

fn one_command(args: CliArgs) -> Result<(), Box<dyn std::error::Error>> {
    use smt_kv::client::{Client, Transport};
    let transport = match args.transport.to_ascii_lowercase().as_str() {
        "tcp" => Transport::Tcp,
        "tls" => Transport::Tls,
        "smt" => Transport::Smt,
        other => return Err(format!("unknown transport {other:?} (tcp, tls or smt)").into()),
    };
    let ca = match &args.ca {
        Some(path) => std::fs::read_to_string(path)?,
        None if transport == Transport::Tcp => String::new(),
        None => return Err("--ca is needed for tls and smt".into()),
    };
    let mut client = Client::connect_to(transport, &args.server, &ca)?;
    let words: Vec<&[u8]> = args.command.iter().map(|w| w.as_bytes()).collect();
    let reply = match &args.password {
        Some(password) => client.call_authenticated(password.as_bytes(), &words)?,
        None => client.call(&words)?,
    };
    println!("{}", show(&reply));
    Ok(())
}

/// A reply as redis-cli prints it, roughly.
fn show(v: &smt_kv::resp::Value) -> String {
    use smt_kv::resp::Value;
    match v {
        Value::Simple(s) => String::from_utf8_lossy(s).into_owned(),
        Value::Error(e) => format!("(error) {}", String::from_utf8_lossy(e)),
        Value::Integer(n) => format!("(integer) {n}"),
        Value::Bulk(b) => format!("{:?}", String::from_utf8_lossy(b)),
        Value::Nil | Value::NilArray => "(nil)".into(),
        Value::Array(items) if items.is_empty() => "(empty array)".into(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| format!("{}) {}", i + 1, show(item)))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// The files `certs` writes, and who may read them.
const CERT_FILES: [(&str, u32); 3] = [
    ("ca.pem", 0o644),
    ("server.pem", 0o644),
    ("server-key.pem", 0o600),
];

fn certs(args: CertsArgs) -> Result<(), Box<dyn std::error::Error>> {
    let existing: Vec<&str> = CERT_FILES
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| args.dir.join(name).exists())
        .collect();
    if !existing.is_empty() && !args.force {
        return Err(format!(
            "{} already exists in {} (nothing written; --force replaces them)",
            existing.join(", "),
            args.dir.display()
        )
        .into());
    }
    let names: Vec<&str> = args.names.iter().map(String::as_str).collect();
    let identity = Identity::generate(&names)?;
    std::fs::create_dir_all(&args.dir)?;
    let contents = [
        identity.ca_pem.unwrap_or_default(),
        identity.chain_pem,
        identity.key_pem,
    ];
    for ((name, mode), text) in CERT_FILES.iter().zip(contents) {
        write_file(&args.dir.join(name), text.as_bytes(), *mode)?;
    }
    eprintln!(
        "smt-kv: wrote ca.pem, server.pem, server-key.pem (mode 600) in {}",
        args.dir.display()
    );
    Ok(())
}

/// Writes `path` with permissions `mode` from the start (a private key is
/// never readable by others, not even briefly): into a new file next to
/// it, then renamed over it.
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let result = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&temp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// The certificate from files, or a throwaway one naming the listening
/// addresses (and `localhost`).
fn identity(args: &ServeArgs) -> Result<Identity, Box<dyn std::error::Error>> {
    if let (Some(cert), Some(key)) = (&args.cert, &args.key) {
        return Ok(Identity {
            chain_pem: std::fs::read_to_string(cert)?,
            key_pem: std::fs::read_to_string(key)?,
            ca_pem: None,
        });
    }
    let mut names: Vec<String> = [args.tls, args.smt]
        .iter()
        .flatten()
        .map(|a| a.ip().to_string())
        .collect();
    names.push("localhost".into());
    names.dedup();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let identity = Identity::generate(&refs)?;
    if let (Some(path), Some(ca)) = (&args.write_ca, &identity.ca_pem) {
        std::fs::write(path, ca)?;
        eprintln!(
            "smt-kv: throwaway CA certificate written to {}",
            path.display()
        );
    }
    Ok(identity)
}
