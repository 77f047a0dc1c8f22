//! `smt`: run an encrypted SMT demo, server or client from the command line.

#[macro_use]
mod out;

mod bench;
mod cli;
mod demo;
mod error;
mod files;
mod metrics;
mod mode;
mod pki;
mod record;
mod report;
mod run;
mod threads;
mod tickets;
mod values;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

use crate::cli::Command;
use crate::error::CliError;

fn main() {
    let args = parse_args();
    init_tracing(args.verbose);
    if let Err(e) = dispatch(args.command) {
        eprintln!("smt: error: {e}");
        std::process::exit(e.exit_code());
    }
}

/// Each command's errors convert into [`CliError`] (the library's
/// `smt::Error` too), so every arm reads the same.
fn dispatch(command: Command) -> Result<(), CliError> {
    match command {
        Command::Demo(a) => demo::run(a)?,
        Command::Server(a) => run::server(a)?,
        Command::Client(a) => run::client(a)?,
        Command::Keygen(a) => run::keygen(a)?,
        Command::Ca(c) => pki::ca(c)?,
        Command::Ticket(c) => pki::ticket(c)?,
        Command::BenchHandshake(a) => bench::handshake(a)?,
        Command::Cert(c) => pki::cert(c)?,
        Command::Dump(a) => smt_dump::cli::run(&a).map_err(std::io::Error::other)?,
    }
    Ok(())
}

/// The command line, or exit: help and version as clap prints them, a
/// usage error as one line in the form of every other error (clap's own
/// adds the usage and a tip on further lines), with clap's exit status.
fn parse_args() -> cli::Cli {
    cli::Cli::try_parse().unwrap_or_else(|e| {
        if !e.use_stderr() {
            e.exit();
        }
        let message = match e.kind() {
            // clap would print the whole help here.
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => missing_command(),
            _ => one_line(&e.to_string()),
        };
        eprintln!("smt: error: {message}");
        std::process::exit(e.exit_code());
    })
}

/// For `smt` or `smt ca` alone: the command given, and the commands it
/// takes.
fn missing_command() -> String {
    let mut command = cli::Cli::command();
    let mut given = vec!["smt".to_string()];
    for arg in std::env::args().skip(1) {
        if let Some(sub) = command.find_subcommand(&arg).cloned() {
            given.push(arg);
            command = sub;
        }
    }
    let choices: Vec<&str> = command
        .get_subcommands()
        .map(|c| c.get_name())
        .filter(|name| *name != "help")
        .collect();
    let given = given.join(" ");
    format!(
        "`{given}` needs a command: {} (see `{given} --help`)",
        choices.join(", ")
    )
}

/// clap's message on one line: without its "error: " prefix, the usage
/// and the pointer to --help, its tips kept after a semicolon:
/// "unexpected argument '--sise' found; tip: a similar argument exists: '--size'".
fn one_line(rendered: &str) -> String {
    let rendered = rendered.strip_prefix("error: ").unwrap_or(rendered);
    rendered
        .split("\n\n")
        .filter(|p| !p.starts_with("Usage:") && !p.starts_with("For more information"))
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_become_one_line() {
        let rendered = "error: unexpected argument '--sise' found\n\n  tip: a similar argument \
                        exists: '--size'\n\nUsage: smt client [OPTIONS]\n\nFor more information, \
                        try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "unexpected argument '--sise' found; tip: a similar argument exists: '--size'"
        );
        let missing = "error: the following required arguments were not provided:\n  --name \
                       <NAMES>\n\nUsage: smt cert issue --name <NAMES>\n";
        assert_eq!(
            one_line(missing),
            "the following required arguments were not provided: --name <NAMES>"
        );
    }
}
