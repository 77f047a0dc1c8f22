//! `smt`: run an encrypted SMT demo, server or client from the command line.

mod bench;
mod cli;
mod demo;
mod pki;
mod report;
mod run;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    init_tracing(args.verbose);
    let result = match args.command {
        cli::Command::Demo(a) => demo::run(a),
        cli::Command::Server(a) => run::server(a),
        cli::Command::Client(a) => run::client(a),
        cli::Command::Keygen => {
            println!("{}", run::keygen());
            Ok(())
        }
        cli::Command::Ca(c) => pki::ca(c),
        cli::Command::Ticket(c) => pki::ticket(c),
        cli::Command::BenchHandshake(a) => bench::handshake(a),
        cli::Command::Cert(c) => pki::cert(c),
        cli::Command::Dump(a) => {
            smt_dump::cli::run(&a).map_err(|e| smt::Error::Io(std::io::Error::other(e)))
        }
    };
    if let Err(e) = result {
        eprintln!("smt: error: {e}");
        std::process::exit(1);
    }
}

fn init_tracing(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
