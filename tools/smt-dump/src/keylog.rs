//! The endpoints' key log: NSS key-log lines (`LABEL <id hex> <secret
//! hex>`), the format of `SSLKEYLOGFILE`, with SMT's own labels for the
//! sessions TLS does not cover (`docs/observability.md`, "The key log"):
//!
//! | label | id | value | session |
//! |---|---|---|---|
//! | `CLIENT_TRAFFIC_SECRET_0`, `SERVER_TRAFFIC_SECRET_0` | ClientHello random | TLS 1.3 application traffic secret | TLS (kind 0), epoch 0; later epochs by "traffic upd" |
//! | `SMT_PSK_CLIENT_TRAFFIC_KEY`, `SMT_PSK_SERVER_TRAFFIC_KEY` | PskHello client nonce | AEAD key then 12-byte IV | PSK nonce exchange (kind 2); never rekeys |
//! | `SMT_0RTT_CLIENT_TRAFFIC_SECRET`, `SMT_0RTT_SERVER_TRAFFIC_SECRET` | ClientHello0 client random | smt_c2s / smt_s2c (SHA-256, AES-128-GCM) | 0-RTT SMT-key (kind 1), epoch 0 |
//! | `SMT_FS_CLIENT_TRAFFIC_SECRET`, `SMT_FS_SERVER_TRAFFIC_SECRET` | ClientHello0 client random | fs_c2s / fs_s2c | 0-RTT forward-secret key, epoch 1 |
//!
//! Other TLS labels (handshake secrets, exporters) and comments are
//! ignored; a malformed line is reported with its number, never fatal.

use std::collections::BTreeMap;
use std::fmt;

/// What a session's keys are made from.
#[derive(Clone, PartialEq, Eq)]
pub enum KeyMaterial {
    /// TLS 1.3 application traffic secrets (32 bytes: SHA-256 and
    /// AES-128-GCM; 48: SHA-384 and AES-256-GCM).
    Tls {
        /// `CLIENT_TRAFFIC_SECRET_0`.
        client: Vec<u8>,
        /// `SERVER_TRAFFIC_SECRET_0`.
        server: Vec<u8>,
    },
    /// The PSK exchange's keys and IVs (`key || iv` per direction).
    Psk {
        /// The client's sending key and IV.
        client: Vec<u8>,
        /// The server's sending key and IV.
        server: Vec<u8>,
    },
    /// The 0-RTT exchange's SMT-key secrets, and the forward-secret ones
    /// if the session switched to them.
    ZeroRtt {
        /// `SMT_0RTT_CLIENT_TRAFFIC_SECRET`.
        client: Vec<u8>,
        /// `SMT_0RTT_SERVER_TRAFFIC_SECRET`.
        server: Vec<u8>,
        /// `SMT_FS_CLIENT_TRAFFIC_SECRET` and `SMT_FS_SERVER_TRAFFIC_SECRET`, if
        /// the session switched to them.
        fs: Option<(Vec<u8>, Vec<u8>)>,
    },
}

impl KeyMaterial {
    /// The handshake kind that produces this material.
    pub fn kind(&self) -> u8 {
        match self {
            Self::Tls { .. } => 0,
            Self::ZeroRtt { .. } => 1,
            Self::Psk { .. } => 2,
        }
    }
}

impl fmt::Debug for KeyMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::Tls { .. } => "Tls",
            Self::Psk { .. } => "Psk",
            Self::ZeroRtt { .. } => "ZeroRtt",
        };
        write!(f, "KeyMaterial::{name}")
    }
}

/// Every session of a key log, by its id (the client random or nonce).
#[derive(Clone, Debug, Default)]
pub struct KeyLog {
    /// Each session's key material, by its id (hex-decoded bytes).
    pub sessions: BTreeMap<Vec<u8>, KeyMaterial>,
    /// Lines that could not be read: (line number, why).
    pub bad_lines: Vec<(usize, String)>,
}

/// Secrets seen for one id, before they are known to be complete.
#[derive(Default)]
struct Partial {
    tls: [Option<Vec<u8>>; 2],
    psk: [Option<Vec<u8>>; 2],
    zero_rtt: [Option<Vec<u8>>; 2],
    fs: [Option<Vec<u8>>; 2],
}

