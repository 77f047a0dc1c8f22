//! The `smt-kv ycsb` command line.

/// Options of `smt-kv ycsb`.
#[derive(clap::Args, Debug)]
pub struct YcsbArgs {}

pub fn run(_args: YcsbArgs) -> Result<(), Box<dyn std::error::Error>> {
    Ok(())
}
