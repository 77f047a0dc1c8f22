//! Which security mode a server or a client runs in: TLS 1.3, mutual TLS
//! or a pre-shared key, chosen from its key options by one decision table
//! each, so contradictory or incomplete options stop it with the reason
//! instead of being ignored. The banner names the mode.

use std::fmt;
use std::path::PathBuf;

use crate::cli::{ClientKeyArgs, ServerKeyArgs};
use crate::error::CliError;

/// The shortest pre-shared key accepted: 32 bytes, as `smt keygen` makes.
const MIN_PSK_LEN: usize = 32;

/// A pre-shared master key from `--psk` (or `SMT_PSK`). `Debug` hides it.
pub struct Psk(Vec<u8>);

impl Psk {
    /// Parses hex of at least [`MIN_PSK_LEN`] bytes. The messages never
    /// repeat the key, only the offending character.
    pub fn parse(text: &str) -> Result<Self, CliError> {
        let text = text.trim();
        let bad =
            |why: String| CliError::Usage(format!("--psk {why} (make a key with `smt keygen`)"));
        if let Some((at, c)) = text.char_indices().find(|(_, c)| !c.is_ascii_hexdigit()) {
            return Err(bad(format!("must be hex, but holds {c:?} at byte {at}")));
        }
        let key = hex::decode(text)
            .map_err(|_| bad(format!("has an odd number of hex digits ({})", text.len())))?;
        if key.len() < MIN_PSK_LEN {
            return Err(bad(format!(
                "is {} bytes; at least {MIN_PSK_LEN} are needed (64 hex digits)",
                key.len()
            )));
        }
        Ok(Self(key))
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Psk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Psk({} bytes)", self.0.len())
    }
}

const PSK_AND_TLS: &str = "--psk (or SMT_PSK) chooses a pre-shared key and --cert/--key/--ca \
                           choose TLS 1.3: give one of the two";

/// How a server authenticates and gets session keys.
#[derive(Debug)]
pub enum ServerKeys {
    Tls {
        cert: PathBuf,
        key: PathBuf,
    },
    /// TLS 1.3, and clients must present a certificate `client_ca` issued.
    MutualTls {
        cert: PathBuf,
        key: PathBuf,
        client_ca: PathBuf,
    },
    Psk(Psk),
}

impl ServerKeys {
    pub fn from_args(a: &ServerKeyArgs) -> Result<Self, CliError> {
        let usage = |m: &str| Err(CliError::Usage(m.to_string()));
        match (&a.psk, &a.cert, &a.key, &a.ca) {
            (Some(psk), None, None, None) => Ok(Self::Psk(Psk::parse(psk)?)),
            (Some(_), ..) => usage(PSK_AND_TLS),
            (None, Some(cert), Some(key), None) => Ok(Self::Tls {
                cert: cert.clone(),
                key: key.clone(),
            }),
            (None, Some(cert), Some(key), Some(ca)) => Ok(Self::MutualTls {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: ca.clone(),
            }),
            (None, Some(_), None, _) => usage("--cert needs --key, the certificate's private key"),
            (None, None, Some(_), _) => usage("--key needs --cert, the certificate it belongs to"),
            (None, None, None, Some(_)) => usage(
                "--ca on a server asks clients for certificates (mutual TLS), but the server \
                 needs its own too: add --cert and --key",
            ),
            (None, None, None, None) => usage(
                "no keys: give --cert and --key for TLS 1.3 (from `smt cert issue`), or --psk \
                 (from `smt keygen`)",
            ),
        }
    }

    /// The mode, for the banner.
    pub fn describe(&self) -> String {
        match self {
            Self::Tls { cert, .. } => format!("TLS 1.3 (certificate {})", cert.display()),
            Self::MutualTls {
                cert, client_ca, ..
            } => format!(
                "mutual TLS 1.3 (certificate {}; clients need one from {})",
                cert.display(),
                client_ca.display()
            ),
            Self::Psk(_) => "pre-shared key".to_string(),
        }
    }
}

/// How a client authenticates the server (and itself) and gets session
/// keys.
#[derive(Debug)]
pub enum ClientKeys {
    Tls {
        ca: PathBuf,
    },
    /// TLS 1.3 with a client certificate, for a server that asks for one.
    MutualTls {
        ca: PathBuf,
        cert: PathBuf,
        key: PathBuf,
    },
    Psk(Psk),
}