impl KeyLog {
    /// Reads a key log. Never fails: what cannot be used is listed in
    /// [`KeyLog::bad_lines`].
    pub fn parse(text: &str) -> Self {
        let mut partial: BTreeMap<Vec<u8>, Partial> = BTreeMap::new();
        let mut log = Self::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Err(why) = read_line(line, &mut partial) {
                log.bad_lines.push((n + 1, why));
            }
        }
        for (id, p) in partial {
            if let Some(material) = complete(p) {
                log.sessions.insert(id, material);
            }
        }
        log
    }

    /// The material logged under `id`.
    pub fn get(&self, id: &[u8]) -> Option<&KeyMaterial> {
        self.sessions.get(id)
    }
}

fn read_line(line: &str, partial: &mut BTreeMap<Vec<u8>, Partial>) -> Result<(), String> {
    let mut fields = line.split_whitespace();
    let (Some(label), Some(id), Some(value), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err("expected three fields: LABEL <id hex> <secret hex>".into());
    };
    fn slot<'p>(p: &'p mut Partial, label: &str) -> Option<&'p mut Option<Vec<u8>>> {
        Some(match label {
            "CLIENT_TRAFFIC_SECRET_0" => &mut p.tls[0],
            "SERVER_TRAFFIC_SECRET_0" => &mut p.tls[1],
            "SMT_PSK_CLIENT_TRAFFIC_KEY" => &mut p.psk[0],
            "SMT_PSK_SERVER_TRAFFIC_KEY" => &mut p.psk[1],
            "SMT_0RTT_CLIENT_TRAFFIC_SECRET" => &mut p.zero_rtt[0],
            "SMT_0RTT_SERVER_TRAFFIC_SECRET" => &mut p.zero_rtt[1],
            "SMT_FS_CLIENT_TRAFFIC_SECRET" => &mut p.fs[0],
            "SMT_FS_SERVER_TRAFFIC_SECRET" => &mut p.fs[1],
            _ => return None,
        })
    }
    let id = hex::decode(id).map_err(|_| "the id is not hex")?;
    let value = hex::decode(value).map_err(|_| "the secret is not hex")?;
    check_len(label, &value)?;
    if let Some(slot) = slot(partial.entry(id).or_default(), label) {
        *slot = Some(value);
    }
    Ok(())
}

fn check_len(label: &str, value: &[u8]) -> Result<(), String> {
    let ok = match label {
        l if l.starts_with("SMT_PSK_") => matches!(value.len(), 28 | 44),
        l if l.starts_with("SMT_") => value.len() == 32,
        "CLIENT_TRAFFIC_SECRET_0" | "SERVER_TRAFFIC_SECRET_0" => matches!(value.len(), 32 | 48),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{label} with a {}-byte value", value.len()))
    }
}

fn complete(p: Partial) -> Option<KeyMaterial> {
    let [c, s] = p.tls;
    if let (Some(client), Some(server)) = (c, s) {
        if client.len() == server.len() {
            return Some(KeyMaterial::Tls { client, server });
        }
    }
    let [c, s] = p.psk;
    if let (Some(client), Some(server)) = (c, s) {
        if client.len() == server.len() {
            return Some(KeyMaterial::Psk { client, server });
        }
    }
    let [c, s] = p.zero_rtt;
    let [fc, fs] = p.fs;
    let (client, server) = (c?, s?);
    let fs = fc.zip(fs);
    Some(KeyMaterial::ZeroRtt { client, server, fs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tls_and_smt_labels_and_lists_bad_lines() {
        let id = "ab".repeat(32);
        let text = format!(
            "# comment\n\
             CLIENT_HANDSHAKE_TRAFFIC_SECRET {id} {s}\n\
             CLIENT_TRAFFIC_SECRET_0 {id} {s}\n\
             SERVER_TRAFFIC_SECRET_0 {id} {t}\n\
             SMT_PSK_CLIENT_TRAFFIC_KEY 01 {k}\n\
             SMT_PSK_SERVER_TRAFFIC_KEY 01 {k}\n\
             SMT_PSK_SERVER_TRAFFIC_KEY 02 00\n\
             garbage\n\
             CLIENT_TRAFFIC_SECRET_0 zz 00\n",
            s = "11".repeat(32),
            t = "22".repeat(32),
            k = "33".repeat(28),
        );
        let log = KeyLog::parse(&text);
        assert_eq!(log.sessions.len(), 2);
        assert_eq!(log.get(&[0xab; 32]).map(KeyMaterial::kind), Some(0));
        assert_eq!(log.get(&[1]).map(KeyMaterial::kind), Some(2));
        let bad: Vec<usize> = log.bad_lines.iter().map(|(n, _)| *n).collect();
        assert_eq!(bad, [7, 8, 9]);
    }
}
