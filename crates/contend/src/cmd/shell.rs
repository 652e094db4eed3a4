//! `contend completions SHELL` and `contend man`: generated from the command-line definition
//! itself (clap_complete, clap_mangen), so they never disagree with the parser.

use anyhow::{Context, Result};
use clap_complete::Shell;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    ///
    /// bash: `source <(contend completions bash)`, or save it as
    /// /usr/share/bash-completion/completions/contend; zsh: save it as `_contend` in a
    /// directory of `$fpath`; fish: save it as ~/.config/fish/completions/contend.fish.
    pub shell: Shell,
}

#[derive(clap::Args)]
pub struct ManArgs {
    /// The subcommand whose page to print (`record`, `bench atomic`); none: contend(1).
    pub command: Vec<String>,
    /// Write every page (contend.1 and one per subcommand, contend-record.1, ...) into this
    /// directory instead of printing contend.1 (for packaging: /usr/share/man/man1).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

/// Prints the completion script for `args.shell`.
pub fn completions(args: CompletionsArgs, mut command: clap::Command) -> Result<()> {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut command, "contend", &mut out);
    crate::output::out!("{}", String::from_utf8_lossy(&out));
    Ok(())
}

/// Prints the manual page (roff), or writes all of them into `--out-dir`.
pub fn man(args: ManArgs, command: clap::Command) -> Result<()> {
    if let Some(dir) = args.out_dir {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        clap_mangen::generate_to(command, &dir)
            .with_context(|| format!("cannot write the manual pages into {}", dir.display()))?;
        eprintln!("contend: manual pages written into {}", dir.display());
        return Ok(());
    }
    // The page of a subcommand is named as generate_to names it: contend-bench-atomic(1).
    let mut page = command;
    page.build();
    let mut name = "contend".to_string();
    for word in &args.command {
        let Some(sub) = page.find_subcommand(word).cloned() else {
            return Err(crate::exit::bad_input(format!(
                "`{name}` has no subcommand `{word}`: see `{name} --help`"
            )));
        };
        name = format!("{name}-{word}");
        page = sub.name(name.clone());
    }
    let mut out = Vec::new();
    clap_mangen::Man::new(page).render(&mut out)?;
    crate::output::out!("{}", String::from_utf8_lossy(&out));
    Ok(())
}
