//! Parse, run, print the error chain on one line, map it to an exit code. Nothing else.

use clap::Parser;

fn main() {
    ebpf_prof::out::install();
    let cli = ebpf_prof::cli::Cli::parse();
    if let Err(err) = ebpf_prof::cli::run(cli) {
        let line = format!("{err:#}");
        let line = ebpf_prof::out::escape_controls(&line, ebpf_prof::out::Keep::Layout);
        ebpf_prof::out::err_text(&format!("ebpf-prof: error: {line}\n"));
        std::process::exit(ebpf_prof::error::exit_code(&err));
    }
}
