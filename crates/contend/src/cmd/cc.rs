//! `contend cc -- COMPILER ARGS...`: builds a program for the sharing detector (`contend c2c
//! record`) with the `ccwrap` crate, which says what changes in the user's command.

use crate::exit::bad_input;

#[derive(clap::Args)]
pub struct Args {
    /// Print the compiler commands contend runs, on stderr.
    #[arg(short, long)]
    verbose: bool,
    /// The compiler and its arguments, after `--` (`contend cc -- gcc -O2 -g x.c -o x`).
    /// Without a compiler name (`CC="contend cc --"`), `$CONTEND_CC` or else `cc` (`c++` for
    /// C++ sources) is used.
    #[arg(last = true, value_name = "COMPILER ARGS", required = true)]
    command: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut show = |step: &ccwrap::Step| {
        if args.verbose {
            crate::ui::plain(format_args!("contend cc: {step}"));
        }
    };
    match ccwrap::run(&args.command, &mut show) {
        Ok(0) => Ok(()),
        // The compiler's own status (its messages are on stderr already).
        Ok(code) => std::process::exit(code),
        Err(e) if e.is_bad_input() => Err(bad_input(e.to_string())),
        Err(e) => Err(e.into()),
    }
}
