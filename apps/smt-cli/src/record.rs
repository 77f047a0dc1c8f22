//! `--capture FILE` and `--trace FILE` on `smt demo`, `server` and
//! `client`: the endpoint's own pcapng capture, with its session keys in
//! FILE's name with `.keys`, and its event trace (`smt::observe`,
//! `docs/observability.md`). Files that exist are refused unless
//! `--force`; the key file is created readable by its owner only.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use smt::keys::SessionKeyLog;
use smt::observe::{Capture, Observe, Trace};

use crate::cli::ObserveArgs;
use crate::error::CliError;
use crate::files::{self, Access, Output};

/// The files a run records into, open.
pub struct Recording {
    capture: Option<(Capture, PathBuf)>,
    keys: Option<PathBuf>,
    trace: Option<(Trace, PathBuf)>,
}

impl Recording {
    /// Creates the files `args` names (none: records nothing). Refuses a
    /// file that exists without `--force`, before creating any.
    pub fn open(args: &ObserveArgs) -> Result<Self, CliError> {
        let keys = args.capture.as_deref().map(key_file).transpose()?;
        let mut outputs = Vec::new();
        let mut add = |path: Option<&Path>, access| {
            if let Some(path) = path {
                let (path, text) = (path.to_path_buf(), String::new());
                outputs.push(Output { path, text, access });
            }
        };
        add(args.capture.as_deref(), Access::Public);
        add(keys.as_deref(), Access::Secret);
        add(args.trace.as_deref(), Access::Public);
        files::write_all(&outputs, args.force)?;
        let cannot = |path: &Path, e: std::io::Error| {
            CliError::File(format!("cannot write {}: {e}", path.display()))
        };
        let capture = match &args.capture {
            Some(p) => Some((Capture::create(p).map_err(|e| cannot(p, e))?, p.clone())),
            None => None,
        };
        let trace = match &args.trace {
            Some(p) => Some((Trace::create(p).map_err(|e| cannot(p, e))?, p.clone())),
            None => None,
        };
        Ok(Self {
            capture,
            keys,
            trace,
        })
    }

    /// What an endpoint records: the capture and the trace.
    pub fn observe(&self) -> Observe {
        let mut o = Observe::new();
        if let Some((c, _)) = &self.capture {
            o = o.capture(c.clone());
        }
        if let Some((t, _)) = &self.trace {
            o = o.trace(t.clone());
        }
        o
    }

    /// What records only the trace (the demo's server: the client's
    /// capture holds every datagram between them already).
    pub fn trace_only(&self) -> Observe {
        match &self.trace {
            Some((t, _)) => Observe::new().trace(t.clone()),
            None => Observe::new(),
        }
    }

    /// The key log TLS and the PSK exchange write: the capture's key file,
    /// else `SSLKEYLOGFILE` (None: neither).
    pub fn key_log_path(&self) -> Option<&Path> {
        self.keys.as_deref()
    }

    /// The PSK exchange's key log: the capture's key file, else
    /// `SSLKEYLOGFILE`'s.
    pub fn session_key_log(&self) -> Result<Option<Arc<SessionKeyLog>>, CliError> {
        let log = match &self.keys {
            Some(path) => Some(
                SessionKeyLog::open(path)
                    .map_err(|e| CliError::File(format!("cannot write {}: {e}", path.display())))?,
            ),
            None => SessionKeyLog::from_env()?,
        };
        Ok(log.map(Arc::new))
    }

    /// Completes the files (everything queued is written) and says on
    /// standard error what they hold and how to read them. Call after the
    /// endpoints closed.
    pub fn finish(&self) -> Result<(), CliError> {
        if let Some((c, path)) = &self.capture {
            let s = c
                .finish()
                .map_err(|e| CliError::File(format!("capture {}: {e}", path.display())))?;
            let keys = self.keys.as_deref().unwrap_or(path);
            eprintln!(
                "smt: capture: {} datagrams in {}{}; decrypt with `smt dump {} --keylog {}`",
                s.datagrams,
                path.display(),
                dropped(s.dropped, "datagrams"),
                path.display(),
                keys.display()
            );
        }
        if let Some((t, path)) = &self.trace {
            let s = t
                .finish()
                .map_err(|e| CliError::File(format!("trace {}: {e}", path.display())))?;
            eprintln!(
                "smt: trace: {} events in {}{}; timelines with `smt dump --trace {}`",
                s.events,
                path.display(),
                dropped(s.dropped, "events"),
                path.display()
            );
        }
        Ok(())
    }
}

fn dropped(n: u64, what: &str) -> String {
    match n {
        0 => String::new(),
        n => format!(" ({n} {what} dropped: the writer fell behind)"),
    }
}

/// The capture's key file: its name with the extension `.keys`.
fn key_file(capture: &Path) -> Result<PathBuf, CliError> {
    let keys = capture.with_extension("keys");
    if keys == capture {
        return Err(CliError::Usage(format!(
            "--capture {}: the session keys go to the capture's name with .keys; name the \
             capture otherwise (e.g. .pcapng)",
            capture.display()
        )));
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_file_is_the_captures_name_with_keys() {
        let k = |p: &str| key_file(Path::new(p)).map_err(|e| e.to_string());
        assert_eq!(k("run.pcapng"), Ok(PathBuf::from("run.keys")));
        assert_eq!(k("dir/run"), Ok(PathBuf::from("dir/run.keys")));
        assert!(k("run.keys")
            .unwrap_err()
            .contains("name the capture otherwise"));
    }
}
