//! `smt ca init`, `smt cert issue`, `smt ticket`, and loading TLS settings
//! from the files a server or client was given.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use smt_tls::certs::{Ca, IssuedCert};
use smt_tls::{KeyLogPolicy, TlsClient, TlsOptions, TlsServer};

use crate::cli::{CaCommand, CertCommand, TicketCommand};
use crate::error::CliError;
use crate::files::{self, Access, Output};

/// TLS options of the CLI: the key log goes to `key_log` (the key file of
/// `--capture`), else to the standard SSLKEYLOGFILE if set (for decrypting
/// captures while debugging; never set it in production).
pub fn tls_options(key_log: Option<&Path>) -> TlsOptions {
    TlsOptions::default().key_log(match key_log {
        Some(path) => KeyLogPolicy::File(path.to_path_buf()),
        None => KeyLogPolicy::FromEnv,
    })
}

pub fn ca(cmd: CaCommand) -> Result<(), CliError> {
    let CaCommand::Init { dir, name, force } = cmd;
    if name.trim().is_empty() {
        return Err(CliError::Usage(
            "--name must not be empty: it is the CA's name in every certificate it issues".into(),
        ));
    }
    let ca = Ca::generate(&name).map_err(|e| CliError::Environment(e.to_string()))?;
    files::create_private_dir(&dir)?;
    let (cert, key) = (dir.join("ca.pem"), dir.join("ca-key.pem"));
    files::write_all(
        &[
            output(&cert, ca.cert_pem().to_string(), Access::Public),
            output(&key, ca.to_pem(), Access::Secret),
        ],
        force.force,
    )?;
    say!(
        "CA \"{name}\": {} (certificate), {} (certificate + key; keep secret)",
        cert.display(),
        key.display()
    );
    Ok(())
}

pub fn cert(cmd: CertCommand) -> Result<(), CliError> {
    let CertCommand::Issue {
        ca,
        names,
        client,
        out,
        force,
    } = cmd;
    let ca = load_ca(&ca)?;
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let cert = ca
        .issue(&names, client)
        .map_err(|e| CliError::Usage(format!("--name: {e}")))?;
    let (chain, key) = (with_suffix(&out, ".pem"), with_suffix(&out, "-key.pem"));
    files::write_all(
        &[
            output(&chain, cert.chain_pem(), Access::Public),
            output(&key, cert.key_pem(), Access::Secret),
        ],
        force.force,
    )?;
    say!(
        "{} certificate for {names:?}: {} and {}",
        if client { "client" } else { "server" },
        chain.display(),
        key.display()
    );
    Ok(())
}

/// The CA in `dir`, as `smt ca init` left it.
fn load_ca(dir: &Path) -> Result<Ca, CliError> {
    if dir.is_file() {
        return Err(CliError::Usage(format!(
            "--ca {} is a file; give the directory made by `smt ca init`",
            dir.display()
        )));
    }
    let pem = files::read_text(&dir.join("ca-key.pem"), "--ca", "CA key")?;
    Ca::from_pem(&pem).map_err(|e| {
        CliError::File(format!(
            "{}: {e} (make a CA with `smt ca init --dir {}`)",
            dir.join("ca-key.pem").display(),
            dir.display()
        ))
    })
}

fn output(path: &Path, text: String, access: Access) -> Output {
    Output {
        path: path.to_path_buf(),
        text,
        access,
    }
}

/// `prefix` with `suffix` appended to its last component (not
/// `with_extension`, which would turn `server.v2` into `server.pem`).
fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut path = prefix.as_os_str().to_owned();
    path.push(suffix);
    PathBuf::from(path)
}

pub fn ticket(cmd: TicketCommand) -> Result<(), CliError> {
    match cmd {
        TicketCommand::Issue {
            cert,
            key,
            name,
            lifetime,
            out,
            force,
        } => issue_ticket(&cert, &key, &name, lifetime, &out, force.force),
        TicketCommand::Show { ticket, ca, name } => show_ticket(&ticket, ca.as_deref(), name),
    }
}

fn issue_ticket(
    cert: &Path,
    key: &Path,
    name: &str,
    lifetime: u64,
    out: &Path,
    force: bool,
) -> Result<(), CliError> {
    let chain_pem = files::read_text(cert, "--cert", "certificate")?;
    let key_pem = files::read_text(key, "--key", "key")?;
    let issued = IssuedCert::from_pem(&format!("{chain_pem}{key_pem}")).map_err(|e| {
        CliError::File(format!(
            "--cert {} / --key {}: {e}",
            cert.display(),
            key.display()
        ))
    })?;
    let static_key = smt_handshake::StaticKey::generate();
    let ticket = smt_handshake::Ticket::issue(
        &static_key,
        &issued.chain_der(),
        issued.key_der(),
        name,
        SystemTime::now(),
        Duration::from_secs(lifetime),
    )
    .map_err(|e| CliError::Usage(format!("cannot issue the ticket: {e}")))?;
    let key_path = with_suffix(out, "-static.key");
    files::write_all(
        &[
            output(out, ticket.to_base64(), Access::Public),
            output(
                &key_path,
                hex::encode(static_key.to_bytes()),
                Access::Secret,
            ),
        ],
        force,
    )?;
    say!(
        "ticket for {name}, valid {lifetime} s: {} (publish it, e.g. as DNS TXT at \
         _smt-ticket.{name}.); static key: {} (keep secret)",
        out.display(),
        key_path.display()
    );
    Ok(())
}

