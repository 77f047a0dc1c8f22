//! The opt-in key log for sessions that TLS's `SSLKEYLOGFILE` does not
//! cover: the PSK nonce exchange writes each session's traffic keys in the
//! same NSS key-log format (`LABEL <id hex> <secret hex>`, one line each),
//! so `smt dump` can decrypt captures of them (`docs/observability.md`).
//!
//! ```text
//! SMT_PSK_CLIENT_TRAFFIC_KEY <PskHello client nonce> <c2s key || c2s iv>
//! SMT_PSK_SERVER_TRAFFIC_KEY <PskHello client nonce> <s2c key || s2c iv>
//! ```
//!
//! The id is the client's 32-byte nonce, which travels in the clear in the
//! PskHello, so a reader can match lines to captured sessions; the value is
//! the AEAD key (16 or 32 bytes) followed by the 12-byte IV. Off unless an
//! application passes one to [`PskClient::with_key_log`](crate::psk::PskClient::with_key_log)
//! or [`ServerAcceptor::with_key_log`](crate::ServerAcceptor::with_key_log).
//! Anyone who reads the file can decrypt every session it covers: for
//! debugging only.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use smt_crypto::TrafficKey;

/// Label of the client-to-server key and IV of a PSK nonce exchange.
pub const PSK_CLIENT_TRAFFIC_KEY: &str = "SMT_PSK_CLIENT_TRAFFIC_KEY";
/// Label of the server-to-client key and IV of a PSK nonce exchange.
pub const PSK_SERVER_TRAFFIC_KEY: &str = "SMT_PSK_SERVER_TRAFFIC_KEY";

/// Appends SMT key-log lines to one file; shared (`Arc`) by every
/// handshake that should log.
pub struct SessionKeyLog {
    path: PathBuf,
    file: Mutex<File>,
}

impl SessionKeyLog {
    /// Appends to `path` (created if missing).
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
        })
    }

    /// Appends to the file named by `SSLKEYLOGFILE`, if it is set and not
    /// empty (the variable TLS key logs use, so one file holds both).
    pub fn from_env() -> io::Result<Option<Self>> {
        match std::env::var_os("SSLKEYLOGFILE") {
            Some(path) if !path.is_empty() => Self::open(PathBuf::from(path)).map(Some),
            _ => Ok(None),
        }
    }

    /// Logs a PSK exchange's two traffic keys under its client nonce.
    pub(crate) fn psk_keys(&self, client_nonce: &[u8], c2s: &TrafficKey, s2c: &TrafficKey) {
        self.write_line(PSK_CLIENT_TRAFFIC_KEY, client_nonce, c2s);
        self.write_line(PSK_SERVER_TRAFFIC_KEY, client_nonce, s2c);
    }

    /// Logs the traffic keys of a session installed without a handshake
    /// (`smt::Endpoint::install_session` with keys from
    /// [`crate::psk::session`]) under the PSK labels and `id`: any bytes (no
    /// handshake names the session in a capture, so `smt dump` finds its
    /// keys by trial decryption).
    pub fn installed_keys(&self, id: &[u8], c2s: &TrafficKey, s2c: &TrafficKey) {
        self.psk_keys(id, c2s, s2c);
    }

    /// Best effort: a failing debug log must not fail the handshake.
    fn write_line(&self, label: &str, id: &[u8], key: &TrafficKey) {
        let line = format!(
            "{label} {} {}{}\n",
            hex::encode(id),
            hex::encode(key.key()),
            hex::encode(key.iv())
        );
        let _ = lock(&self.file).write_all(line.as_bytes());
    }
}

impl fmt::Debug for SessionKeyLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionKeyLog")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// A poisoned lock only means another thread panicked mid-write; the file
/// handle is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use smt_crypto::AeadAlgorithm;

    use super::*;

    #[test]
    fn writes_one_line_per_direction_key_then_iv() {
        let dir = std::env::temp_dir().join(format!("smt-keylog-{}", std::process::id()));
        let log = SessionKeyLog::open(&dir).unwrap();
        let c2s = TrafficKey::new(AeadAlgorithm::Aes128Gcm, &[0xab; 16], [0x01; 12]).unwrap();
        let s2c = TrafficKey::new(AeadAlgorithm::Aes128Gcm, &[0xcd; 16], [0x02; 12]).unwrap();
        log.psk_keys(&[0x11; 32], &c2s, &s2c);
        let text = std::fs::read_to_string(&dir).unwrap();
        let _ = std::fs::remove_file(&dir);
        let lines: Vec<&str> = text.lines().collect();
        let id = "11".repeat(32);
        assert_eq!(
            lines,
            [
                format!(
                    "{PSK_CLIENT_TRAFFIC_KEY} {id} {}{}",
                    "ab".repeat(16),
                    "01".repeat(12)
                ),
                format!(
                    "{PSK_SERVER_TRAFFIC_KEY} {id} {}{}",
                    "cd".repeat(16),
                    "02".repeat(12)
                ),
            ]
        );
    }
}
