//! Debian's Apache (mpm_event) on a free loopback port, with a private configuration: the
//! caller adds modules and directives (`{dir}` in them becomes the instance's directory, where
//! `www/` is the document root and `access.log` the access log, in the caller's `LogFormat`
//! named `t`). Stopped (SIGTERM, then SIGKILL) when dropped.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Apache {
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    child: Child,
}

impl Apache {
    /// `modules`: module names to load beyond mpm_event, authz_core and dir (`auth_digest`);
    /// `conf`: more directives; `log_format`: the access log's `LogFormat` string.
    pub fn start(modules: &[&str], conf: &str, log_format: &str) -> Apache {
        let bin = Path::new("/usr/sbin/apache2");
        assert!(
            bin.exists(),
            "Apache is not installed. Run scripts/test (it installs Debian's apache2)"
        );
        let mut last = String::new();
        for _ in 0..5 {
            match Apache::try_start(bin, modules, conf, log_format) {
                Ok(a) => return a,
                Err(e) => last = e,
            }
        }
        panic!("apache did not start after 5 tries: {last}");
    }

    fn try_start(
        bin: &Path,
        modules: &[&str],
        conf: &str,
        log_format: &str,
    ) -> Result<Apache, String> {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let port = crate::servers::net::free_port();
        std::fs::create_dir_all(dir.path().join("www")).unwrap();
        std::fs::write(dir.path().join("www/index.html"), "hello from apache\n").unwrap();
        let m = "/usr/lib/apache2/modules";
        let mut text = String::new();
        for name in ["mpm_event", "authz_core", "dir"].iter().chain(modules) {
            text.push_str(&format!("LoadModule {name}_module {m}/mod_{name}.so\n"));
        }
        text.push_str(&format!(
            r#"User www-data
Group www-data
ServerName 127.0.0.1
Listen 127.0.0.1:{port}
PidFile {d}/httpd.pid
ErrorLog {d}/error.log
LogFormat "{log_format}" t
CustomLog {d}/access.log t
DocumentRoot {d}/www
DirectoryIndex index.html
MaxKeepAliveRequests 0
<Directory {d}/www>
  Require all granted
</Directory>
{conf}
"#,
            conf = conf.replace("{dir}", &d)
        ));
        std::fs::write(dir.path().join("httpd.conf"), text).unwrap();
        // Apache's children run as www-data: let them read the files.
        let _ = Command::new("chmod").args(["-R", "a+rX", &d]).status();
        let mut child = Command::new(bin)
            .args(["-f", &format!("{d}/httpd.conf"), "-DFOREGROUND"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawn apache2: {e}"))?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default();
                return Err(format!(
                    "apache exited at start on {addr} ({status}): {log}"
                ));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                return Ok(Apache { addr, dir, child });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        Err(format!("apache on {addr} did not listen within 10 s"))
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The access log once Apache stopped adding to it (it writes each request as it
    /// completes).
    pub fn log_text(&self) -> String {
        let path = self.dir.path().join("access.log");
        let mut last = String::new();
        for _ in 0..40 {
            std::thread::sleep(Duration::from_millis(50));
            let now = std::fs::read_to_string(&path).unwrap_or_default();
            if now == last && !now.is_empty() {
                break;
            }
            last = now;
        }
        last
    }
}

impl Drop for Apache {
    fn drop(&mut self) {
        crate::servers::net::stop_child(&mut self.child);
    }
}
