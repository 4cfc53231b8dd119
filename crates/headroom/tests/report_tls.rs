//! `headroom report` on a TLS run: a run over TLS against headroom serve with a self-signed
//! certificate (in this process, on loopback) shows its handshake time beside connect time (the
//! latency table, a `tls` chart over time), its protocol and TLS settings, and its handshake
//! counts; a plain run shows none of the TLS parts. `report A B` compares TLS handshake p99
//! only when both runs have it.

mod common;

use std::path::Path;

use common::{attrs, headroom, run_into, serve, succeeded};

/// headroom serve (reactor, one worker) over TLS with a self-signed certificate.
fn serve_tls() -> headroom_serve::RunningServer {
    headroom_serve::start(headroom_serve::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        tls: Some(headroom_serve::TlsSource::SelfSigned),
        ..Default::default()
    })
    .expect("start headroom serve --tls-self-signed")
}

/// `headroom run URL ARGS --out DIR`, which must succeed.
fn run(url: &str, args: &[&str], dir: &Path) {
    succeeded(&run_into(&[&[url], args].concat(), dir));
}

/// `headroom report DIRS... EXTRA`, which must succeed; the page it wrote.
fn report(dirs: &[&Path], extra: &[&str], page: &Path) -> String {
    let out = headroom()
        .arg("report")
        .args(dirs)
        .args(extra)
        .output()
        .unwrap();
    succeeded(&out);
    std::fs::read_to_string(page).unwrap()
}

/// The `<tr>` whose header cell is `name` (`None` when there is none).
fn row<'a>(html: &'a str, name: &str) -> Option<&'a str> {
    let start = html.find(&format!("<tr><th>{name}</th>"))?;
    let end = start + html[start..].find("</tr>")?;
    Some(&html[start..end])
}

/// The numbers in a row's cells, in order.
fn numbers(row: &str) -> Vec<f64> {
    row.split("<td")
        .skip(1)
        .filter_map(|c| c.split('>').nth(1)?.split('<').next()?.trim().parse().ok())
        .collect()
}

#[test]
fn a_tls_runs_report_shows_its_handshakes_and_a_plain_one_does_not() {
    let tls_server = serve_tls();
    let plain_server = serve();
    let tmp = tempfile::tempdir().unwrap();
    let (tls, plain, tls_ka) = (
        tmp.path().join("tls"),
        tmp.path().join("plain"),
        tmp.path().join("tls-keepalive"),
    );
    let https = format!("https://{}/", tls_server.local_addr());
    // A connection (and a handshake, resumed after the first) per request.
    run(
        &https,
        &["-k", "-c", "4", "-n", "200", "--no-keepalive"],
        &tls,
    );
    run(&https, &["-k", "-c", "4", "-n", "200"], &tls_ka);
    let http = format!("http://{}/", plain_server.local_addr());
    run(&http, &["-c", "4", "-n", "200"], &plain);
    tls_server.stop();
    plain_server.stop();

    // The TLS run.
    let html = report(&[&tls], &[], &tls.join("report.html"));
    let charts = attrs(&html, "data-chart=", "data-chart");
    assert_eq!(
        charts.iter().filter(|c| **c == "tls").count(),
        1,
        "{charts:?}"
    );
    // After connect, as connect time's neighbour.
    let at = |n: &str| charts.iter().position(|c| *c == n).unwrap();
    assert_eq!(at("tls"), at("connect") + 1, "{charts:?}");
    let handshake = row(&html, "TLS handshake").expect("a TLS handshake latency row");
    let figures = numbers(handshake);
    assert!(figures[0] >= 190.0, "count {handshake}");
    assert!(figures[1] > 0.0, "mean {handshake}");
    assert!(row(&html, "connect").is_some());
    let handshakes = numbers(row(&html, "TLS handshakes").expect("a handshakes row"))[0];
    let resumed = numbers(row(&html, "TLS handshakes resumed").expect("a resumed row"))[0];
    assert!(
        (190.0..=210.0).contains(&handshakes),
        "{handshakes} handshakes for 200 requests, one connection each"
    );
    assert!(resumed > 0.0 && resumed <= handshakes, "{resumed}");
    let protocol = row(&html, "protocol").expect("a protocol row");
    assert!(protocol.contains("http/1.1"), "{protocol}");
    let settings = row(&html, "TLS").expect("the TLS settings");
    assert!(settings.contains("insecure=true"), "{settings}");
    assert!(settings.contains("resume=true"), "{settings}");
    // HTTP/1.1: no HTTP/2 counters, no streams.
    assert!(!html.contains("HTTP/2 frames"));
    assert!(row(&html, "streams per connection").is_none());

    // The plain run: the protocol, and nothing of TLS.
    let html = report(&[&plain], &[], &plain.join("report.html"));
    let charts = attrs(&html, "data-chart=", "data-chart");
    assert!(!charts.contains(&"tls"), "{charts:?}");
    assert_eq!(charts.len(), headroom_report::charts::NAMES.len());
    for name in [
        "TLS handshake",
        "TLS handshakes",
        "TLS handshakes resumed",
        "TLS",
    ] {
        assert!(row(&html, name).is_none(), "a plain run has {name}");
    }
    assert!(row(&html, "protocol").unwrap().contains("http/1.1"));

    // Two TLS runs compare their handshake times; a TLS run against a plain one does not.
    let both = tmp.path().join("both.html");
    let html = report(&[&tls, &tls_ka], &["-o", both.to_str().unwrap()], &both);
    let p99 = row(&html, "TLS handshake p99 (ms)").expect("TLS p99 compared");
    assert_eq!(numbers(p99).len(), 2, "a and b: {p99}");
    assert!(p99.contains('×'), "and b / a: {p99}");
    assert!(row(&html, "TLS handshake p50 (ms)").is_some());
    assert!(attrs(&html, "data-chart=", "data-chart").contains(&"tls"));
    let mixed = tmp.path().join("mixed.html");
    let html = report(&[&tls, &plain], &["-o", mixed.to_str().unwrap()], &mixed);
    assert!(row(&html, "TLS handshake p99 (ms)").is_none());
    assert!(row(&html, "latency p99 (ms)").is_some());
}