fn show_ticket(path: &Path, ca: Option<&Path>, name: Option<String>) -> Result<(), CliError> {
    let text = files::read_text(path, "--ticket", "ticket")?;
    let t = smt_handshake::Ticket::from_base64(&text)
        .map_err(|e| CliError::File(format!("{} is not a ticket: {e}", path.display())))?;
    say!("server name: {}", t.server_name());
    say!(
        "valid: {} .. {} (unix seconds)",
        t.not_before(),
        t.not_after()
    );
    say!("static key: {}", hex::encode(t.static_public_key()));
    say!(
        "certificates: {}, {} bytes encoded",
        t.certificate_chain().count(),
        t.as_bytes().len()
    );
    let Some(ca) = ca else { return Ok(()) };
    let ca_der = first_certificate(ca)?;
    let expected = name.unwrap_or_else(|| t.server_name().to_string());
    t.verify(&ca_der, &expected, SystemTime::now())
        .map_err(|e| CliError::Peer(format!("verification failed: {e}")))?;
    say!("verification: OK (CA, name {expected}, signature, validity)");
    Ok(())
}

/// The first certificate in the PEM file `path` (given as `--ca`).
pub fn first_certificate(path: &Path) -> Result<Vec<u8>, CliError> {
    let pem = files::read(path, "--ca", "CA certificate")?;
    let not_pem = |why: String| CliError::File(format!("--ca {}: {why}", path.display()));
    smt_tls::certificates_der(&pem)
        .map_err(|e| not_pem(e.to_string()))?
        .into_iter()
        .next()
        .ok_or_else(|| not_pem("no certificate in it".into()))
}

/// A TLS server presenting `cert` with `key`; with `client_ca`, clients
/// must present a certificate it issued (mutual TLS).
pub fn tls_server(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
    key_log: Option<&Path>,
) -> Result<TlsServer, CliError> {
    let client_ca_pem = client_ca
        .map(|p| files::read(p, "--ca", "client CA certificate"))
        .transpose()?;
    TlsServer::with_options(
        &files::read(cert, "--cert", "certificate")?,
        &files::read(key, "--key", "key")?,
        client_ca_pem.as_deref(),
        &tls_options(key_log),
    )
    .map_err(|e| unusable(&[("--cert", cert), ("--key", key)], client_ca, e))
}

/// A TLS client trusting `ca`; with `auth`, presenting that certificate
/// and key to a server that asks for one (mutual TLS).
pub fn tls_client(
    ca: &Path,
    auth: Option<(&PathBuf, &PathBuf)>,
    key_log: Option<&Path>,
) -> Result<TlsClient, CliError> {
    let (ca_path, auth_paths) = (ca, auth);
    let ca = files::read(ca, "--ca", "CA certificate")?;
    let auth = match auth {
        Some((cert, key)) => Some((
            files::read(cert, "--cert", "certificate")?,
            files::read(key, "--key", "key")?,
        )),
        None => None,
    };
    TlsClient::with_options(
        &ca,
        auth.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice())),
        &tls_options(key_log),
    )
    .map_err(|e| {
        let files = match auth_paths {
            Some((cert, key)) => vec![("--cert", cert.as_path()), ("--key", key.as_path())],
            None => vec![],
        };
        unusable(&files, Some(ca_path), e)
    })
}

/// The library's complaint about TLS files, naming the files it was given.
fn unusable(files: &[(&str, &Path)], ca: Option<&Path>, e: smt_tls::TlsConfigError) -> CliError {
    let named: Vec<String> = files
        .iter()
        .copied()
        .chain(ca.map(|ca| ("--ca", ca)))
        .map(|(option, path)| format!("{option} {}", path.display()))
        .collect();
    CliError::File(format!("unusable TLS files ({}): {e}", named.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_names_append_to_the_prefix() {
        assert_eq!(
            with_suffix(Path::new("dir/server.v2"), ".pem"),
            Path::new("dir/server.v2.pem")
        );
        assert_eq!(
            with_suffix(Path::new("server"), "-key.pem"),
            Path::new("server-key.pem")
        );
    }
}
