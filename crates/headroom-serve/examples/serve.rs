//! Start the epoll reactor and wait: a target for wrk, curl or headroom itself.
//!
//! ```text
//! cargo run --release -p headroom-serve --example serve -- [ADDR] [WORKERS] [SECONDS]
//! ```
//!
//! ADDR defaults to 127.0.0.1:8080 (port 0 picks one), WORKERS to the number of cores. With
//! SECONDS it stops after that long and prints its counters; without, it runs until killed.

use std::net::SocketAddr;
use std::time::Duration;

use headroom_serve::{start, ServerConfig};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") || args.len() > 3 {
        eprintln!("usage: serve [ADDR] [WORKERS] [SECONDS]");
        std::process::exit(2);
    }
    let mut config = ServerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
        ..ServerConfig::default()
    };
    if let Some(a) = args.first() {
        config.listen = a
            .parse()
            .unwrap_or_else(|e| die(&format!("ADDR {a:?}: {e}")));
    }
    if let Some(w) = args.get(1) {
        config.workers = w
            .parse()
            .unwrap_or_else(|e| die(&format!("WORKERS {w:?}: {e}")));
    }
    let seconds: Option<f64> = args.get(2).map(|s| {
        s.parse()
            .unwrap_or_else(|e| die(&format!("SECONDS {s:?}: {e}")))
    });

    let workers = config.workers;
    let server = start(config).unwrap_or_else(|e| die(&format!("cannot start: {e}")));
    println!(
        "listening on http://{} ({workers} workers)",
        server.local_addr()
    );
    match seconds {
        Some(s) => {
            std::thread::sleep(Duration::from_secs_f64(s));
            println!("{:?}", server.stats());
            server.stop();
        }
        None => server.wait(),
    }
}

fn die(msg: &str) -> ! {
    eprintln!("serve: {msg}");
    std::process::exit(2);
}