impl ClientKeys {
    pub fn from_args(a: &ClientKeyArgs) -> Result<Self, CliError> {
        let usage = |m: &str| Err(CliError::Usage(m.to_string()));
        match (&a.psk, &a.ca, &a.cert, &a.key) {
            (Some(psk), None, None, None) => Ok(Self::Psk(Psk::parse(psk)?)),
            (Some(_), ..) => usage(PSK_AND_TLS),
            (None, Some(ca), None, None) => Ok(Self::Tls { ca: ca.clone() }),
            (None, Some(ca), Some(cert), Some(key)) => Ok(Self::MutualTls {
                ca: ca.clone(),
                cert: cert.clone(),
                key: key.clone(),
            }),
            (None, _, Some(_), None) => usage("--cert needs --key, the certificate's private key"),
            (None, _, None, Some(_)) => usage("--key needs --cert, the certificate it belongs to"),
            (None, None, Some(_), Some(_)) => usage(
                "--cert and --key identify this client, but --ca is needed too, to check the \
                 server's certificate",
            ),
            (None, None, None, None) => usage(
                "no keys: give --ca for TLS 1.3 (the CA that issued the server's certificate), \
                 or --psk (the server's pre-shared key)",
            ),
        }
    }

    /// The mode, for the banner.
    pub fn describe(&self) -> String {
        match self {
            Self::Tls { ca } => format!("TLS 1.3 (server checked against {})", ca.display()),
            Self::MutualTls { ca, cert, .. } => format!(
                "mutual TLS 1.3 (server checked against {}; client certificate {})",
                ca.display(),
                cert.display()
            ),
            Self::Psk(_) => "pre-shared key".to_string(),
        }
    }

    /// The mode's name alone, for JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Tls { .. } => "tls",
            Self::MutualTls { .. } => "mutual-tls",
            Self::Psk(_) => "psk",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    #[test]
    fn psk_parsing_never_panics_and_says_why() {
        assert_eq!(Psk::parse(KEY).unwrap().bytes().len(), 32);
        let cases = [
            ("é", "holds 'é' at byte 0"),
            (&KEY[..63], "odd number"),
            (&KEY[..62], "is 31 bytes"),
            ("zz", "holds 'z' at byte 0"),
        ];
        for (text, want) in cases {
            let err = Psk::parse(text).unwrap_err().to_string();
            assert!(
                err.contains(want) && err.contains("smt keygen"),
                "{text:?}: {err}"
            );
        }
        let non_ascii = format!("{}é", &KEY[..63]);
        assert!(Psk::parse(&non_ascii).is_err());
    }

    #[test]
    fn conflicting_or_incomplete_server_options_are_refused() {
        let p = |s: &str| Some(PathBuf::from(s));
        let args = |cert, key, ca, psk: Option<&str>| ServerKeyArgs {
            cert,
            key,
            ca,
            psk: psk.map(str::to_string),
        };
        let refused = [
            (args(p("c"), p("k"), None, Some(KEY)), "give one of the two"),
            (args(p("c"), None, None, None), "--cert needs --key"),
            (args(None, p("k"), None, None), "--key needs --cert"),
            (args(None, None, p("ca"), None), "add --cert and --key"),
            (args(None, None, None, None), "no keys"),
        ];
        for (a, want) in refused {
            let err = ServerKeys::from_args(&a).unwrap_err().to_string();
            assert!(err.contains(want), "{a:?}: {err}");
        }
        let mutual = ServerKeys::from_args(&args(p("c"), p("k"), p("ca"), None)).unwrap();
        assert!(matches!(mutual, ServerKeys::MutualTls { .. }));
    }

    #[test]
    fn conflicting_or_incomplete_client_options_are_refused() {
        let p = |s: &str| Some(PathBuf::from(s));
        let args = |ca, cert, key, psk: Option<&str>| ClientKeyArgs {
            ca,
            cert,
            key,
            psk: psk.map(str::to_string),
        };
        let refused = [
            (args(p("ca"), None, None, Some(KEY)), "give one of the two"),
            (args(p("ca"), p("c"), None, None), "--cert needs --key"),
            (args(p("ca"), None, p("k"), None), "--key needs --cert"),
            (args(None, p("c"), p("k"), None), "--ca is needed too"),
            (args(None, None, None, None), "no keys"),
        ];
        for (a, want) in refused {
            let err = ClientKeys::from_args(&a).unwrap_err().to_string();
            assert!(err.contains(want), "{a:?}: {err}");
        }
        let tls = ClientKeys::from_args(&args(p("ca"), None, None, None)).unwrap();
        assert_eq!(tls.name(), "tls");
    }
}
