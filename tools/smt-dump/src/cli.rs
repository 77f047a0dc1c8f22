//! The `smt dump` subcommand: arguments and the run.

use std::io::Write as _;
use std::path::PathBuf;

use clap::Args;

use crate::{dump, KeyLog, Options};

/// `smt dump CAPTURE [--keylog FILE] [--json]`, `smt dump --trace FILE...`.
#[derive(Debug, Args)]
pub struct DumpArgs {
    /// A pcap or pcapng file (tcpdump -w, Wireshark, smt --capture).
    #[arg(required_unless_present = "trace")]
    pub capture: Option<PathBuf>,
    /// An event trace (smt --trace, JSON lines): print one timeline per
    /// RPC, merging the traces given (repeat for each endpoint's file).
    #[arg(long, value_name = "FILE")]
    pub trace: Vec<PathBuf>,
    /// With --trace: only the RPC with this message ID (hex 0x.. or
    /// decimal).
    #[arg(long, value_name = "ID", requires = "trace")]
    pub id: Option<String>,
    /// The endpoints' key log: SSLKEYLOGFILE lines for TLS sessions, SMT's
    /// labels for PSK and 0-RTT ones (docs/observability.md).
    #[arg(long, env = "SSLKEYLOGFILE")]
    pub keylog: Option<PathBuf>,
    /// One JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// UDP ports that carry SMT (repeat or comma-separate); default: every
    /// UDP datagram that parses as SMT.
    #[arg(long = "port", value_delimiter = ',')]
    pub ports: Vec<u16>,
    /// SMT's IP protocol number, for raw-IP captures.
    #[arg(long, default_value_t = 253)]
    pub ip_protocol: u8,
    /// The endpoints send control packets without MACs
    /// (Config::authenticate_control off).
    #[arg(long)]
    pub no_control_tags: bool,
    /// Bits of record index in the record sequence number (Config::seq_layout).
    #[arg(long, default_value_t = 16)]
    pub index_bits: u8,
    /// Plaintext bytes shown per message.
    #[arg(long, default_value_t = 16)]
    pub preview: usize,
    /// Write each decrypted message to DIR/FRAME-ID.bin.
    #[arg(long, value_name = "DIR")]
    pub extract: Option<PathBuf>,
}

/// Why `smt dump` could not run (the capture's contents are findings, not
/// errors, except a file that is no capture at all).
#[derive(Debug)]
#[non_exhaustive]
pub enum DumpError {
    /// Reading a file failed.
    Io(PathBuf, std::io::Error),
    /// The capture is not a pcap or pcapng file.
    Capture(crate::CaptureError),
    /// An option out of range.
    Usage(String),
}

impl std::fmt::Display for DumpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(path, e) => write!(f, "{}: {e}", path.display()),
            Self::Capture(e) => write!(f, "{e}"),
            Self::Usage(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for DumpError {}

/// Runs `smt dump`: prints the report on stdout (the capture's, then the
/// traces' timelines). A capture that stops early is reported (on stderr
/// too) and makes the run fail after the report.
pub fn run(args: &DumpArgs) -> Result<(), DumpError> {
    if let Some(capture) = &args.capture {
        run_capture(args, capture)?;
    }
    if !args.trace.is_empty() {
        run_traces(args)?;
    }
    Ok(())
}

/// Prints the timelines of `--trace` files.
fn run_traces(args: &DumpArgs) -> Result<(), DumpError> {
    let files = args
        .trace
        .iter()
        .map(|path| {
            let text = std::fs::read(path).map_err(|e| DumpError::Io(path.clone(), e))?;
            let name = path.display().to_string();
            Ok((name, String::from_utf8_lossy(&text).into_owned()))
        })
        .collect::<Result<Vec<_>, DumpError>>()?;
    let timelines = crate::trace::timelines(&files).map_err(|e| DumpError::Usage(e.to_string()))?;
    let text = if args.json {
        let mut t = timelines;
        if let Some(id) = &args.id {
            t.rpcs.retain(|r| r.is(id));
        }
        // NOTE(unwrap): the timelines hold strings, numbers and JSON values.
        serde_json::to_string_pretty(&t).expect("serialisable") + "\n"
    } else {
        timelines.to_text(args.id.as_deref())
    };
    print(&text)
}

/// Writes `text` to standard output; a reader that went away (`smt dump
/// ... | head`) is not an error.
fn print(text: &str) -> Result<(), DumpError> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(DumpError::Io("standard output".into(), e))
        }
        _ => Ok(()),
    }
}

fn run_capture(args: &DumpArgs, capture: &std::path::Path) -> Result<(), DumpError> {
    let bytes = std::fs::read(capture).map_err(|e| DumpError::Io(capture.to_owned(), e))?;
    let log = match &args.keylog {
        Some(path) => {
            let text = std::fs::read(path).map_err(|e| DumpError::Io(path.clone(), e))?;
            Some(KeyLog::parse(&String::from_utf8_lossy(&text)))
        }
        None => None,
    };
    let opts = Options {
        tagged_control: !args.no_control_tags,
        seq_layout: smt_proto::record::SeqLayout::new(args.index_bits)
            .ok_or_else(|| DumpError::Usage("--index-bits must be 1 to 62".into()))?,
        ip_protocol: args.ip_protocol,
        ports: args.ports.clone(),
        keep_plaintext: args.extract.is_some(),
        preview: args.preview,
    };
    let report = dump(&bytes, log.as_ref(), &opts).map_err(DumpError::Capture)?;
    let text = if args.json {
        // NOTE(unwrap): the report holds strings, numbers and lists only.
        serde_json::to_string_pretty(&report).expect("serialisable") + "\n"
    } else {
        report.to_text()
    };
    print(&text)?;
    for line in &report.capture.key_log_errors {
        eprintln!("smt dump: key log {line}");
    }
    if let Some(dir) = &args.extract {
        extract(dir, &report)?;
    }
    match &report.capture.error {
        Some(e) => Err(DumpError::Usage(e.clone())),
        None => Ok(()),
    }
}

fn extract(dir: &std::path::Path, report: &crate::Report) -> Result<(), DumpError> {
    std::fs::create_dir_all(dir).map_err(|e| DumpError::Io(dir.to_owned(), e))?;
    for m in &report.messages {
        if let (Some(data), "complete") = (&m.plaintext, m.status) {
            let path = dir.join(format!("{}-{}-{}.bin", m.first_frame, m.kind, m.id));
            std::fs::write(&path, data).map_err(|e| DumpError::Io(path.clone(), e))?;
        }
    }
    Ok(())
}
