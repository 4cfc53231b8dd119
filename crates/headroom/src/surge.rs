//! `headroom surge fileset DIR`: write a SURGE file set (Barford & Crovella 1998) for a server
//! to serve, so that a `surge` scenario session has files of SURGE's sizes to request.
//!
//! The command line only: the flags, and [`main`], which prints the summary or the error. The
//! writer, its manifest and their tests are `headroom_serve::surge`; the sampling code is
//! `headroom_core::surge`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use headroom_serve::surge::{params_from_flags, write_fileset, FilesetError, FilesetSummary};

const FILESET_LONG: &str = "\
Write a SURGE file set: FILES files named by popularity rank (000000.html is the most popular) \
whose sizes follow the SURGE model (Barford & Crovella, SIGMETRICS 1998): a lognormal body \
(mu 9.357, sigma 1.318 in ln bytes) cut at 133,000 bytes, above it a Pareto tail (alpha 1.1) \
holding about 4.9% of the files (the share that makes the density continuous), capped at 64 MiB. \
Sizes are drawn from --seed, independently of the ranks. DIR/surge-manifest.json lists the \
parameters and every file's rank, name and size.

Serve the set with `headroom serve --docroot DIR` (or any web server) and load it with a \
scenario session `sessions: [{name: web, surge: {files: N}}]` (see docs/surge.md).

Keys of --set KEY=VALUE (durations in seconds): files, zipf_exponent, size_mu, size_sigma, \
tail_k, tail_alpha, tail_fraction, max_size, embedded_k, embedded_alpha, max_embedded, off_k, \
off_alpha, max_off, active_off_scale, active_off_shape, requests_per_session, pipeline, seed. \
Only files and the size keys (size_*, tail_*, max_size, seed) change the file set.

Examples:
  headroom surge fileset /tmp/surge
  headroom surge fileset /tmp/surge --files 10000 --seed 7
  headroom surge fileset /tmp/surge --set tail_fraction=0.07 --force

Exit codes: 0 written; 1 I/O error; 2 bad command line (bad KEY or value, DIR not empty \
without --force).";

#[derive(Args, Debug)]
pub struct SurgeArgs {
    #[command(subcommand)]
    pub cmd: SurgeCmd,
}

#[derive(Subcommand, Debug)]
pub enum SurgeCmd {
    /// Write a SURGE file set (heavy-tailed file sizes, Zipf-ranked names) into a directory.
    #[command(long_about = FILESET_LONG)]
    Fileset(FilesetArgs),
}

#[derive(Args, Debug, Clone)]
pub struct FilesetArgs {
    /// Directory to write (created if missing).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Number of files.
    #[arg(long, default_value_t = 2000)]
    pub files: u64,
    /// Seed of the file sizes (the same seed and parameters give the same set).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Override a SURGE parameter, e.g. --set tail_fraction=0.07 (repeatable; keys in --help).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Write into a non-empty directory (files of the same names are replaced).
    #[arg(long)]
    pub force: bool,
}

/// Run `headroom surge ...`: print the summary, or one line on stderr and exit 2 (bad input) or
/// 1 (I/O error).
pub fn main(args: SurgeArgs) -> ExitCode {
    match args.cmd {
        SurgeCmd::Fileset(a) => match fileset(&a) {
            Ok(summary) => {
                // Through `outln!`: `| head` closing stdout is no panic.
                outln!("{}", summary.paragraph());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("headroom: {e}");
                ExitCode::from(match e {
                    FilesetError::Usage(_) => 2,
                    FilesetError::Io(_) => 1,
                })
            }
        },
    }
}

/// `headroom surge fileset`: check the arguments and write the set.
pub fn fileset(a: &FilesetArgs) -> Result<FilesetSummary, FilesetError> {
    let params = params_from_flags(a.files, a.seed, &a.set)?;
    write_fileset(&a.dir, &params, a.force)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use headroom_core::surge::SurgeParams;

    #[derive(Parser, Debug)]
    struct TestCli {
        #[command(subcommand)]
        cmd: SurgeCmd,
    }

    #[test]
    fn clap_definition_is_valid_and_help_lists_every_key() {
        use clap::CommandFactory;
        TestCli::command().debug_assert();
        for k in SurgeParams::KEYS {
            assert!(FILESET_LONG.contains(k), "--help does not mention {k}");
        }
    }
}
