//! `headroom completions SHELL` and `headroom man`: shell completions (clap_complete) and man
//! pages (clap_mangen) generated from the command line's own definition, so they never drift
//! from it. The Debian package installs both.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory};

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  source <(headroom completions bash)                   # this shell
  headroom completions bash > /etc/bash_completion.d/headroom
  headroom completions zsh > \"${fpath[1]}/_headroom\"
  headroom completions fish > ~/.config/fish/completions/headroom.fish")]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  headroom man | man -l -                                # read it now
  headroom man --dir /usr/local/share/man/man1           # headroom.1 and headroom-run.1, ...")]
pub struct ManArgs {
    /// Write headroom.1 and one page per subcommand (headroom-run.1, ...) into DIR instead of
    /// printing headroom.1 on stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

pub fn cmd_completions(a: &CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = crate::args::Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "headroom", &mut buf);
    out!("{}", String::from_utf8_lossy(&buf));
    Ok(ExitCode::SUCCESS)
}

pub fn cmd_man(a: &ManArgs) -> anyhow::Result<ExitCode> {
    let cmd = crate::args::Cli::command();
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
