//! `headroom completions SHELL` and `headroom man`: shell completions (clap_complete) and man
//! pages (clap_mangen) generated from the command line's own definition, so they never drift
//! from it. The Debian package installs both.

use std::process::ExitCode;

use clap::CommandFactory;

use crate::args::{Cli, CompletionsArgs, ManArgs};

pub fn cmd_completions(a: &CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "headroom", &mut buf);
    out!("{}", String::from_utf8_lossy(&buf));
    Ok(ExitCode::SUCCESS)
}

pub fn cmd_man(a: &ManArgs) -> anyhow::Result<ExitCode> {
    let cmd = Cli::command();
    match &a.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir).map_err(|e| {
                anyhow::anyhow!("cannot write the pages into {}: {e}", dir.display())
            })?;
            outln!("{}", dir.display());
        }
        None => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut buf)?;
            out!("{}", String::from_utf8_lossy(&buf));
        }
    }
    Ok(ExitCode::SUCCESS)
}
