//! One file per subcommand, each a short script over the modules: parse nothing (the CLI
//! did), call the domain modules, print.

pub mod annotate;
pub mod bench;
pub mod demo;
pub mod diff;
pub mod doctor;
pub mod flame;
pub mod hook;
pub mod overhead;
pub mod record;
pub mod report;
