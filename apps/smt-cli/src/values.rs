//! Parsers for option values, used by clap while it reads the command line:
//! each says what is wrong and what is allowed, and clap puts the option's
//! name in front.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// The longest time any `smt` option accepts: 30 days.
const MAX_SECONDS: f64 = 30.0 * 24.0 * 3600.0;

/// A positive, finite number of seconds, at most [`MAX_SECONDS`].
pub fn seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| "not a number of seconds".to_string())?;
    if !(secs > 0.0 && secs <= MAX_SECONDS) {
        return Err(format!(
            "must be more than 0 and at most {MAX_SECONDS} seconds (30 days)"
        ));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())
}

/// A whole number from `LO` to `HI`.
pub fn count<const LO: usize, const HI: usize>(text: &str) -> Result<usize, String> {
    let range = || format!("must be a whole number from {LO} to {HI}");
    match text.trim().parse::<usize>() {
        Ok(n) if (LO..=HI).contains(&n) => Ok(n),
        _ => Err(range()),
    }
}

/// A message size: a whole number of bytes. (The largest one depends on
/// the configuration and is checked against it later.)
pub fn byte_count(text: &str) -> Result<usize, String> {
    text.trim()
        .parse()
        .map_err(|_| "must be a whole number of bytes, 0 or more".to_string())
}

/// `IP:PORT`, or `HOST:PORT` resolved with the system's resolver. Of a
/// host's addresses the first IPv4 one is taken, else the first: servers
/// listen on IPv4 by default, while `localhost` often resolves to `::1`
/// first.
pub fn host_port(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    let hint = "give IP:PORT or HOST:PORT";
    if !text.contains(':') {
        return Err(format!("the port is missing ({hint})"));
    }
    let addrs: Vec<SocketAddr> = text
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve it: {e} ({hint})"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("the name has no addresses ({hint})"))
}

/// `--server`: the address to call, and the host name it was given as
/// (none for an IP address), which TLS checks in the certificate.
#[derive(Clone, Debug)]
pub struct ServerAddr {
    pub addr: SocketAddr,
    pub host: Option<String>,
}

/// `IP:PORT` or `HOST:PORT` (see [`host_port`]), keeping HOST when it is a
/// name.
pub fn server_addr(text: &str) -> Result<ServerAddr, String> {
    let addr = host_port(text)?;
    let host = match text.parse::<SocketAddr>() {
        Ok(_) => None,
        Err(_) => text.rsplit_once(':').map(|(h, _)| h.to_string()),
    };
    Ok(ServerAddr { addr, host })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_must_be_positive_finite_and_bounded() {
        assert_eq!(seconds("0.5"), Ok(Duration::from_millis(500)));
        for bad in ["nan", "NaN", "inf", "-1", "0", "1e300", "abc", ""] {
            assert!(seconds(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn counts_stay_in_their_range() {
        assert_eq!(count::<1, 1024>("16"), Ok(16));
        for bad in ["0", "1025", "100000", "-1", "1.5", "x"] {
            assert!(count::<1, 1024>(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn host_names_resolve_and_addresses_pass_through() {
        assert_eq!(
            host_port("127.0.0.1:7878"),
            Ok("127.0.0.1:7878".parse().unwrap())
        );
        assert_eq!(host_port("[::1]:80"), Ok("[::1]:80".parse().unwrap()));
        let local = host_port("localhost:7878").unwrap();
        assert!(local.ip().is_loopback() && local.port() == 7878, "{local}");
        assert!(host_port("localhost").is_err(), "a port is needed");
    }
}
