//! `smt-bench`: see the library's docs and `--help`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use smt_bench::cli::Args;
use smt_bench::report::{self, LoadRow, Report};
use smt_bench::systems::System;
use smt_bench::{plot, run, sys};

/// Now in UTC, as `2026-11-24T053250Z` (a directory name: no colons).
fn timestamp() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}

fn selected(args: &Args) -> Result<Vec<System>, String> {
    if args.systems.is_empty() {
        return Ok(System::ALL.to_vec());
    }
    args.systems
        .iter()
        .map(|n| System::by_name(n).ok_or_else(|| format!("unknown system {n:?} (see --list)")))
        .collect()
}

fn main() {
    let args = Args::parse();
    if args.list {
        for s in System::ALL.into_iter().chain(System::OPT_IN) {
            println!("{:<18} {}", s.name(), s.describe());
        }
        return;
    }
    let systems = match selected(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("smt-bench: {e}");
            std::process::exit(2);
        }
    };
    let mode = args.mode();
    let plan = match args.plan() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("smt-bench: {e}");
            std::process::exit(2);
        }
    };
    let started = timestamp();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("target/smt-bench").join(&started));
    let affinities = args.affinities();
    // Read the allowed CPUs before the first run pins this thread.
    let _ = sys::allowed_cpus();
    let mut records = Vec::new();
    let mut notes = Vec::new();
    let mut loads = Vec::new();
    eprintln!(
        "smt-bench {mode:?}: {} systems, output in {}",
        systems.len(),
        out.display()
    );
    for &aff in &affinities {
        for &system in &systems {
            if system == System::SmtBusyPoll && aff == smt_bench::cli::Affinity::Pinned {
                // Two spinning drivers on one CPU take turns by time slice.
                notes.push("smt-aes-busy: not run pinned (two busy-polling drivers on one CPU only take turns)".into());
                continue;
            }
            let load = if args.no_idle_wait {
                let busy = sys::busy_fraction(Duration::from_millis(100));
                sys::LoadSeen {
                    busy,
                    waited_s: 0.0,
                    idle: busy < args.idle_threshold,
                }
            } else {
                sys::wait_for_idle(args.idle_threshold, args.idle_max_wait())
            };
            eprintln!(
                "{} ({}), machine {:.0}% busy before the run",
                system.name(),
                aff.name(),
                load.busy * 100.0
            );
            loads.push(LoadRow {
                system: system.name().into(),
                affinity: aff.name().into(),
                load,
            });
            let r = run::run_system(system, aff, &plan, &args);
            for n in &r.notes {
                eprintln!("  note: {n}");
            }
            records.extend(r.records);
            notes.extend(r.notes);
        }
    }
    let aff_names: Vec<String> = affinities.iter().map(|a| a.name().to_string()).collect();
    let targets: Vec<report::Target> = aff_names
        .iter()
        .flat_map(|a| report::targets(&records, a))
        .collect();
    print!("{}", report::tables(&records, &aff_names));
    print!("{}", report::print_targets(&targets));
    print!("{}", report::print_loads(&loads));
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("smt-bench: cannot create {}: {e}", out.display());
        std::process::exit(1);
    }
    let (plots, failed) = plot::all(&out, &records, &aff_names);
    notes.extend(failed.into_iter().map(|f| format!("plot failed: {f}")));
    let report = Report {
        started,
        mode: format!("{mode:?}").to_lowercase(),
        machine: sys::cpu_model(),
        cpus: sys::online_cpus(),
        systems: systems
            .iter()
            .map(|s| (s.name().into(), s.describe().into()))
            .collect(),
        loads,
        notes: &notes,
        targets,
        records: &records,
    };
    if let Err(e) = report::write_files(&out, &report) {
        eprintln!(
            "smt-bench: could not write results to {}: {e}",
            out.display()
        );
        std::process::exit(1);
    }
    println!(
        "\nresults: {}/results.json, results.csv, {} SVG plots",
        out.display(),
        plots.len()
    );
}
