//! Reading the files named on the command line, and writing key files.
//!
//! Reads are bounded: certificates, keys and tickets are a few KiB, so a
//! larger input (or an endless one such as `/dev/zero`) is refused rather
//! than read into memory. Writes refuse to replace an existing file unless
//! `--force` is given, and secrets are created readable by their owner
//! only (0600), so a CA or private key is never left world-readable.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::CliError;

/// The largest file `smt` reads: 1 MiB.
const MAX_INPUT: u64 = 1 << 20;

/// Who may read a file that `smt` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Certificates and tickets: meant to be handed out (0644).
    Public,
    /// Private keys (0600, also when an existing file is overwritten).
    Secret,
}

/// One file to write.
#[derive(Debug)]
pub struct Output {
    pub path: PathBuf,
    pub text: String,
    pub access: Access,
}

/// Reads `path`, given as `option` for a `what` (e.g. "--cert", "certificate").
pub fn read(path: &Path, option: &str, what: &str) -> Result<Vec<u8>, CliError> {
    let named = || format!("{what} {} ({option})", path.display());
    let unreadable = |e: io::Error| {
        let why = match e.kind() {
            io::ErrorKind::NotFound => "no such file".to_string(),
            io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            io::ErrorKind::IsADirectory => "it is a directory; give the file".to_string(),
            _ => e.to_string(),
        };
        CliError::File(format!("cannot read the {}: {why}", named()))
    };
    let file = File::open(path).map_err(unreadable)?;
    if file.metadata().map_err(unreadable)?.is_dir() {
        return Err(CliError::File(format!(
            "the {} is a directory; give the file",
            named()
        )));
    }
    let mut bytes = Vec::new();
    file.take(MAX_INPUT + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_INPUT {
        return Err(CliError::File(format!(
            "the {} is larger than {} MiB, which no certificate, key or ticket is",
            named(),
            MAX_INPUT >> 20
        )));
    }
    Ok(bytes)
}

/// [`read`], as text (PEM, base64).
pub fn read_text(path: &Path, option: &str, what: &str) -> Result<String, CliError> {
    String::from_utf8(read(path, option, what)?).map_err(|_| {
        CliError::File(format!(
            "the {what} {} ({option}) is not text (PEM or base64 expected)",
            path.display()
        ))
    })
}

/// Writes every output, or none: without `force`, all are checked first
/// and an existing one stops the command before anything is written.
pub fn write_all(outputs: &[Output], force: bool) -> Result<(), CliError> {
    if !force {
        if let Some(existing) = outputs.iter().find(|o| o.path.symlink_metadata().is_ok()) {
            return Err(CliError::File(format!(
                "{} exists already; pass --force to overwrite it",
                existing.path.display()
            )));
        }
    }
    outputs.iter().try_for_each(|o| write(o, force))
}

fn write(output: &Output, force: bool) -> Result<(), CliError> {
    let path = &output.path;
    let cannot = |e: io::Error| {
        let why = match e.kind() {
            io::ErrorKind::AlreadyExists => {
                "it exists already; pass --force to overwrite it".into()
            }
            io::ErrorKind::IsADirectory => "it is a directory".into(),
            io::ErrorKind::NotFound => "its directory does not exist".into(),
            io::ErrorKind::PermissionDenied => "permission denied".into(),
            _ => e.to_string(),
        };
        CliError::File(format!("cannot write {}: {why}", path.display()))
    };
    let mut file = open_for_writing(path, output.access, force).map_err(cannot)?;
    restrict(&file, output.access).map_err(cannot)?;
    file.write_all(output.text.as_bytes()).map_err(cannot)
}

/// Creates `path` (or, with `force`, truncates it) with the access's mode
/// for a new file.
fn open_for_writing(path: &Path, access: Access, force: bool) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true);
    if force {
        options.create(true).truncate(true);
    } else {
        // Also closes the gap between the check in `write_all` and here.
        options.create_new(true);
    }
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode(access));
    options.open(path)
}

/// A mode given at creation does not change an existing file's: a secret
/// written over an old, more open file is narrowed here, before its bytes
/// go in.
fn restrict(file: &File, access: Access) -> io::Result<()> {
    #[cfg(unix)]
    if access == Access::Secret {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(mode(access)))?;
    }
    #[cfg(not(unix))]
    let _ = (file, access);
    Ok(())
}

#[cfg(unix)]
fn mode(access: Access) -> u32 {
    match access {
        Access::Public => 0o644,
        Access::Secret => 0o600,
    }
}

/// Creates `dir` (and its parents) if missing; a new directory is private
/// (0700), since it is about to hold a key.
pub fn create_private_dir(dir: &Path) -> Result<(), CliError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|e| CliError::File(format!("cannot create directory {}: {e}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("smt-files-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn output(path: &Path, text: &str, access: Access) -> Output {
        Output {
            path: path.to_path_buf(),
            text: text.into(),
            access,
        }
    }

    #[test]
    fn endless_and_missing_inputs_are_refused_with_the_reason() {
        let zero = read(Path::new("/dev/zero"), "--cert", "certificate").unwrap_err();
        assert!(zero.to_string().contains("larger than 1 MiB"), "{zero}");
        let missing = read(Path::new("/nonexistent/x.pem"), "--key", "key").unwrap_err();
        assert_eq!(
            missing.to_string(),
            "cannot read the key /nonexistent/x.pem (--key): no such file"
        );
        let dir = read(Path::new("/"), "--key", "key").unwrap_err();
        assert!(dir.to_string().contains("is a directory"), "{dir}");
    }

    #[cfg(unix)]
    #[test]
    fn secrets_are_private_and_nothing_is_overwritten_without_force() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("write");
        let (public, secret) = (dir.join("a.pem"), dir.join("a-key.pem"));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        std::fs::write(&secret, "old").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
        let outputs = [
            output(&public, "cert", Access::Public),
            output(&secret, "key", Access::Secret),
        ];
        let refused = write_all(&outputs, false).unwrap_err();
        assert!(refused.to_string().contains("pass --force"), "{refused}");
        assert!(
            !public.exists(),
            "nothing is written when one output exists"
        );
        write_all(&outputs, true).unwrap();
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "key");
        assert_eq!(mode(&secret), 0o600, "an overwritten secret is narrowed");
        assert_eq!(mode(&public) & 0o600, 0o600);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
