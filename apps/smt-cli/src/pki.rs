//! `smt ca init`, `smt cert issue`, and loading TLS settings from files.

use std::path::Path;

use smt::Error;
use smt_tls::certs::Ca;
use smt_tls::{KeyLogPolicy, TlsClient, TlsOptions, TlsServer};

/// TLS options of the CLI: the standard SSLKEYLOGFILE is honoured (for
/// decrypting captures while debugging; never set it in production).
pub fn tls_options() -> TlsOptions {
    TlsOptions::default().key_log(KeyLogPolicy::FromEnv)
}

use crate::cli::{CaCommand, CertCommand, TicketCommand, TlsArgs};

fn io_err(msg: String) -> Error {
    Error::Io(std::io::Error::other(msg))
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| io_err(format!("cannot read {what} {}: {e}", path.display())))
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|e| io_err(format!("cannot write {}: {e}", path.display())))
}

pub fn ticket(cmd: TicketCommand) -> Result<(), Error> {
    match cmd {
        TicketCommand::Issue {
            cert,
            key,
            name,
            lifetime,
            out,
        } => {
            let chain_pem = String::from_utf8(read(&cert, "certificate")?)
                .map_err(|_| io_err("certificate is not PEM".into()))?;
            let key_pem = String::from_utf8(read(&key, "key")?)
                .map_err(|_| io_err("key is not PEM".into()))?;
            let issued = smt_tls::certs::IssuedCert::from_pem(&format!("{chain_pem}{key_pem}"))
                .map_err(|e| io_err(format!("certificate/key: {e}")))?;
            let static_key = smt_ticket::StaticKey::generate();
            let ticket = smt_ticket::Ticket::issue(
                &static_key,
                &issued.chain_der(),
                issued.key_der(),
                &name,
                std::time::SystemTime::now(),
                std::time::Duration::from_secs(lifetime),
            )
            .map_err(|e| io_err(format!("cannot issue ticket: {e}")))?;
            let key_path = std::path::PathBuf::from(format!("{}-static.key", out.display()));
            write(&out, &ticket.to_base64())?;
            let hex: String = static_key
                .to_bytes()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            write(&key_path, &hex)?;
            println!("ticket for {name}, valid {lifetime} s: {} (publish it, e.g. as DNS TXT at _smt-ticket.{name}.); static key: {} (keep secret)", out.display(), key_path.display());
            Ok(())
        }
        TicketCommand::Show { ticket, ca, name } => {
            let text = String::from_utf8(read(&ticket, "ticket")?)
                .map_err(|_| io_err("ticket is not base64 text".into()))?;
            let t = smt_ticket::Ticket::from_base64(&text)
                .map_err(|e| io_err(format!("not a ticket: {e}")))?;
            println!("server name: {}", t.server_name());
            println!(
                "valid: {} .. {} (unix seconds)",
                t.not_before(),
                t.not_after()
            );
            println!(
                "static key: {}",
                t.static_public_key()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            );
            println!(
                "certificates: {}, {} bytes encoded",
                t.certificate_chain().count(),
                t.as_bytes().len()
            );
            if let Some(ca) = ca {
                let ca_der = smt_tls::certificates_der(&read(&ca, "CA")?)
                    .map_err(|e| io_err(format!("CA file: {e}")))?
                    .remove(0);
                let expected = name.unwrap_or_else(|| t.server_name().to_string());
                match t.verify(&ca_der, &expected, std::time::SystemTime::now()) {
                    Ok(_) => {
                        println!("verification: OK (CA, name {expected}, signature, validity)")
                    }
                    Err(e) => return Err(io_err(format!("verification failed: {e}"))),
                }
            }
            Ok(())
        }
    }
}

pub fn ca(cmd: CaCommand) -> Result<(), Error> {
    let CaCommand::Init { dir, name } = cmd;
    std::fs::create_dir_all(&dir)
        .map_err(|e| io_err(format!("cannot create {}: {e}", dir.display())))?;
    let ca = Ca::generate(&name).map_err(|e| io_err(e.to_string()))?;
    write(&dir.join("ca.pem"), ca.cert_pem())?;
    write(&dir.join("ca-key.pem"), &ca.to_pem())?;
    println!(
        "CA \"{name}\": {} (certificate), {} (certificate + key; keep secret)",
        dir.join("ca.pem").display(),
        dir.join("ca-key.pem").display()
    );
    Ok(())
}

pub fn cert(cmd: CertCommand) -> Result<(), Error> {
    let CertCommand::Issue {
        ca,
        names,
        client,
        out,
    } = cmd;
    let pem = String::from_utf8(read(&ca.join("ca-key.pem"), "CA key")?)
        .map_err(|_| io_err("CA key is not PEM text".into()))?;
    let ca = Ca::from_pem(&pem).map_err(|e| io_err(format!("bad CA files: {e}")))?;
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let cert = ca
        .issue(&names, client)
        .map_err(|e| io_err(e.to_string()))?;
    let (chain, key) = (
        out.with_extension("pem"),
        Path::new(&format!("{}-key.pem", out.display())).to_path_buf(),
    );
    write(&chain, &cert.chain_pem())?;
    write(&key, &cert.key_pem())?;
    println!(
        "{} certificate for {names:?}: {} and {}",
        if client { "client" } else { "server" },
        chain.display(),
        key.display()
    );
    Ok(())
}

/// The server's TLS settings, if `--cert`/`--key` were given.
pub fn tls_server(t: &TlsArgs) -> Result<Option<TlsServer>, Error> {
    let (Some(cert), Some(key)) = (&t.cert, &t.key) else {
        return Ok(None);
    };
    let client_ca =
        t.ca.as_ref()
            .map(|p| read(p, "CA certificate"))
            .transpose()?;
    let server = TlsServer::with_options(
        &read(cert, "certificate")?,
        &read(key, "key")?,
        client_ca.as_deref(),
        &tls_options(),
    )
    .map_err(|e| io_err(format!("TLS server settings: {e}")))?;
    Ok(Some(server))
}

/// The client's TLS settings, if `--ca` was given.
pub fn tls_client(t: &TlsArgs) -> Result<Option<TlsClient>, Error> {
    let Some(ca) = &t.ca else { return Ok(None) };
    let ca = read(ca, "CA certificate")?;
    let auth = match (&t.cert, &t.key) {
        (Some(c), Some(k)) => Some((read(c, "certificate")?, read(k, "key")?)),
        _ => None,
    };
    let client = TlsClient::with_options(
        &ca,
        auth.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice())),
        &tls_options(),
    )
    .map_err(|e| io_err(format!("TLS client settings: {e}")))?;
    Ok(Some(client))
}
