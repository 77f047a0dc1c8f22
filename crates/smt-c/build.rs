//! libsmt's SONAME, for release builds (what `install.sh` installs).
//!
//! The name carries the ABI version: `libsmt.so.MAJOR`, or
//! `libsmt.so.0.MINOR` before 1.0, since a 0.x minor release may break the
//! C API as it may the Rust one. A program linked against one ABI then
//! refuses to start with a library of another, instead of misbehaving.
//!
//! Not for the other profiles: a linked program looks for the SONAME at
//! run time, and cargo's target directory holds only `libsmt.so`, so the
//! tests (which link the library where cargo built it) and uninstalled
//! debug builds keep working without a versioned symlink.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("PROFILE").as_deref() != Ok("release") {
        return;
    }
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_default();
    let minor = std::env::var("CARGO_PKG_VERSION_MINOR").unwrap_or_default();
    let abi = if major == "0" {
        format!("0.{minor}")
    } else {
        major
    };
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsmt.so.{abi}");
}
