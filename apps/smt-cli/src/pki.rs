//! `smt ca init`, `smt cert issue`, and loading TLS settings from files.

use std::path::Path;

use smt::Error;
use smt_tls::certs::Ca;
use smt_tls::{TlsClient, TlsServer};

use crate::cli::{CaCommand, CertCommand, TlsArgs};

fn io_err(msg: String) -> Error {
    Error::Io(std::io::Error::other(msg))
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| io_err(format!("cannot read {what} {}: {e}", path.display())))
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|e| io_err(format!("cannot write {}: {e}", path.display())))
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
    let server = TlsServer::new(
        &read(cert, "certificate")?,
        &read(key, "key")?,
        client_ca.as_deref(),
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
    let client = TlsClient::new(
        &ca,
        auth.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice())),
    )
    .map_err(|e| io_err(format!("TLS client settings: {e}")))?;
    Ok(Some(client))
}
