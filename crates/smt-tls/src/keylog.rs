//! Capturing the traffic secrets rustls derives, and the opt-in
//! `SSLKEYLOGFILE` writer.
//!
//! rustls hands every secret it derives to the config's [`rustls::KeyLog`],
//! tagged with the NSS key-log label and the connection's client random.
//! Each [`TlsHandshake`](crate::TlsHandshake) gets its own [`SecretCapture`]
//! (its own copy of the config, so secrets of concurrent handshakes never
//! mix), which keeps the two application traffic secrets SMT needs and
//! passes every line on to a [`KeyLogWriter`] when one is configured.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// NSS label of the client's first application traffic secret.
pub(crate) const CLIENT_TRAFFIC_SECRET_0: &str = "CLIENT_TRAFFIC_SECRET_0";
/// NSS label of the server's first application traffic secret.
pub(crate) const SERVER_TRAFFIC_SECRET_0: &str = "SERVER_TRAFFIC_SECRET_0";

/// Where, if anywhere, to write the NSS key log (every TLS secret, one line
/// each: `LABEL <client_random hex> <secret hex>`) so tools such as
/// Wireshark can decrypt captured handshakes.
///
/// Anyone who reads the file can decrypt every session it covers: for
/// debugging only.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyLogPolicy {
    /// No key log (the default).
    #[default]
    Off,
    /// Append to the file named by the `SSLKEYLOGFILE` environment variable
    /// if it is set and not empty, read once when the client or server is
    /// built; otherwise no key log.
    FromEnv,
    /// Append to this file.
    File(PathBuf),
}

impl KeyLogPolicy {
    /// The writer this policy asks for, if any.
    pub(crate) fn open(&self) -> io::Result<Option<Arc<KeyLogWriter>>> {
        let path = match self {
            Self::Off => return Ok(None),
            Self::FromEnv => match std::env::var_os("SSLKEYLOGFILE") {
                Some(path) if !path.is_empty() => PathBuf::from(path),
                _ => return Ok(None),
            },
            Self::File(path) => path.clone(),
        };
        KeyLogWriter::open(&path).map(|w| Some(Arc::new(w)))
    }
}

/// Appends NSS key-log lines to one file, shared by every handshake of a
/// client or server.
pub(crate) struct KeyLogWriter {
    path: PathBuf,
    file: Mutex<File>,
}

impl KeyLogWriter {
    fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
        })
    }

    /// Writes one line. Best effort: a failing debug log must not fail
    /// the handshake, so write errors are dropped.
    fn write_line(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let line = format!(
            "{label} {} {}\n",
            hex::encode(client_random),
            hex::encode(secret)
        );
        let _ = lock(&self.file).write_all(line.as_bytes());
    }
}

impl fmt::Debug for KeyLogWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyLogWriter")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// One handshake's [`rustls::KeyLog`]: keeps its application traffic
/// secrets and forwards every line to the key-log file, if any, and to the
/// key log of the caller's own rustls config (a `rustls::KeyLogFile`, say;
/// rustls's default `NoKeyLog` takes nothing).
pub(crate) struct SecretCapture {
    captured: Mutex<Captured>,
    file: Option<Arc<KeyLogWriter>>,
    inner: Arc<dyn rustls::KeyLog>,
}

#[derive(Default)]
struct Captured {
    client_random: Option<Vec<u8>>,
    client: Option<Vec<u8>>,
    server: Option<Vec<u8>>,
}

impl SecretCapture {
    pub(crate) fn new(file: Option<Arc<KeyLogWriter>>, inner: Arc<dyn rustls::KeyLog>) -> Self {
        Self {
            captured: Mutex::new(Captured::default()),
            file,
            inner,
        }
    }

    /// The client's and the server's first application traffic secrets,
    /// once rustls has derived both.
    pub(crate) fn application_secrets(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        let captured = lock(&self.captured);
        Some((captured.client.clone()?, captured.server.clone()?))
    }
}

impl rustls::KeyLog for SecretCapture {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        if let Some(file) = &self.file {
            file.write_line(label, client_random, secret);
        }
        if self.inner.will_log(label) {
            self.inner.log(label, client_random, secret);
        }
        let mut captured = lock(&self.captured);
        // One capture serves one connection: a second client random would
        // be a bug, and its secrets must not be mixed with the first's.
        match &captured.client_random {
            Some(seen) if seen != client_random => return,
            Some(_) => {}
            None => captured.client_random = Some(client_random.to_vec()),
        }
        match label {
            CLIENT_TRAFFIC_SECRET_0 => captured.client = Some(secret.to_vec()),
            SERVER_TRAFFIC_SECRET_0 => captured.server = Some(secret.to_vec()),
            _ => {}
        }
    }

    fn will_log(&self, label: &str) -> bool {
        self.file.is_some()
            || self.inner.will_log(label)
            || label == CLIENT_TRAFFIC_SECRET_0
            || label == SERVER_TRAFFIC_SECRET_0
    }
}

impl fmt::Debug for SecretCapture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretCapture")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl Drop for Captured {
    fn drop(&mut self) {
        for secret in [&mut self.client, &mut self.server].into_iter().flatten() {
            secret.fill(0);
            std::hint::black_box(&secret);
        }
    }
}

/// A poisoned lock only means another thread panicked mid-write; the data
/// (secrets or a file handle) is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use rustls::KeyLog;

    use super::*;

    #[test]
    fn keeps_only_the_application_secrets_of_one_client_random() {
        let capture = SecretCapture::new(None, Arc::new(rustls::NoKeyLog));
        assert!(capture.will_log(CLIENT_TRAFFIC_SECRET_0));
        assert!(!capture.will_log("CLIENT_HANDSHAKE_TRAFFIC_SECRET"));
        capture.log("CLIENT_HANDSHAKE_TRAFFIC_SECRET", &[1; 32], &[9; 32]);
        capture.log(CLIENT_TRAFFIC_SECRET_0, &[1; 32], &[2; 32]);
        assert_eq!(capture.application_secrets(), None);
        capture.log(SERVER_TRAFFIC_SECRET_0, &[7; 32], &[8; 32]);
        assert_eq!(capture.application_secrets(), None, "other client random");
        capture.log(SERVER_TRAFFIC_SECRET_0, &[1; 32], &[3; 32]);
        assert_eq!(
            capture.application_secrets(),
            Some((vec![2; 32], vec![3; 32]))
        );
    }

    #[test]
    fn debug_never_shows_secrets() {
        let capture = SecretCapture::new(None, Arc::new(rustls::NoKeyLog));
        rustls::KeyLog::log(&capture, CLIENT_TRAFFIC_SECRET_0, &[1; 32], &[0xab; 32]);
        let shown = format!("{capture:?}");
        assert!(!shown.contains("171") && !shown.contains("ab"), "{shown}");
    }
}
