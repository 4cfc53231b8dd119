//! The shared protocol servers scripts/test starts (ejabberd, PostgreSQL, the WebSocket echo),
//! found through the environment variable scripts/test exports, or started by their script
//! (which installs the Debian package and starts a private server on 127.0.0.1).

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// The repository's root directory.
pub fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// `scripts/NAME start` (idempotent), or the address in `var` when set (scripts/test sets
/// them: `HEADROOM_XMPP_ADDR`, `HEADROOM_PG_URL`, `HEADROOM_WS_URL`).
pub fn service(var: &str, script: &str) -> String {
    if let Ok(v) = std::env::var(var) {
        if !v.is_empty() {
            return v;
        }
    }
    let out = Command::new(repo_root().join("scripts").join(script))
        .arg("start")
        .output()
        .unwrap_or_else(|e| panic!("run scripts/{script} start: {e}"));
    assert!(
        out.status.success(),
        "scripts/{script} start failed (it installs the Debian package and starts a private \
         server on 127.0.0.1; scripts/test runs it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// ejabberd's HOST:PORT, with users 1..=600 and 20001..=21600 registered (the tests that
/// count chats exactly use the second range, which no example and no offline chat touches).
pub fn xmpp() -> &'static str {
    static ADDR: OnceLock<String> = OnceLock::new();
    ADDR.get_or_init(|| {
        let addr = service("HEADROOM_XMPP_ADDR", "ejabberd.sh");
        for (first, last) in [("1", "600"), ("20001", "21600")] {
            let out = Command::new(repo_root().join("scripts/ejabberd.sh"))
                .args(["register", first, last])
                .output()
                .expect("scripts/ejabberd.sh register");
            assert!(
                out.status.success(),
                "scripts/ejabberd.sh register {first} {last} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(addr.starts_with("127.0.0.1:"), "ejabberd at {addr}");
        addr
    })
}

/// PostgreSQL's (host, port, user, password, database) from `HEADROOM_PG_URL`.
pub fn pg() -> (String, String, String, String, String) {
    pg_parts(&service("HEADROOM_PG_URL", "postgres.sh"))
}

/// (host, port, user, password, database) of a `postgres://user:password@host:port/db?...`
/// URL on 127.0.0.1.
pub fn pg_parts(url: &str) -> (String, String, String, String, String) {
    let rest = url.strip_prefix("postgres://").expect("postgres:// URL");
    let (userinfo, hostpart) = rest.split_once('@').unwrap();
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let (addr, db) = hostpart.split_once('/').unwrap();
    let (host, port) = addr.rsplit_once(':').unwrap();
    assert_eq!(host, "127.0.0.1");
    (
        host.into(),
        port.into(),
        user.into(),
        password.into(),
        db.split('?').next().unwrap().into(),
    )
}

/// mosquitto's HOST:PORT on 127.0.0.1, from `HEADROOM_MQTT_URL` (`mqtt://127.0.0.1:25883`,
/// scripts/mosquitto.sh).
pub fn mqtt() -> String {
    let url = service("HEADROOM_MQTT_URL", "mosquitto.sh");
    let addr = url
        .strip_prefix("mqtt://")
        .unwrap_or(&url)
        .trim_end_matches('/');
    assert!(addr.starts_with("127.0.0.1:"), "mosquitto at {url}");
    addr.to_string()
}

/// The broker's own counters, watched for a whole test: a `mosquitto_sub` (Debian's
/// mosquitto-clients) subscribed to `$SYS/broker/uptime`, `$SYS/broker/publish/messages/sent`
/// and `$SYS/broker/messages/received` from start to end, so that its own traffic is known
/// exactly: it sends nothing after its SUBSCRIBE (keep-alive 1,200 s), and every value it
/// receives is one PUBLISH the broker counts as sent. The broker publishes the values that
/// changed once per `sys_interval` (1 s with scripts/mosquitto.sh), uptime first, all computed
/// before any of them is written; a [`MqttSysWatch::snapshot`] takes them at such a tick.
/// (mosquitto 2.0's own `publish/messages/received` leaves out QoS 2 and retained publishes,
/// and its retained `$SYS` values were seen to go missing, hence a watcher and these two.)
pub struct MqttSysWatch {
    child: std::process::Child,
    lines: std::sync::Arc<std::sync::Mutex<Vec<(String, u64)>>>,
}

/// The broker's counters at one tick, and where in the watcher's stream that tick began.
#[derive(Debug, Clone, Copy)]
pub struct MqttSys {
    /// PUBLISH packets the broker sent, and packets of any kind it received.
    pub publish_sent: u64,
    pub received: u64,
    /// The watcher's line that gave `publish_sent`.
    at: usize,
}

impl MqttSys {
    /// What the broker did from `self` to `later`: PUBLISH packets sent to others than the
    /// watcher (the watcher's lines from `self`'s value to `later`'s are its own), packets
    /// received from others (the watcher sends none).
    pub fn until(&self, later: &MqttSys) -> (u64, u64) {
        let watcher = (later.at - self.at) as u64;
        (
            later.publish_sent - self.publish_sent - watcher,
            later.received - self.received,
        )
    }
}

impl MqttSysWatch {
    pub fn start(addr: &str) -> MqttSysWatch {
        use std::io::BufRead;
        let (host, port) = addr.rsplit_once(':').expect("HOST:PORT");
        let mut child = Command::new("mosquitto_sub")
            .args(["-h", host, "-p", port, "-v", "-k", "1200"])
            .args(["-t", "$SYS/broker/uptime"])
            .args(["-t", "$SYS/broker/publish/messages/sent"])
            .args(["-t", "$SYS/broker/messages/received"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("mosquitto_sub (Debian's mosquitto-clients): {e}"));
        let out = child.stdout.take().expect("piped");
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let Some((topic, value)) = line.split_once(' ') else {
                    continue;
                };
                let value = value.split_whitespace().next().and_then(|v| v.parse().ok());
                let topic = topic.trim_start_matches("$SYS/broker/").to_string();
                sink.lock().unwrap().push((topic, value.unwrap_or(0)));
            }
        });
        // The values it gets first are the retained ones, from before it connected: its own
        // CONNECT and SUBSCRIBE are not in them. Snapshots are taken at live ticks only.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        while lines
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| k == "uptime")
            .count()
            < 2
        {
            assert!(
                std::time::Instant::now() < deadline,
                "mosquitto_sub saw no $SYS tick in 15 s (is the broker's sys_interval set?)"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        MqttSysWatch { child, lines }
    }

    /// The counters at the next complete tick (a value not published at it is unchanged since
    /// it was last published, or since the retained value the watcher got at its start); 15 s
    /// at most, or a panic.
    pub fn snapshot(&self) -> MqttSys {
        let seen = self.lines.lock().unwrap().len();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            assert!(
                std::time::Instant::now() < deadline,
                "no $SYS tick with both counters in 15 s: {:?}",
                self.lines.lock().unwrap().get(seen..)
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
            let lines = self.lines.lock().unwrap();
            // The ticks that began after `seen` and are complete (another began after them).
            let starts: Vec<usize> = (seen..lines.len())
                .filter(|&i| lines[i].0 == "uptime")
                .collect();
            if let Some(w) = starts.windows(2).next() {
                // The latest value of each up to the tick's end, and where it was read.
                let get = |t: &str| lines[..w[1]].iter().rposition(|(k, _)| k == t);
                if let (Some(sent), Some(received)) =
                    (get("publish/messages/sent"), get("messages/received"))
                {
                    // The broker counts each message as it writes it: the value of publish/
                    // messages/sent takes in the watcher's messages before its own line.
                    return MqttSys {
                        publish_sent: lines[sent].1,
                        received: lines[received].1,
                        at: sent,
                    };
                }
            }
        }
    }
}

impl Drop for MqttSysWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
