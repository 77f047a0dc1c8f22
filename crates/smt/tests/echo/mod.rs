//! The plain echo server several test files start: `threads` threads
//! answering every request with its own bytes.

use smt::Endpoint;

pub fn spawn_echo(server: &Endpoint, threads: usize) {
    for _ in 0..threads {
        let s = server.clone();
        std::thread::spawn(move || {
            while let Ok(mut req) = s.accept() {
                let data = req.take_data();
                let _ = req.respond(&data);
            }
        });
    }
}
