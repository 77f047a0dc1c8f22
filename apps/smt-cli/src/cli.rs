//! Command-line arguments.

use std::net::SocketAddr;

use clap::{Args, Parser, Subcommand};

/// Encrypted message-based RPCs over UDP or raw IP (Secure Message Transport).
#[derive(Debug, Parser)]
#[command(name = "smt", version, about, long_about = None)]
pub struct Cli {
    /// More logging (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Server and client in one process on loopback, fresh keys, RPCs of
    /// 64 B to 1 MiB; prints latency, throughput and counters.
    Demo(DemoArgs),
    /// Serve RPCs (echo) for clients that know the pre-shared key.
    Server(ServerArgs),
    /// Send RPCs to an `smt server` and report.
    Client(ClientArgs),
    /// Print a new random pre-shared key (hex) for `server`/`client`.
    Keygen,
    /// Time to first response with each way of establishing a session
    /// (paper Fig. 12): full TLS 1.3, TLS resumption, 0-RTT SMT-ticket with
    /// and without forward secrecy; plus per-step CPU costs (Table 2).
    BenchHandshake(BenchHandshakeArgs),
    /// Certificate authority files (PEM).
    #[command(subcommand)]
    Ca(CaCommand),
    /// Certificates issued by a CA made with `smt ca init`.
    #[command(subcommand)]
    Cert(CertCommand),
    /// 0-RTT SMT-tickets (seed 001 §4.5.2).
    #[command(subcommand)]
    Ticket(TicketCommand),
    /// Decode a pcap/pcapng capture of SMT; with the key log, decrypt its
    /// messages (docs/observability.md).
    Dump(smt_dump::cli::DumpArgs),
}

#[derive(Debug, Subcommand)]
pub enum TicketCommand {
    /// Issue a ticket signed with a server certificate's key: writes OUT
    /// (base64 ticket) and OUT-static.key (the server's long-term X25519
    /// key, hex; keep secret).
    Issue {
        /// Server certificate chain (PEM, from `smt cert issue`).
        #[arg(long)]
        cert: std::path::PathBuf,
        /// Its private key (PEM).
        #[arg(long)]
        key: std::path::PathBuf,
        /// The server's DNS name (in the certificate).
        #[arg(long)]
        name: String,
        /// Validity in seconds (at most 3600).
        #[arg(long, default_value_t = 3600)]
        lifetime: u64,
        /// Output file.
        #[arg(long, default_value = "smt-ticket")]
        out: std::path::PathBuf,
    },
    /// Print a ticket's fields; with --ca, verify it.
    Show {
        /// The ticket file (base64).
        #[arg(long, default_value = "smt-ticket")]
        ticket: std::path::PathBuf,
        /// CA certificate (PEM) to verify against.
        #[arg(long)]
        ca: Option<std::path::PathBuf>,
        /// Expected server name (default: the ticket's).
        #[arg(long)]
        name: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct BenchHandshakeArgs {
    /// Sessions to establish per method.
    #[arg(long, default_value_t = 200)]
    pub iterations: usize,
}

#[derive(Debug, Subcommand)]
pub enum CaCommand {
    /// Make a new CA (ECDSA P-256): writes DIR/ca.pem (certificate) and
    /// DIR/ca-key.pem (keep it secret).
    Init {
        /// Directory to write into.
        #[arg(long, default_value = "smt-ca")]
        dir: std::path::PathBuf,
        /// The CA's name.
        #[arg(long, default_value = "SMT datacenter CA")]
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum CertCommand {
    /// Issue a certificate for NAMES (DNS names or IP addresses): writes
    /// OUT.pem (chain) and OUT-key.pem.
    Issue {
        /// The CA directory (from `smt ca init`).
        #[arg(long, default_value = "smt-ca")]
        ca: std::path::PathBuf,
        /// Names the certificate is for (servers are called by IP address).
        #[arg(long = "name", required = true)]
        names: Vec<String>,
        /// A client certificate (for mutual TLS) instead of a server one.
        #[arg(long)]
        client: bool,
        /// Output path prefix.
        #[arg(long, default_value = "smt-cert")]
        out: std::path::PathBuf,
    },
}

/// TLS 1.3 settings shared by server and client.
#[derive(Debug, Args, Clone, Default)]
pub struct TlsArgs {
    /// CA certificate (PEM): the server checks client certificates against
    /// it (mutual TLS); the client checks the server against it.
    #[arg(long)]
    pub ca: Option<std::path::PathBuf>,
    /// This side's certificate chain (PEM).
    #[arg(long)]
    pub cert: Option<std::path::PathBuf>,
    /// This side's private key (PEM).
    #[arg(long)]
    pub key: Option<std::path::PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct TransportArgs {
    /// Use SMT's own IP protocol (raw IP; needs CAP_NET_RAW) instead of UDP.
    #[arg(long)]
    pub raw: bool,
    /// IP protocol number in raw mode.
    #[arg(long, default_value_t = smt::DEFAULT_IP_PROTOCOL)]
    pub ip_protocol: u8,
    /// Link MTU; packets are sized to fit it (IP and UDP headers included).
    #[arg(long, default_value_t = 1500)]
    pub mtu: usize,
    /// Disable UDP segmentation offload (GSO).
    #[arg(long)]
    pub no_gso: bool,
    /// Disable UDP receive offload (GRO).
    #[arg(long)]
    pub no_gro: bool,
    /// Busy-poll the socket (lowest latency, one core spinning).
    #[arg(long)]
    pub busy_poll: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub transport: TransportArgs,
    /// Seconds to spend per message size (latency and throughput phases).
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Outstanding RPCs in the throughput phase.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Install fresh keys directly instead of running a TLS 1.3 handshake
    /// with a throwaway CA.
    #[arg(long)]
    pub no_handshake: bool,
    /// Message sizes to run (bytes), comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1024, 16384, 65536, 1 << 20])]
    pub sizes: Vec<usize>,
}

#[derive(Debug, Args)]
pub struct ServerArgs {
    #[command(flatten)]
    pub transport: TransportArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub listen: SocketAddr,
    /// Pre-shared key, hex (see `smt keygen`), instead of TLS.
    #[arg(long, env = "SMT_PSK")]
    pub psk: Option<String>,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Threads answering requests.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Stop after this many seconds (default: run until killed).
    #[arg(long)]
    pub duration: Option<f64>,
}

#[derive(Debug, Args)]
pub struct ClientArgs {
    #[command(flatten)]
    pub transport: TransportArgs,
    /// The server's address.
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub server: SocketAddr,
    /// Pre-shared key, hex (the server's), instead of TLS.
    #[arg(long, env = "SMT_PSK")]
    pub psk: Option<String>,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Request size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Seconds to run (half one-at-a-time for latency, half concurrent).
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Outstanding RPCs at once.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
}
