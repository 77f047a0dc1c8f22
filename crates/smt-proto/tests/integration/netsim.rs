//! The seeded loss × size sweep, compared against a committed snapshot so
//! any behaviour change shows up in review. To accept a deliberate change:
//! `SMT_UPDATE_SNAPSHOTS=1 cargo test -p smt-proto --test integration netsim::`.

use std::path::PathBuf;

#[test]
fn netsim_sweep_matches_snapshot() {
    let rows = smt_relay::netsim::sweep();
    for r in &rows {
        assert_eq!(
            r.delivered, r.expected,
            "cell loss={} size={} lost RPCs",
            r.loss, r.size
        );
    }
    let table = smt_relay::netsim::table(&rows);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/netsim.txt");
    if std::env::var_os("SMT_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &table).expect("write snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        table, expected,
        "netsim table changed; if intended, rerun with SMT_UPDATE_SNAPSHOTS=1"
    );
}
