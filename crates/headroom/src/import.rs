//! `headroom import tsung|httperf|har FILE`: bring existing load files over as native scenarios.
//! The YAML goes to stdout (or `-o FILE`); every warning (an element or attribute not honoured)
//! goes to stderr with its line, so nothing is dropped silently.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::parse::{parse_duration, UsageError};

pub const IMPORT_LONG: &str = "\
Convert a Tsung XML, httperf wsesslog or HAR file into a native scenario (YAML on stdout, or -o
FILE). Every element or attribute that is not honoured is one warning on stderr with its
file:line:column, so nothing is dropped silently; read them, then edit the YAML.

Examples:
  headroom import tsung tsung.xml -o scenario.yaml
  headroom run scenario.yaml --target 127.0.0.1:8080 --out runs/imported
  headroom import httperf sessions.log --server 127.0.0.1:8080 --rate 20 --duration 2m > s.yaml
  headroom import har recording.har --users 10 -o replay.yaml     # 10 users back to back
  headroom import har recording.har --rate 2 --duration 5m        # 2 new users a second
  headroom run tsung.xml                                          # Tsung files and HARs also run directly

Exit codes: 0 converted (warnings or not); 1 a file could not be written; 2 bad command line or
a file headroom cannot read (the message says where). See docs/import.md for what maps to what.";

#[derive(Args, Debug)]
// The text is given on the subcommand (args.rs): a variant's doc comment would replace it here.
pub struct ImportArgs {
    #[command(subcommand)]
    pub format: ImportFormat,
}

#[derive(Subcommand, Debug)]
pub enum ImportFormat {
    /// A Tsung XML file: servers, arrival phases, sessions with probabilities, requests, think
    /// times, transactions, loops, dynamic variables, matches. (`headroom run FILE.xml` runs one
    /// directly.)
    Tsung(TsungArgs),
    /// An httperf --wsesslog session file: sessions of request bursts with think times.
    Httperf(HttperfArgs),
    /// A HAR (HTTP Archive, saved by browsers' devtools and recording proxies): its requests in
    /// order with bodies and headers, think times from the timestamps, pages as transactions.
    /// Files above 64 MiB are refused. (`headroom run FILE.har` runs one directly.)
    Har(HarArgs),
}

#[derive(Args, Debug)]
pub struct HarArgs {
    /// The HAR file.
    pub file: PathBuf,
    /// Write the scenario here instead of stdout.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Users replaying the recording back to back (a closed population; default 1).
    #[arg(long, value_name = "N", conflicts_with = "rate")]
    pub users: Option<u64>,
    /// Instead, new users per second, each replaying the recording once.
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// Length of the arrival phase (with --rate).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
}

#[derive(Args, Debug)]
pub struct TsungArgs {
    /// The Tsung XML file.
    pub file: PathBuf,
    /// Write the scenario here instead of stdout.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct HttperfArgs {
    /// The wsesslog file.
    pub file: PathBuf,
    /// Write the scenario here instead of stdout.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Server the sessions go to (httperf's --server/--port), HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:80", value_name = "HOST:PORT")]
    pub server: String,
    /// New sessions per second (httperf's --rate).
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// Length of the arrival phase.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
}

fn emit(
    imported: headroom_scenario::Imported,
    output: &Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    for w in &imported.warnings {
        eprintln!("headroom: warning: {w}");
    }
    let yaml = headroom_scenario::to_yaml(&imported.scenario);
    match output {
        Some(p) => std::fs::write(p, &yaml)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?,
        None => out!("{yaml}"),
    }
    Ok(ExitCode::SUCCESS)
}

pub fn cmd_import(a: &ImportArgs) -> anyhow::Result<ExitCode> {
    match &a.format {
        ImportFormat::Tsung(t) => {
            let name = t.file.display().to_string();
            let text = headroom_scenario::read_bounded_string(
                &t.file,
                headroom_scenario::MAX_SCENARIO_BYTES,
                "Tsung file",
            )
            .map_err(UsageError)?;
            let imported = headroom_scenario::import_tsung(&text, &name)
                .map_err(headroom_run::spec::errors_to_usage)?;
            emit(imported, &t.output)
        }
        ImportFormat::Httperf(h) => {
            let name = h.file.display().to_string();
            let text = headroom_scenario::read_bounded_string(
                &h.file,
                headroom_scenario::MAX_SCENARIO_BYTES,
                "httperf session file",
            )
            .map_err(UsageError)?;
            let (host, port) = h
                .server
                .rsplit_once(':')
                .and_then(|(host, p)| Some((host.to_string(), p.parse::<u16>().ok()?)))
                .ok_or_else(|| {
                    UsageError(format!(
                        "bad --server '{}': expected HOST:PORT such as 127.0.0.1:8080",
                        h.server
                    ))
                })?;
            if let Some(r) = h.rate {
                if !(r.is_finite() && r > 0.0) {
                    return Err(UsageError(format!("bad --rate {r}: a positive number")).into());
                }
            }
            let opts = headroom_scenario::HttperfOptions {
                host,
                port,
                rate: h.rate,
                duration: h.duration,
            };
            let imported = headroom_scenario::import_httperf(&text, &name, &opts)
                .map_err(headroom_run::spec::errors_to_usage)?;
            emit(imported, &h.output)
        }
        ImportFormat::Har(h) => {
            let name = h.file.display().to_string();
            let text = headroom_scenario::har::read_har_file(&h.file)
                .map_err(|e| UsageError(format!("{name}: {e}")))?;
            let opts = headroom_scenario::HarOptions {
                users: h.users,
                rate: h.rate,
                duration: h.duration,
            };
            let imported = headroom_scenario::import_har(&text, &name, &opts)
                .map_err(headroom_run::spec::errors_to_usage)?;
            emit(imported, &h.output)
        }
    }
}
