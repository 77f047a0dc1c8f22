//! Two hosts: network namespaces joined by a veth pair, client and server
//! in different namespaces, over IPv4 and IPv6 (and raw IP). The work is in
//! `scripts/netns-test.sh`, which creates and removes everything itself and
//! reports SKIPPED (this test then passes) when not run as root.

use std::process::Command;

#[test]
fn client_and_server_in_two_network_namespaces() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/netns-test.sh");
    let out = Command::new("bash")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_smt"))
        .output()
        .expect("run netns-test.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "netns test failed");
    assert!(stdout.contains("all cases passed") || stdout.contains("SKIPPED"));
}
